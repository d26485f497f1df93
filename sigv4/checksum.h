#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "sigv4/canonical.h"

struct evp_md_ctx_st;

namespace fencepost::sigv4 {

// S3's additional checksums (x-amz-checksum-crc32, -crc32c, -crc64nvme,
// -sha1, -sha256): sent as a header beside a plain body, or as the trailer
// of an aws-chunked one. The value is the base64 of the digest's bytes, a
// CRC's most significant byte first. CRC-32 is zlib's (reflected
// 0xEDB88320), CRC-32C Castagnoli's (reflected 0x82F63B78), CRC-64/NVME
// reflected 0x9A6C9329AC4BC9B5, all three with all-ones init and xorout;
// SHA-1 and SHA-256 through libcrypto.

enum class ChecksumAlgorithm { kCrc32, kCrc32c, kCrc64Nvme, kSha1, kSha256 };

// "x-amz-checksum-crc32c" and so on.
std::string_view ChecksumHeaderName(ChecksumAlgorithm algorithm);

// The algorithm a header name stands for, any case ("X-Amz-Checksum-CRC32");
// nullopt for any other name (x-amz-checksum-type, x-amz-checksum-foo).
std::optional<ChecksumAlgorithm> ChecksumFromHeaderName(std::string_view name);

// Raw CRCs, for known answers: Crc32c("123456789") == 0xE3069283.
std::uint32_t Crc32(std::string_view data, std::uint32_t crc = 0);
std::uint32_t Crc32c(std::string_view data, std::uint32_t crc = 0);
std::uint64_t Crc64Nvme(std::string_view data, std::uint64_t crc = 0);
// Each takes the previous result as `crc` to continue over more data:
// Crc32(b, Crc32(a)) == Crc32(a + b).

// Standard base64 with '=' padding, as the x-amz-checksum-* values are.
std::string Base64(std::string_view bytes);

// A checksum of data that arrives in pieces. Not thread-safe.
class Checksum {
 public:
  explicit Checksum(ChecksumAlgorithm algorithm);
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;

  ChecksumAlgorithm algorithm() const { return algorithm_; }
  void Update(std::string_view data);
  // The value as S3 spells it (base64 of the digest); call once.
  std::string Base64Digest();

 private:
  struct Free {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  ChecksumAlgorithm algorithm_;
  std::uint64_t crc_ = 0;
  std::unique_ptr<evp_md_ctx_st, Free> md_;  // SHA-1, SHA-256
};

// The base64 value of `data`'s checksum: Base64Checksum(kCrc32c, "") is
// "AAAAAA==".
std::string Base64Checksum(ChecksumAlgorithm algorithm, std::string_view data);

// The x-amz-checksum-<alg> header of a plain (not aws-chunked, or decoded)
// body, checked over the body as it arrives. Not thread-safe.
class HeaderChecksum {
 public:
  // Reads the x-amz-checksum-<alg> header among `headers` (any case; other
  // headers ignored, x-amz-checksum-type and unknown x-amz-checksum-* names
  // among them). Errors: kChecksumConflict (two or more).
  std::error_code Expect(std::span<const Header> headers);
  void Update(std::string_view data);
  // Success when there is no header, or one that matches everything
  // updated (base64 compared exactly); else kChecksumMismatch. Call once.
  std::error_code Check();

 private:
  std::optional<Checksum> checksum_;
  std::string expected_;
};

// A body's Content-MD5 (RFC 1864: the base64 of its MD5), checked as S3
// does for a body the signature may not cover (UNSIGNED-PAYLOAD, a
// presigned URL), over the body as it arrives. Not thread-safe.
class ContentMd5 {
 public:
  // Reads Content-MD5 (any case) among `headers`. Errors: kMalformed (two,
  // or one that is not the base64 of 16 bytes).
  std::error_code Expect(std::span<const Header> headers);
  void Update(std::string_view data);
  // Success when there is no header, or one that matches everything
  // updated; else kChecksumMismatch. Call once.
  std::error_code Check();

 private:
  struct Free {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> md5_;  // when there is a Content-MD5
  std::string expected_;
};

// Checks a plain (not aws-chunked) body against the x-amz-checksum-<alg>
// headers among `headers`, whole: HeaderChecksum's errors.
std::error_code CheckChecksumHeaders(std::span<const Header> headers,
                                     std::string_view body);

// Checks a whole body against its Content-MD5: ContentMd5's errors.
std::error_code CheckContentMd5(std::span<const Header> headers,
                                std::string_view body);

}  // namespace fencepost::sigv4
