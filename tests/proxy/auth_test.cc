#include "proxy/auth.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/temp_dir.h"

namespace fencepost::proxy {
namespace {

Request WithAuthorization(const std::string& value) {
  Request req(boost::beast::http::verb::put, "/k", 11);
  req.set(boost::beast::http::field::authorization, value);
  return req;
}

TEST(BearerAuthTest, DisabledAllowsEverything) {
  EXPECT_FALSE(BearerAuth().enabled());
  EXPECT_TRUE(BearerAuth().Allows(Request()));
}

TEST(BearerAuthTest, OnlyAListedBearerTokenPasses) {
  const BearerAuth auth({"s3cret", "other-token"});
  EXPECT_TRUE(auth.Allows(WithAuthorization("Bearer s3cret")));
  EXPECT_TRUE(auth.Allows(WithAuthorization("bearer   other-token ")));
  EXPECT_FALSE(auth.Allows(Request())) << "no header";
  EXPECT_FALSE(auth.Allows(WithAuthorization("Bearer s3cre")));
  EXPECT_FALSE(auth.Allows(WithAuthorization("Bearer s3cret2")));
  EXPECT_FALSE(auth.Allows(WithAuthorization("Basic s3cret")));
  EXPECT_FALSE(auth.Allows(WithAuthorization("Bearer")));
  EXPECT_FALSE(auth.Allows(WithAuthorization("s3cret")));
  Request twice = WithAuthorization("Bearer s3cret");
  twice.insert(boost::beast::http::field::authorization, "Bearer s3cret");
  EXPECT_FALSE(auth.Allows(twice)) << "a repeated header is refused";
}

TEST(BearerAuthTest, ReadsTokensFromAFile) {
  testing::TempDir dir;
  const std::string path = dir / "tokens";
  std::ofstream(path) << "# writers\n\n  abc  \r\ndef\n";
  const BearerAuth auth = BearerAuth::FromFile(path);
  EXPECT_TRUE(auth.Allows(WithAuthorization("Bearer abc")));
  EXPECT_TRUE(auth.Allows(WithAuthorization("Bearer def")));
  EXPECT_FALSE(auth.Allows(WithAuthorization("Bearer # writers")));
  std::ofstream(dir / "empty") << "# nothing\n";
  EXPECT_THROW(BearerAuth::FromFile(dir / "empty"), std::runtime_error);
  EXPECT_THROW(BearerAuth::FromFile(dir / "missing"), std::runtime_error);
}

}  // namespace
}  // namespace fencepost::proxy
