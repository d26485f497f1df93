#include "storage/backend_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fencepost::storage {
namespace {

using Kind = BackendSpec::Kind;

TEST(BackendSpecTest, ParsesLmdbAndFs) {
  EXPECT_EQ(ParseBackendSpec("lmdb").kind, Kind::kLmdb);
  EXPECT_EQ(ParseBackendSpec("etcd").kind, Kind::kEtcd);
  const BackendSpec fs = ParseBackendSpec("fs:/srv/data");
  EXPECT_EQ(fs.kind, Kind::kFs);
  EXPECT_EQ(fs.dir, "/srv/data");
}

TEST(BackendSpecTest, ParsesHttpUrls) {
  const BackendSpec plain = ParseBackendSpec("http://store:8080/v1/");
  EXPECT_EQ(plain.kind, Kind::kHttp);
  EXPECT_EQ(plain.host, "store");
  EXPECT_EQ(plain.port, "8080");
  EXPECT_EQ(plain.base, "/v1");

  const BackendSpec v6 = ParseBackendSpec("http://[::1]");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, "80");
  EXPECT_EQ(v6.base, "");
}

TEST(BackendSpecTest, ParsesHttpsUrls) {
  const BackendSpec tls = ParseBackendSpec("https://store/v1");
  EXPECT_EQ(tls.kind, Kind::kHttp);
  EXPECT_TRUE(tls.tls);
  EXPECT_EQ(tls.port, "443");
  EXPECT_EQ(tls.base, "/v1");
  EXPECT_FALSE(ParseBackendSpec("http://store").tls);
  EXPECT_EQ(ParseBackendSpec("https://store:8443").port, "8443");
}

TEST(BackendSpecTest, ParsesS3Urls) {
  const BackendSpec bare = ParseBackendSpec("s3://my-bucket.1");
  EXPECT_EQ(bare.kind, Kind::kS3);
  EXPECT_EQ(bare.bucket, "my-bucket.1");
  EXPECT_EQ(bare.base, "");
  const BackendSpec prefixed = ParseBackendSpec("s3://state/env/prod/");
  EXPECT_EQ(prefixed.bucket, "state");
  EXPECT_EQ(prefixed.base, "/env/prod");
  EXPECT_EQ(ParseBackendSpec("s3://abc/a%20b").base, "/a%20b");
  const std::string too_long = "s3://" + std::string(64, 'a');
  for (const std::string& bad : std::vector<std::string>{
           "s3://", "s3://ab", "s3://Bucket", "s3://-abc", "s3://abc-",
           "s3://a_b_c", "s3://a..b", "s3://abc/a/../b", "s3://abc/a b",
           "s3://abc/a?x", too_long}) {
    EXPECT_THROW(ParseBackendSpec(bad), BadBackendSpec) << bad;
  }
}

TEST(BackendSpecTest, RefusesWhatIsNotASpec) {
  for (const char* bad :
       {"", "LMDB", "fs:", "ftp://x:1", "http://", "http://:80", "https://",
        "http://x:8o", "http://[::1", "http://[::1]80", "http://x:1/a%2fb",
        "http://x:1/a/../b", "http://x:1/a?q"}) {
    EXPECT_THROW(ParseBackendSpec(bad), BadBackendSpec) << bad;
  }
}

TEST(BackendSpecTest, RefusesUserInfoAndJunkInTheHost) {
  // A user:password@ would be taken for the host (and sent as Host): the
  // credentials never reach the store, and the URL names another server.
  for (const char* bad : {"http://u:pw@127.0.0.1:1/p", "https://user@h/x",
                          "http://h?x", "http://h#x", "http://h x:80"}) {
    EXPECT_THROW(ParseBackendSpec(bad), BadBackendSpec) << bad;
  }
}

TEST(BackendSpecTest, TheMessageNamesTheSpecAndTheExpectedForm) {
  try {
    ParseBackendSpec("http://x:y");
    FAIL();
  } catch (const BadBackendSpec& e) {
    EXPECT_NE(std::string(e.what()).find("'http://x:y'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("http://HOST:PORT[/BASE]"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace fencepost::storage
