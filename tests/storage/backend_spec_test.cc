#include "storage/backend_spec.h"

#include <gtest/gtest.h>

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

TEST(BackendSpecTest, RefusesWhatIsNotASpec) {
  for (const char* bad :
       {"", "LMDB", "fs:", "https://x:1", "http://", "http://:80",
        "http://x:8o", "http://[::1", "http://[::1]80", "http://x:1/a%2fb",
        "http://x:1/a/../b", "http://x:1/a?q"}) {
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
