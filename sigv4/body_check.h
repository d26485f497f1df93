#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sigv4/canonical.h"
#include "sigv4/checksum.h"
#include "sigv4/chunked.h"
#include "sigv4/crypto.h"

namespace fencepost::sigv4 {

// Checking an S3 request's body against what its headers say of it while
// the body streams through (a PutObject or UploadPart of up to 5 GiB is
// never held whole): x-amz-content-sha256 (a hex SHA-256, UNSIGNED-PAYLOAD
// or an aws-chunked kind, decoded on the way), the x-amz-checksum-* header
// and Content-MD5. The caller has verified the request's own signature
// (verifier.h) first.

// What a request says about its body, read from its headers by the caller.
struct BodyExpect {
  // x-amz-content-sha256 as sent: a lower-case hex SHA-256 (checked),
  // UNSIGNED-PAYLOAD (nothing to check there), or one of the aws-chunked
  // kinds (StreamingPayloadKind).
  std::string content_sha256;
  // A presigned URL: the payload is unsigned whatever content_sha256 says
  // (S3 takes the body as it is).
  bool presigned = false;
  // Read for the aws-chunked kinds only; its kind is content_sha256's.
  ChunkedCheck chunked;
  // The request's headers, for x-amz-checksum-* and Content-MD5.
  std::vector<Header> headers;
};

// One request body, fed as it arrives in any split (one byte at a time
// included). Each error is returned as soon as the bytes received decide
// it (ChunkedDecoder says when, for aws-chunked), and again by every later
// call. The body's data is handed out as it arrives, before its checks
// have passed: the caller must not let the body's last byte take effect
// (complete an object) before Finish succeeds. Memory: buffered() bytes
// of the body, whatever its size, and a few digests. Not thread-safe.
class BodyCheck {
 public:
  // Refuses the expectations themselves at once, as error() then says:
  //   kUnsupportedPayload      content_sha256 is none of the forms above
  //   kMissingChecksum, kUnsupportedChecksum, kChecksumConflict
  //                            x-amz-trailer (aws-chunked trailer kinds)
  //   kChecksumConflict        two x-amz-checksum-* headers
  //   kMalformed               Content-MD5 twice, or not the base64 of 16
  //                            bytes
  explicit BodyCheck(BodyExpect expect);
  BodyCheck(const BodyCheck&) = delete;
  BodyCheck& operator=(const BodyCheck&) = delete;

  // The first error met so far.
  std::error_code error() const { return error_; }

  // Takes the next received bytes of the body and appends its data among
  // them to `*data`: aws-chunked, the decoded chunk data (errors:
  // ChunkedDecoder::Feed's); otherwise the bytes as they are. On error
  // nothing is appended.
  std::error_code Feed(std::string_view received, std::string* data);

  // At the end of the received body, in this order: aws-chunked,
  // ChunkedDecoder::Finish's errors (kIncompleteBody, kLengthMismatch, the
  // final chunk's and trailer's signatures, the trailing checksum); a hex
  // content_sha256, kPayloadHashMismatch; then kChecksumMismatch for the
  // x-amz-checksum-* header, then for Content-MD5. Call once, after the
  // last Feed.
  std::error_code Finish();

  // Bytes of the body held back: at most kMaxChunkLine + 2.
  std::size_t buffered() const { return decoder_ ? decoder_->buffered() : 0; }

 private:
  std::error_code error_;
  bool finished_ = false;
  std::optional<ChunkedDecoder> decoder_;  // aws-chunked
  std::optional<Sha256> payload_hash_;     // a hex content_sha256
  std::string expected_hash_;
  HeaderChecksum header_checksum_;
  ContentMd5 content_md5_;
};

}  // namespace fencepost::sigv4
