#include "sigv4/checksum.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdlib>

#include "sigv4/errc.h"

namespace fencepost::sigv4 {
namespace {

// The byte-at-a-time table of a reflected CRC with polynomial `poly`.
template <typename T>
constexpr std::array<T, 256> ReflectedTable(T poly) {
  std::array<T, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    T crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? poly : 0);
    table[i] = crc;
  }
  return table;
}

constexpr auto kCrc32Table = ReflectedTable<std::uint32_t>(0xEDB88320u);
constexpr auto kCrc32cTable = ReflectedTable<std::uint32_t>(0x82F63B78u);
constexpr auto kCrc64NvmeTable =
    ReflectedTable<std::uint64_t>(0x9A6C9329AC4BC9B5ull);

// `crc` is the previous result (0 to start): the all-ones init and xorout
// cancel, so results chain.
template <typename T>
T Reflected(const std::array<T, 256>& table, std::string_view data, T crc) {
  crc = ~crc;
  for (unsigned char c : data) crc = table[(crc ^ c) & 0xff] ^ (crc >> 8);
  return ~crc;
}

template <typename T>
std::string BigEndian(T value) {
  std::string out(sizeof(T), '\0');
  for (std::size_t i = sizeof(T); i-- > 0; value >>= 8) {
    out[i] = static_cast<char>(value & 0xff);
  }
  return out;
}

const EVP_MD* Md(ChecksumAlgorithm algorithm) {
  static EVP_MD* sha1 = EVP_MD_fetch(nullptr, "SHA1", nullptr);
  static EVP_MD* sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  const EVP_MD* md = algorithm == ChecksumAlgorithm::kSha1 ? sha1 : sha256;
  if (md == nullptr) std::abort();
  return md;
}

EVP_MD_CTX* NewDigest(const EVP_MD* md) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr || md == nullptr ||
      EVP_DigestInit_ex2(ctx, md, nullptr) != 1) {
    std::abort();
  }
  return ctx;
}

void UpdateDigest(EVP_MD_CTX* ctx, std::string_view data) {
  if (EVP_DigestUpdate(ctx, data.data(), data.size()) != 1) std::abort();
}

std::string Base64Final(EVP_MD_CTX* ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx, md, &size) != 1) std::abort();
  return Base64({reinterpret_cast<const char*>(md), size});
}

bool IsContentMd5(std::string_view name) {
  return name.size() == 11 &&
         std::equal(
             name.begin(), name.end(), "content-md5", [](char a, char b) {
               return (a >= 'A' && a <= 'Z' ? char(a - 'A' + 'a') : a) == b;
             });
}

bool IsDigest(ChecksumAlgorithm algorithm) {
  return algorithm == ChecksumAlgorithm::kSha1 ||
         algorithm == ChecksumAlgorithm::kSha256;
}

}  // namespace

std::string_view ChecksumHeaderName(ChecksumAlgorithm algorithm) {
  switch (algorithm) {
    case ChecksumAlgorithm::kCrc32:
      return "x-amz-checksum-crc32";
    case ChecksumAlgorithm::kCrc32c:
      return "x-amz-checksum-crc32c";
    case ChecksumAlgorithm::kCrc64Nvme:
      return "x-amz-checksum-crc64nvme";
    case ChecksumAlgorithm::kSha1:
      return "x-amz-checksum-sha1";
    case ChecksumAlgorithm::kSha256:
      return "x-amz-checksum-sha256";
  }
  std::abort();
}

std::optional<ChecksumAlgorithm> ChecksumFromHeaderName(std::string_view name) {
  for (auto algorithm :
       {ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c,
        ChecksumAlgorithm::kCrc64Nvme, ChecksumAlgorithm::kSha1,
        ChecksumAlgorithm::kSha256}) {
    if (EqualsLowerCase(name, ChecksumHeaderName(algorithm))) return algorithm;
  }
  return std::nullopt;
}

std::uint32_t Crc32(std::string_view data, std::uint32_t crc) {
  return Reflected(kCrc32Table, data, crc);
}

std::uint32_t Crc32c(std::string_view data, std::uint32_t crc) {
  return Reflected(kCrc32cTable, data, crc);
}

std::uint64_t Crc64Nvme(std::string_view data, std::uint64_t crc) {
  return Reflected(kCrc64NvmeTable, data, crc);
}

