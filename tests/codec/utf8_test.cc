#include "codec/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace fencepost::codec {
namespace {

TEST(Utf8Test, AcceptsAllPlanes) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF, the last
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3))) << "NUL is UTF-8";
}

TEST(Utf8Test, RefusesWhatRfc3629Forbids) {
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong, 3 bytes
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\x80"));              // a lone continuation
  EXPECT_FALSE(IsValidUtf8("\xC3\x28"));          // a bad continuation
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

}  // namespace
}  // namespace fencepost::codec
