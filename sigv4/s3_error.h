#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fencepost::sigv4 {

// S3's error document (<Error><Code>, <Message>, <RequestId>), read once
// for every reader of a store's answers (the s3:// backend, `probe`): each
// field's text with XML's five entities decoded, a line break or tab made a
// space, any other control character dropped, and at most kMaxS3ErrorField
// bytes kept; a field absent is "".
inline constexpr std::size_t kMaxS3ErrorField = 256;
struct S3ErrorDocument {
  std::string code;
  std::string message;
  std::string request_id;
};

// nullopt when `body` is no error document: no <Error> element and none of
// the three fields. S3's error documents are flat and carry no CDATA.
std::optional<S3ErrorDocument> ParseS3ErrorDocument(std::string_view body);

}  // namespace fencepost::sigv4