std::string Base64(std::string_view bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      group <<= 8;
      if (j < n) group |= static_cast<unsigned char>(bytes[i + j]);
    }
    for (std::size_t j = 0; j < 4; ++j) {
      out.push_back(j <= n ? kDigits[(group >> (18 - 6 * j)) & 0x3f] : '=');
    }
  }
  return out;
}

void Checksum::Free::operator()(evp_md_ctx_st* ctx) const {
  EVP_MD_CTX_free(ctx);
}

Checksum::Checksum(ChecksumAlgorithm algorithm) : algorithm_(algorithm) {
  if (IsDigest(algorithm)) md_.reset(NewDigest(Md(algorithm)));
}

Checksum::~Checksum() = default;

void Checksum::Update(std::string_view data) {
  switch (algorithm_) {
    case ChecksumAlgorithm::kCrc32:
      crc_ = Crc32(data, static_cast<std::uint32_t>(crc_));
      return;
    case ChecksumAlgorithm::kCrc32c:
      crc_ = Crc32c(data, static_cast<std::uint32_t>(crc_));
      return;
    case ChecksumAlgorithm::kCrc64Nvme:
      crc_ = Crc64Nvme(data, crc_);
      return;
    case ChecksumAlgorithm::kSha1:
    case ChecksumAlgorithm::kSha256:
      UpdateDigest(md_.get(), data);
      return;
  }
}

std::string Checksum::Base64Digest() {
  switch (algorithm_) {
    case ChecksumAlgorithm::kCrc32:
    case ChecksumAlgorithm::kCrc32c:
      return Base64(BigEndian(static_cast<std::uint32_t>(crc_)));
    case ChecksumAlgorithm::kCrc64Nvme:
      return Base64(BigEndian(crc_));
    case ChecksumAlgorithm::kSha1:
    case ChecksumAlgorithm::kSha256:
      break;
  }
  return Base64Final(md_.get());
}

std::string Base64Checksum(ChecksumAlgorithm algorithm, std::string_view data) {
  Checksum checksum(algorithm);
  checksum.Update(data);
  return checksum.Base64Digest();
}

std::error_code HeaderChecksum::Expect(std::span<const Header> headers) {
  checksum_.reset();
  const Header* found = nullptr;
  for (const Header& h : headers) {
    auto algorithm = ChecksumFromHeaderName(h.name);
    if (!algorithm) continue;
    if (found != nullptr) return Errc::kChecksumConflict;
    found = &h;
    checksum_.emplace(*algorithm);
  }
  if (found != nullptr) expected_ = TrimSpaces(found->value);
  return {};
}

void HeaderChecksum::Update(std::string_view data) {
  if (checksum_) checksum_->Update(data);
}

std::error_code HeaderChecksum::Check() {
  if (!checksum_ || checksum_->Base64Digest() == expected_) return {};
  return Errc::kChecksumMismatch;
}

void ContentMd5::Free::operator()(evp_md_ctx_st* ctx) const {
  EVP_MD_CTX_free(ctx);
}

std::error_code ContentMd5::Expect(std::span<const Header> headers) {
  md5_.reset();
  const Header* found = nullptr;
  for (const Header& h : headers) {
    if (!IsContentMd5(h.name)) continue;
    if (found != nullptr) return Errc::kMalformed;
    found = &h;
  }
  if (found == nullptr) return {};
  const std::string_view value = TrimSpaces(found->value);
  // 16 bytes are 22 base64 characters and "==".
  if (value.size() != 24 || value.substr(22) != "==" ||
      value.substr(0, 22).find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") !=
          std::string_view::npos) {
    return Errc::kMalformed;
  }
  static EVP_MD* md5 = EVP_MD_fetch(nullptr, "MD5", nullptr);
  md5_.reset(NewDigest(md5));
  expected_ = value;
  return {};
}

void ContentMd5::Update(std::string_view data) {
  if (md5_) UpdateDigest(md5_.get(), data);
}

std::error_code ContentMd5::Check() {
  if (!md5_ || Base64Final(md5_.get()) == expected_) return {};
  return Errc::kChecksumMismatch;
}

std::error_code CheckChecksumHeaders(std::span<const Header> headers,
                                     std::string_view body) {
  HeaderChecksum checksum;
  if (auto ec = checksum.Expect(headers)) return ec;
  checksum.Update(body);
  return checksum.Check();
}

std::error_code CheckContentMd5(std::span<const Header> headers,
                                std::string_view body) {
  ContentMd5 md5;
  if (auto ec = md5.Expect(headers)) return ec;
  md5.Update(body);
  return md5.Check();
}

}  // namespace fencepost::sigv4
