#include "fence/token.h"

#include <gtest/gtest.h>

namespace fencepost::fence {
namespace {

TEST(ParseTokenTest, AcceptsPlainDecimal) {
  EXPECT_EQ(ParseToken("0"), Token{0});
  EXPECT_EQ(ParseToken("33"), Token{33});
  EXPECT_EQ(ParseToken("007"), Token{7});
  EXPECT_EQ(ParseToken("18446744073709551615"), Token{18446744073709551615ull});
}

TEST(ParseTokenTest, TrimsSurroundingSpacesAndTabs) {
  EXPECT_EQ(ParseToken("  34 "), Token{34});
  EXPECT_EQ(ParseToken("\t34\t"), Token{34});
}

TEST(ParseTokenTest, RejectsEverythingElse) {
  for (const char* bad :
       {"", " ", "\t", "+1", "-1", "1 2", "0x10", "1e3", "1.0", "12a", "a",
        "18446744073709551616", "99999999999999999999", "000000000000000000001",
        "１", "1\n", "1\r", ",1", "1,2"}) {
    EXPECT_EQ(ParseToken(bad), std::nullopt) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace fencepost::fence
