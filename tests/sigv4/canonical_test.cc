#include "sigv4/canonical.h"

#include <gtest/gtest.h>

#include <ostream>
#include <sstream>

#include "codec/percent.h"
#include "sigv4/crypto.h"
#include "sigv4/secret.h"
#include "sigv4/signer.h"

namespace fencepost::sigv4 {
namespace {

TEST(CanonicalTest, UriEncodeKeepsOnlyTheUnreservedSet) {
  EXPECT_EQ(UriEncode("AZaz09-._~", false), "AZaz09-._~");
  EXPECT_EQ(UriEncode("a b+c=d/e%f*", false), "a%20b%2Bc%3Dd%2Fe%25f%2A");
  EXPECT_EQ(UriEncode("a/b", true), "a/b");
  EXPECT_EQ(UriEncode("\xc3\xbc", true), "%C3%BC");
}

TEST(CanonicalTest, PercentDecodeRefusesATruncatedEscape) {
  EXPECT_EQ(
      codec::PercentDecode("a%20b%2fc+d", codec::PercentMode::kStrict).value(),
      "a b/c+d");
  EXPECT_FALSE(codec::PercentDecode("a%2", codec::PercentMode::kStrict));
  EXPECT_FALSE(codec::PercentDecode("a%", codec::PercentMode::kStrict));
  EXPECT_FALSE(codec::PercentDecode("a%zz", codec::PercentMode::kStrict));
}

TEST(CanonicalTest, S3PathsAreEncodedOnceAndNeverNormalised) {
  EXPECT_EQ(CanonicalUri("", PathStyle::kS3), "/");
  EXPECT_EQ(CanonicalUri("/b/a b/\xc3\xbc.png", PathStyle::kS3),
            "/b/a%20b/%C3%BC.png");
  EXPECT_EQ(CanonicalUri("/b/a//./c/../d", PathStyle::kS3), "/b/a//./c/../d");
  EXPECT_EQ(CanonicalUri("/b/100%", PathStyle::kS3), "/b/100%25");
}

TEST(CanonicalTest, NormalizedPathsDropDotSegmentsAndEncodeTwice) {
  EXPECT_EQ(CanonicalUri("//a//./b/../c/", PathStyle::kNormalized), "/a/c/");
  EXPECT_EQ(CanonicalUri("/a/b/..", PathStyle::kNormalized), "/a/");
  EXPECT_EQ(CanonicalUri("/a/../..", PathStyle::kNormalized), "/");
  EXPECT_EQ(CanonicalUri("/a%20b", PathStyle::kNormalized), "/a%2520b");
}

TEST(CanonicalTest, QueryIsDecodedEncodedAndSortedByNameThenValue) {
  auto query = ParseQuery("b=2&a=%2F+&&a=1&c&Z=x%20y").value();
  ASSERT_EQ(query.size(), 5u);
  EXPECT_EQ(query[1].value, "/+");
  EXPECT_EQ(query[3].name, "c");
  EXPECT_EQ(query[3].value, "");
  EXPECT_EQ(CanonicalQuery(query), "Z=x%20y&a=%2F%2B&a=1&b=2&c=");
  EXPECT_FALSE(ParseQuery("a=%G0"));
}

TEST(CanonicalTest, HeaderValuesAreTrimmedAndTheirSpacesCollapsed) {
  EXPECT_EQ(CanonicalHeaderValue("  a   b\t\tc \r\n d  "), "a b c d");
  EXPECT_EQ(CanonicalHeaderValue(""), "");
  CanonicalHeaders h = CanonicalizeHeaders(std::vector<Header>{
      {"X-B", " 2 "}, {"host", "h"}, {"x-b", "1"}, {"X-A", "a"}});
  EXPECT_EQ(h.text, "host:h\nx-a:a\nx-b:2,1\n");
  EXPECT_EQ(h.signed_headers, "host;x-a;x-b");
}

TEST(CanonicalTest, AmzDatesRoundTripAndRefuseImpossibleDates) {
  auto t = ParseAmzDate("20240229T235959Z");
  ASSERT_TRUE(t);
  EXPECT_EQ(FormatAmzDate(*t), "20240229T235959Z");
  EXPECT_EQ(FormatAmzDate(std::chrono::system_clock::time_point()),
            "19700101T000000Z");
  EXPECT_FALSE(ParseAmzDate("20230229T000000Z"));
  EXPECT_FALSE(ParseAmzDate("20130524T240000Z"));
  EXPECT_FALSE(ParseAmzDate("20130524T000000"));
  EXPECT_FALSE(ParseAmzDate("2013-05-24T00:00:00Z"));
}

TEST(CryptoTest, HashesAndHmacMatchTheirStandards) {
  EXPECT_EQ(HexSha256(""), kEmptyPayloadHash);
  // RFC 4231, test case 2.
  EXPECT_EQ(codec::HexOf(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  Sha256 streamed;
  streamed.Update("Welcome to ");
  streamed.Update("Amazon S3.");
  EXPECT_EQ(streamed.HexDigest(), HexSha256("Welcome to Amazon S3."));
  EXPECT_EQ(streamed.HexDigest(), kEmptyPayloadHash);
  EXPECT_TRUE(ConstantTimeEqual("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "ab"));
}

template <typename T>
concept Streamable = requires(std::ostream& os, const T& t) {
  os << t;
};

TEST(SecretTest, NeverPrints) {
  static_assert(!Streamable<Secret>);
  Secret secret("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
  EXPECT_EQ(testing::PrintToString(secret), "Secret(redacted)");
  EXPECT_EQ(secret.Reveal(), "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
  Secret moved = std::move(secret);
  EXPECT_TRUE(secret.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved.Reveal(), "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
  Secret copy = moved;
  EXPECT_EQ(copy.Reveal(), moved.Reveal());
}

}  // namespace
}  // namespace fencepost::sigv4
