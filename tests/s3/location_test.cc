// s3/location.h: endpoints, s3:// URLs, where a bucket and an object key go
// under each addressing style, and the Host field every request carries.

#include "s3/location.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "tests/s3/locations.h"

namespace fencepost::s3 {
namespace {

using testing::Aws;
using testing::Rgw;

TEST(S3LocationTest, EndpointsTakeTheSchemesPortsAndIpv6) {
  const Endpoint aws = ParseEndpoint("https://s3.eu-west-1.amazonaws.com");
  EXPECT_TRUE(aws.tls);
  EXPECT_TRUE(aws.HasDefaultPort());
  EXPECT_EQ(aws.Authority(), "s3.eu-west-1.amazonaws.com:443");
  EXPECT_EQ(ParseEndpoint("http://127.0.0.1/").Authority(), "127.0.0.1:80");
  EXPECT_EQ(ParseEndpoint("http://127.0.0.1:7480").Authority(),
            "127.0.0.1:7480");
  EXPECT_FALSE(ParseEndpoint("http://127.0.0.1:443").HasDefaultPort());
  const Endpoint v6 = ParseEndpoint("http://[::1]:9000");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.Authority(), "[::1]:9000");
  for (const char* bad :
       {"ftp://host", "host:80", "http://", "http://h:0", "http://h:65536",
        "http://h:x", "http://h:", "http://h/bucket", "http://u@h",
        "http://h?q", "http://[::1", "http://[::1]x"}) {
    EXPECT_THROW(ParseEndpoint(bad), std::invalid_argument) << bad;
  }
}

TEST(S3LocationTest, AwsEndpointsDefaultToVirtualAndOthersToPath) {
  EXPECT_EQ(DefaultEndpoint("us-east-1"), "https://s3.us-east-1.amazonaws.com");
  EXPECT_EQ(DefaultAddressing(ParseEndpoint(DefaultEndpoint("us-east-1"))),
            Addressing::kVirtual);
  EXPECT_EQ(DefaultAddressing(ParseEndpoint("http://127.0.0.1:7480")),
            Addressing::kPath);
  EXPECT_EQ(DefaultAddressing(ParseEndpoint("https://minio.example:9000")),
            Addressing::kPath);
  EXPECT_EQ(ParseAddressing("path"), Addressing::kPath);
  EXPECT_EQ(ParseAddressing("virtual"), Addressing::kVirtual);
  EXPECT_EQ(ParseAddressing("Virtual"), std::nullopt);
}

TEST(S3LocationTest, BucketUrlsNameABucketAndADecodedPrefix) {
  const BucketUrl plain = ParseBucketUrl("s3://fencepost");
  EXPECT_EQ(plain.bucket, "fencepost");
  EXPECT_EQ(plain.prefix, "");
  EXPECT_EQ(ParseBucketUrl("s3://fencepost/").prefix, "");
  EXPECT_EQ(ParseBucketUrl("s3://my.bucket-1/a/b//").prefix, "a/b");
  EXPECT_EQ(ParseBucketUrl("s3://fencepost/probe%20dir+x").prefix,
            "probe dir+x");
  EXPECT_EQ(ParseBucketUrl("s3://my-bucket.1").bucket, "my-bucket.1");
  const std::string too_long = "s3://" + std::string(64, 'a');
  for (const std::string bad :
       {"http://fencepost", "s3://", "s3://ab", "s3://Fencepost",
        "s3://-fencepost", "s3://fencepost-", "s3://fence_post", "s3://a..b",
        "s3://fencepost/a%2", "s3://fencepost/a?x", "s3://fencepost/a%0Ab",
        "s3://fencepost/a#b", too_long.c_str()}) {
    EXPECT_THROW(ParseBucketUrl(bad), std::invalid_argument) << bad;
  }
}

TEST(S3LocationTest, ObjectKeysAreThePrefixDecodedThenTheKeysOwnBytes) {
  EXPECT_EQ(ObjectKey("", "a b/c+d%"), "a b/c+d%");
  EXPECT_EQ(ObjectKey(ParseBucketUrl("s3://b-1/env/prod").prefix, "k"),
            "env/prod/k");
  EXPECT_EQ(ObjectKey(ParseBucketUrl("s3://b-1/a%20b").prefix, "\xc3\xa9"),
            "a b/\xc3\xa9");
  // The keys' prefix of a listing.
  EXPECT_EQ(ObjectKey("env/prod", ""), "env/prod/");
}

TEST(S3LocationTest, PathStyleKeepsTheBucketInThePath) {
  const Location location = Rgw(Addressing::kPath);
  EXPECT_NO_THROW(location.Check());
  EXPECT_EQ(location.BaseUrl(), "http://127.0.0.1:7480");
  EXPECT_EQ(location.HostName(), "127.0.0.1");
  EXPECT_EQ(location.Host(), "127.0.0.1:7480");
  EXPECT_EQ(ObjectPath(location, "probe/k"), "/fencepost/probe/k");
  // The bucket itself (HeadBucket, ListObjectsV2).
  EXPECT_EQ(ObjectPath(location, ""), "/fencepost");
}

TEST(S3LocationTest, VirtualHostedAddressingPutsTheBucketInTheHost) {
  Location location = Aws();
  EXPECT_NO_THROW(location.Check());
  EXPECT_EQ(location.BaseUrl(),
            "https://fencepost.s3.us-east-1.amazonaws.com:443");
  EXPECT_EQ(location.HostName(), "fencepost.s3.us-east-1.amazonaws.com");
  EXPECT_EQ(ObjectPath(location, "probe/k"), "/probe/k");
  EXPECT_EQ(ObjectPath(location, ""), "/");
  // No bucket before an IP address; no dotted bucket under a wildcard
  // certificate.
  EXPECT_THROW(Rgw(Addressing::kVirtual).Check(), std::invalid_argument);
  location.bucket = "my.bucket";
  EXPECT_THROW(location.Check(), std::invalid_argument);
  location.endpoint.tls = false;
  EXPECT_NO_THROW(location.Check());
}

// The Host field is the URL's normal form: the port written unless it is
// the scheme's, as AWS's SDKs, curl and fencepost's HTTP client send it.
TEST(S3LocationTest, TheHostFieldLeavesOutOnlyTheSchemesOwnPort) {
  EXPECT_EQ(Aws().Host(), "fencepost.s3.us-east-1.amazonaws.com");
  Location plain = Rgw(Addressing::kPath);
  plain.endpoint = ParseEndpoint("http://127.0.0.1");
  EXPECT_EQ(plain.Host(), "127.0.0.1");
  plain.endpoint = ParseEndpoint("http://127.0.0.1:443");
  EXPECT_EQ(plain.Host(), "127.0.0.1:443");
  plain.endpoint = ParseEndpoint("https://[::1]:9000");
  EXPECT_EQ(plain.Host(), "[::1]:9000");
  plain.endpoint = ParseEndpoint("https://[::1]");
  EXPECT_EQ(plain.Host(), "[::1]");
  Location store = Rgw(Addressing::kVirtual);
  store.endpoint = ParseEndpoint("http://store.example:80");
  EXPECT_EQ(store.Host(), "fencepost.store.example");
  store.endpoint = ParseEndpoint("http://store.example:9000");
  EXPECT_EQ(store.Host(), "fencepost.store.example:9000");
}

}  // namespace
}  // namespace fencepost::s3
