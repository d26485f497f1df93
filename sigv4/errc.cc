#include "sigv4/errc.h"

#include <string>

namespace fencepost::sigv4 {
namespace {

class SigV4Category : public std::error_category {
 public:
  const char* name() const noexcept override { return "sigv4"; }

  std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::kOk:
        return "success";
      case Errc::kNotSigned:
        return "the request is not signed";
      case Errc::kMalformed:
        return "malformed SigV4 authorization";
      case Errc::kUnsupportedAlgorithm:
        return "only AWS4-HMAC-SHA256 is supported";
      case Errc::kBadDate:
        return "X-Amz-Date is missing, malformed or not the scope's date";
      case Errc::kMissingSignedHeader:
        return "a signed header is missing from the request";
      case Errc::kHostNotSigned:
        return "the host header must be signed";
      case Errc::kMissingContentSha256:
        return "x-amz-content-sha256 is required";
      case Errc::kBadEncoding:
        return "malformed percent-encoding";
      case Errc::kTimeTooSkewed:
        return "the request time is too far from the server's clock";
      case Errc::kExpired:
        return "the presigned request has expired";
      case Errc::kNoCredentials:
        return "no AWS credentials found";
      case Errc::kBadCredentials:
        return "AWS credentials refused";
      case Errc::kBadChunk:
        return "malformed aws-chunked body";
      case Errc::kIncompleteBody:
        return "the aws-chunked body ends before its last chunk";
      case Errc::kLengthMismatch:
        return "the decoded body is not x-amz-decoded-content-length bytes";
      case Errc::kChunkSignatureMismatch:
        return "a chunk or trailer signature does not match";
      case Errc::kBadTrailer:
        return "malformed or unannounced trailer";
      case Errc::kMissingChecksum:
        return "the trailing checksum x-amz-trailer announces is missing";
      case Errc::kChecksumMismatch:
        return "the checksum does not match the data";
      case Errc::kUnsupportedChecksum:
        return "unsupported checksum algorithm";
      case Errc::kChecksumConflict:
        return "more than one checksum";
      case Errc::kPayloadHashMismatch:
        return "x-amz-content-sha256 is not the body's SHA-256";
      case Errc::kUnsupportedPayload:
        return "x-amz-content-sha256 is not a SHA-256, UNSIGNED-PAYLOAD or "
               "an aws-chunked form fencepost decodes";
    }
    return "unknown sigv4 error";
  }
};

}  // namespace

const std::error_category& Category() {
  static const SigV4Category category;
  return category;
}

}  // namespace fencepost::sigv4
