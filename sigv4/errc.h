#pragma once

#include <system_error>

namespace fencepost::sigv4 {

// Why a received request's signature cannot be checked, or why credentials
// cannot be loaded. The front door maps each to S3's code (SPEC, "S3 front
// door"); the messages never hold a secret.
enum class Errc {
  kOk = 0,
  kNotSigned = 1,             // no Authorization, no X-Amz-Signature (403)
  kMalformed = 2,             // an Authorization or X-Amz-* the grammar refuses
  kUnsupportedAlgorithm = 3,  // anything but AWS4-HMAC-SHA256
  kBadDate = 4,              // X-Amz-Date missing, malformed or not the scope's
  kMissingSignedHeader = 5,  // SignedHeaders names a header the request lacks
  kHostNotSigned = 6,        // SignedHeaders leaves out host
  kMissingContentSha256 = 7,  // header auth without x-amz-content-sha256
  kBadEncoding = 8,           // a % not followed by two hex digits
  kTimeTooSkewed = 9,         // X-Amz-Date too far from the clock
  kExpired = 10,              // a presigned URL past X-Amz-Expires
  kNoCredentials = 20,        // nothing in the environment or the file
  kBadCredentials = 21,       // a credentials file or variable refused
  // An aws-chunked body or an x-amz-checksum-* (chunked.h, checksum.h).
  kBadChunk = 30,                // framing refused: size line, CRLF, garbage
  kIncompleteBody = 31,          // ends before its final chunk and trailer
  kLengthMismatch = 32,          // not x-amz-decoded-content-length bytes
  kChunkSignatureMismatch = 33,  // a chunk or trailer signature absent/wrong
  kBadTrailer = 34,              // a trailer line malformed or not announced
  kMissingChecksum = 35,         // the announced trailing checksum is absent
  kChecksumMismatch = 36,        // a checksum that is not the data's
  kUnsupportedChecksum = 37,     // x-amz-trailer names no known checksum
  kChecksumConflict = 38,        // two x-amz-checksum-* announced or sent
  // A body against its x-amz-content-sha256 (body_check.h).
  kPayloadHashMismatch = 39,  // not the body's hex SHA-256 (400)
  kUnsupportedPayload = 40,   // neither a hex SHA-256 nor a form decoded here
};

const std::error_category& Category();

}  // namespace fencepost::sigv4

template <>
struct std::is_error_code_enum<fencepost::sigv4::Errc> : std::true_type {};

namespace fencepost::sigv4 {
inline std::error_code make_error_code(Errc e) {
  return {static_cast<int>(e), Category()};
}
}  // namespace fencepost::sigv4
