#include "sigv4/checksum.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sigv4/errc.h"

namespace fencepost::sigv4 {
namespace {

constexpr std::string_view kCheck = "123456789";

TEST(ChecksumTest, CrcCatalogueCheckValues) {
  EXPECT_EQ(Crc32(kCheck), 0xCBF43926u);
  EXPECT_EQ(Crc32c(kCheck), 0xE3069283u);
  EXPECT_EQ(Crc64Nvme(kCheck), 0xAE8B14860A799888ull);
  EXPECT_EQ(Crc32(""), 0u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(ChecksumTest, CrcsContinueOverMoreData) {
  EXPECT_EQ(Crc32("56789", Crc32("1234")), Crc32(kCheck));
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), Crc32c(kCheck));
  EXPECT_EQ(Crc64Nvme("56789", Crc64Nvme("1234")), Crc64Nvme(kCheck));
}

TEST(ChecksumTest, Base64OfRfc4648) {
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64("\xff\xfe\xfd"), "//79");
}

TEST(ChecksumTest, ValuesAsS3SpellsThem) {
  // The CRC's bytes, most significant first.
  EXPECT_EQ(Base64Checksum(ChecksumAlgorithm::kCrc32c, kCheck), "4waSgw==");
  EXPECT_EQ(Base64Checksum(ChecksumAlgorithm::kCrc32, kCheck), "y/Q5Jg==");
  EXPECT_EQ(Base64Checksum(ChecksumAlgorithm::kCrc64Nvme, kCheck),
            "rosUhgp5mIg=");
  EXPECT_EQ(Base64Checksum(ChecksumAlgorithm::kSha1, kCheck),
            "98O8HYCOBHMq32eZZczDTKeuNEE=");
  EXPECT_EQ(Base64Checksum(ChecksumAlgorithm::kSha256, kCheck),
            "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU=");
  EXPECT_EQ(Base64Checksum(ChecksumAlgorithm::kCrc32c, ""), "AAAAAA==");
  // AWS's trailing-header example: 66560 bytes of 'a'.
  EXPECT_EQ(Base64Checksum(ChecksumAlgorithm::kCrc32c, std::string(66560, 'a')),
            "sOO8/Q==");
}

TEST(ChecksumTest, UpdatedInPiecesAsInOne) {
  for (auto algorithm :
       {ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c,
        ChecksumAlgorithm::kCrc64Nvme, ChecksumAlgorithm::kSha1,
        ChecksumAlgorithm::kSha256}) {
    Checksum checksum(algorithm);
    checksum.Update("123");
    checksum.Update("");
    checksum.Update("456789");
    EXPECT_EQ(checksum.Base64Digest(), Base64Checksum(algorithm, kCheck))
        << ChecksumHeaderName(algorithm);
  }
}

TEST(ChecksumTest, HeaderNamesAnyCase) {
  EXPECT_EQ(ChecksumFromHeaderName("x-amz-checksum-crc32c"),
            ChecksumAlgorithm::kCrc32c);
  EXPECT_EQ(ChecksumFromHeaderName("X-Amz-Checksum-SHA256"),
            ChecksumAlgorithm::kSha256);
  EXPECT_EQ(ChecksumFromHeaderName("x-amz-checksum-crc64nvme"),
            ChecksumAlgorithm::kCrc64Nvme);
  EXPECT_EQ(ChecksumFromHeaderName("x-amz-checksum-type"), std::nullopt);
  EXPECT_EQ(ChecksumFromHeaderName("x-amz-checksum-md5"), std::nullopt);
  EXPECT_EQ(ChecksumFromHeaderName("x-amz-checksum-crc32cc"), std::nullopt);
}

TEST(ChecksumTest, PlainBodyAgainstItsHeader) {
  std::vector<Header> none{{"Host", "h"}, {"x-amz-checksum-type", "COMPOSITE"}};
  EXPECT_EQ(CheckChecksumHeaders(none, "anything"), std::error_code());

  std::vector<Header> good{{"X-Amz-Checksum-Crc32c", " 4waSgw== "}};
  EXPECT_EQ(CheckChecksumHeaders(good, kCheck), std::error_code());
  EXPECT_EQ(CheckChecksumHeaders(good, "123456780"), Errc::kChecksumMismatch);

  std::vector<Header> sha{
      {"x-amz-checksum-sha1", "98O8HYCOBHMq32eZZczDTKeuNEE="}};
  EXPECT_EQ(CheckChecksumHeaders(sha, kCheck), std::error_code());
  std::vector<Header> garbage{{"x-amz-checksum-crc32", "not base64"}};
  EXPECT_EQ(CheckChecksumHeaders(garbage, kCheck), Errc::kChecksumMismatch);

  std::vector<Header> two{{"x-amz-checksum-crc32c", "4waSgw=="},
                          {"x-amz-checksum-crc32", "y/Q5Jg=="}};
  EXPECT_EQ(CheckChecksumHeaders(two, kCheck), Errc::kChecksumConflict);
}

}  // namespace
}  // namespace fencepost::sigv4
