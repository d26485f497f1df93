#include "fence/accept.h"

#include <gtest/gtest.h>

#include <limits>

namespace fencepost::fence {
namespace {

TEST(AcceptRuleTest, FirstWriteCreatesWithAnyToken) {
  for (Token t : {Token{0}, Token{1}, std::numeric_limits<Token>::max()}) {
    const Decision d = Decide(std::nullopt, t);
    EXPECT_TRUE(d.accepted);
    EXPECT_TRUE(d.creates);
    EXPECT_FALSE(d.advances) << "creating a fence is not an advance";
  }
}

TEST(AcceptRuleTest, EqualTokenAcceptedWithoutAdvance) {
  const Decision d = Decide(34, 34);
  EXPECT_TRUE(d.accepted);
  EXPECT_FALSE(d.creates);
  EXPECT_FALSE(d.advances);
}

TEST(AcceptRuleTest, HigherTokenAdvances) {
  const Decision d = Decide(33, 34);
  EXPECT_TRUE(d.accepted);
  EXPECT_TRUE(d.advances);
}

TEST(AcceptRuleTest, RejectsStaleToken) {
  const Decision d = Decide(34, 33);
  EXPECT_FALSE(d.accepted);
  EXPECT_FALSE(d.creates);
  EXPECT_FALSE(d.advances);
  EXPECT_FALSE(Decide(std::numeric_limits<Token>::max(), 0).accepted);
}

}  // namespace
}  // namespace fencepost::fence
