// The framing checks a proxy needs beyond Beast's parser (RFC 9112).

#include "proxy/framing.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

namespace fencepost::proxy {
namespace {

namespace http = boost::beast::http;
using Fields = std::initializer_list<std::pair<http::field, std::string>>;

Request Make(Fields fields, unsigned version = 11) {
  Request req{http::verb::put, "/k", version};
  for (const auto& [name, value] : fields) req.insert(name, value);
  return req;
}

constexpr auto kCl = http::field::content_length;
constexpr auto kTe = http::field::transfer_encoding;
constexpr auto kHost = http::field::host;

TEST(FramingErrorTest, OneUnambiguousLengthPasses) {
  EXPECT_FALSE(FramingError(Make({{kCl, "5"}})));
  EXPECT_FALSE(FramingError(Make({{kTe, "chunked"}})));
  EXPECT_FALSE(FramingError(Make({{kTe, " Chunked\t"}})))
      << "case and optional whitespace do not matter";
  EXPECT_FALSE(FramingError(Make({{kCl, "5"}, {kCl, " 5"}})))
      << "repeated equal lengths are one length";
  EXPECT_FALSE(FramingError(Make({})));
}

TEST(FramingErrorTest, AmbiguousLengthsAreRefused) {
  EXPECT_TRUE(FramingError(Make({{kCl, "5"}, {kTe, "chunked"}})));
  EXPECT_TRUE(FramingError(Make({{kTe, "chunked"}, {kCl, "5"}})));
  EXPECT_TRUE(FramingError(Make({{kCl, "4"}, {kCl, "5"}})));
  EXPECT_TRUE(FramingError(Make({{kTe, "gzip"}})));
  EXPECT_TRUE(FramingError(Make({{kTe, "gzip, chunked"}})));
  EXPECT_TRUE(FramingError(Make({{kTe, "chunked, chunked"}})));
  EXPECT_TRUE(FramingError(Make({{kTe, "chunked"}, {kTe, "chunked"}})));
  EXPECT_TRUE(FramingError(Make({{kTe, "chunked"}}, 10)))
      << "Transfer-Encoding in HTTP/1.0";
}

TEST(HostErrorTest, ExactlyOneHostInHttp11) {
  EXPECT_FALSE(HostError(Make({{kHost, "x"}})));
  EXPECT_TRUE(HostError(Make({})));
  EXPECT_TRUE(HostError(Make({{kHost, "x"}, {kHost, "y"}})));
  EXPECT_TRUE(HostError(Make({{kHost, "x"}, {kHost, "x"}})));
}

TEST(HostErrorTest, AtMostOneHostInHttp10) {
  EXPECT_FALSE(HostError(Make({}, 10)));
  EXPECT_FALSE(HostError(Make({{kHost, "x"}}, 10)));
  EXPECT_TRUE(HostError(Make({{kHost, "x"}, {kHost, "y"}}, 10)));
}

TEST(HasObsFoldTest, ALineStartingWithWhitespaceInTheHeaderIsAFold) {
  EXPECT_TRUE(HasObsFold("GET / HTTP/1.1\r\nX-A: 1\r\n 2\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(HasObsFold("GET / HTTP/1.1\r\nX-A: 1\r\n\t2\r\n\r\n"));
  EXPECT_TRUE(HasObsFold("GET / HTTP/1.1\r\nX-A: 1\r\n 2"))
      << "a header block cut short still counts";
}

TEST(HasObsFoldTest, WhitespaceElsewhereIsNoFold) {
  EXPECT_FALSE(HasObsFold("GET / HTTP/1.1\r\nX-A: 1 2\r\nHost: x\r\n\r\n"));
  EXPECT_FALSE(HasObsFold("PUT / HTTP/1.1\r\nHost: x\r\n\r\n body\r\n more"))
      << "the body is not the header";
  EXPECT_FALSE(HasObsFold("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_FALSE(HasObsFold(""));
}

}  // namespace
}  // namespace fencepost::proxy
