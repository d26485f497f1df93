#include "http/host_port.h"

#include <gtest/gtest.h>

namespace fencepost::http {
namespace {

TEST(FormatHostPortTest, BracketsOnlyIpv6Literals) {
  EXPECT_EQ(FormatHostPort("127.0.0.1", std::uint16_t{80}), "127.0.0.1:80");
  EXPECT_EQ(FormatHostPort("example.com", "8080"), "example.com:8080");
  EXPECT_EQ(FormatHostPort("::1", std::uint16_t{7400}), "[::1]:7400");
}

TEST(SplitHostPortTest, SplitsPlainAndBracketedAuthorities) {
  auto plain = SplitHostPort("example.com:81");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->host, "example.com");
  EXPECT_EQ(plain->port, "81");
  EXPECT_FALSE(plain->bracketed);

  auto v6 = SplitHostPort("[::1]:7400");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "7400");
  EXPECT_TRUE(v6->bracketed);

  auto bare = SplitHostPort("[fe80::1]");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->host, "fe80::1");
  EXPECT_FALSE(bare->port);

  auto no_port = SplitHostPort("example.com");
  ASSERT_TRUE(no_port);
  EXPECT_FALSE(no_port->port);

  auto empty_port = SplitHostPort("example.com:");
  ASSERT_TRUE(empty_port);
  EXPECT_EQ(empty_port->port, "");
}

TEST(SplitHostPortTest, TheLastColonSeparatesAnUnbracketedPort) {
  auto v6 = SplitHostPort("::1:80");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "80");
}

TEST(SplitHostPortTest, RefusesAnUnclosedBracketOrJunkAfterIt) {
  EXPECT_FALSE(SplitHostPort("[::1"));
  EXPECT_FALSE(SplitHostPort("[::1]80"));
  EXPECT_FALSE(SplitHostPort("[::1]x:80"));
}

TEST(HostPortTest, FormatThenSplitGivesTheParts) {
  for (const char* host : {"10.0.0.1", "::1", "2001:db8::7", "h"}) {
    auto split = SplitHostPort(FormatHostPort(host, "9"));
    ASSERT_TRUE(split) << host;
    EXPECT_EQ(split->host, host);
    EXPECT_EQ(split->port, "9");
  }
}

TEST(ParseServerTest, NeedsAHostAndAPortOfOneTo65535) {
  const auto plain = ParseServer("zk1.internal:2181");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->host, "zk1.internal");
  EXPECT_EQ(plain->port, "2181");
  const auto v6 = ParseServer("[::1]:65535");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_TRUE(ParseServer("h:1").has_value());
  for (const char* bad :
       {"", "h", "h:", ":2181", "h:0", "h:65536", "h:99999", "h:123456", "h:-1",
        "h:+1", "h:1a", "[::1", "[::1]", "[::1]x:1"}) {
    EXPECT_FALSE(ParseServer(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace fencepost::http
