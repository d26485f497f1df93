#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace fencepost::s3 {

// S3's error answers, read once for every reader of a store's answers (the
// s3:// backend, `fencepost probe s3://`). The front door writes its own
// error documents with EscapeXml (s3/xml.h).

// The longest text kept of one field of an error answer, in bytes.
inline constexpr std::size_t kMaxErrorField = 256;

// S3's error document (<Error><Code>, <Message>, <RequestId>): each field's
// text with XML's five entities decoded, a line break or tab made a space,
// any other control character dropped, and at most kMaxErrorField bytes
// kept; a field absent is "".
struct ErrorDocument {
  std::string code;
  std::string message;
  std::string request_id;
};

// nullopt when `body` is no error document: no <Error> element and none of
// the three fields. S3's error documents are flat and carry no CDATA.
std::optional<ErrorDocument> ParseErrorDocument(std::string_view body);

// What an answer says: its status, the error document's fields (empty when
// absent), and the request id from the x-amz-request-id field
// (`request_id_field`, bounded as Bounded does) when the body has none (a
// HEAD's error has no body). Nothing is invented.
struct ErrorAnswer {
  unsigned status = 0;
  std::string code;
  std::string message;
  std::string request_id;
};
ErrorAnswer ReadErrorAnswer(unsigned status, std::string_view body,
                            std::string_view request_id_field);

// An answer for people: "HTTP 200" for a success; for an error "HTTP 403
// SignatureDoesNotMatch" with ": MESSAGE" when the store gave one, and ",
// request id ID" (ReadErrorAnswer's). Each on one line, at most 200
// characters of it. Never the rest of the body.
std::string DescribeAnswer(unsigned status, std::string_view body,
                           std::string_view request_id_field);

// `text`'s first kMaxErrorField bytes less their control characters: a
// store's or a client's text fit for a log line or an error document.
std::string Bounded(std::string_view text);

}  // namespace fencepost::s3
