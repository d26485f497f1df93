#include "codec/key.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <string>

namespace fencepost::codec {
namespace {

// Every byte value: unreserved characters (RFC 3986 section 2.3) and '/'
// stand as they are, every other byte is an upper-case %XX escape.
TEST(KeySpellingTest, EscapesEveryByteButUnreservedAndSlash) {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const bool raw = (b < 128 && std::isalnum(b) != 0) || c == '-' ||
                     c == '.' || c == '_' || c == '~' || c == '/';
    char escape[4];
    std::snprintf(escape, sizeof escape, "%%%02X", b);
    EXPECT_EQ(EncodeKey(std::string(1, c)), raw ? std::string(1, c) : escape)
        << b;
  }
  EXPECT_EQ(EncodeKey("orders/caf\xc3\xa9 1"), "orders/caf%C3%A9%201");
}

}  // namespace
}  // namespace fencepost::codec
