#include "codec/percent.h"

#include <gtest/gtest.h>

namespace fencepost::codec {
namespace {

TEST(PercentDecodeTest, DecodesEscapesOfEitherCaseOnce) {
  EXPECT_EQ(PercentDecode("a%2Fb%2fc", PercentMode::kStrict), "a/b/c");
  EXPECT_EQ(PercentDecode("%2541", PercentMode::kStrict), "%41");
  EXPECT_EQ(PercentDecode("%00", PercentMode::kStrict), std::string(1, '\0'));
}

TEST(PercentDecodeTest, StrictRefusesMalformedEscapesAndKeepsPlus) {
  EXPECT_EQ(PercentDecode("a+b", PercentMode::kStrict), "a+b");
  EXPECT_EQ(PercentDecode("%", PercentMode::kStrict), std::nullopt);
  EXPECT_EQ(PercentDecode("%4", PercentMode::kStrict), std::nullopt);
  EXPECT_EQ(PercentDecode("%G1", PercentMode::kStrict), std::nullopt);
  EXPECT_EQ(PercentDecode("x%4g", PercentMode::kStrict), std::nullopt);
}

TEST(PercentDecodeTest, LenientQueryKeepsMalformedEscapesAndReadsPlusAsSpace) {
  EXPECT_EQ(PercentDecode("a+b%20c", PercentMode::kLenientQuery), "a b c");
  EXPECT_EQ(PercentDecode("100%", PercentMode::kLenientQuery), "100%");
  EXPECT_EQ(PercentDecode("%4g%41", PercentMode::kLenientQuery), "%4gA");
  EXPECT_EQ(PercentDecode("%2B", PercentMode::kLenientQuery), "+");
}

TEST(HexDigitValueTest, ReadsBothCases) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  EXPECT_EQ(HexDigitValue('g'), -1);
}

}  // namespace
}  // namespace fencepost::codec
