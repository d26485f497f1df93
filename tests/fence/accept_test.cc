#include "fence/accept.h"

#include <gtest/gtest.h>

#include <limits>
#include <string_view>
#include <vector>

#include "fence/election.h"

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

// An elected fence (SPEC "Elections watched at their source"): a token
// that moves nothing needs no source; one above the fence needs the
// source's word unless it is the holder's already confirmed.
TEST(ElectionRuleTest, OnlyATokenAboveTheFenceNeedsTheSource) {
  EXPECT_EQ(CheckElectedToken(10, 9, 12), ElectedToken::kDecidedByFence);
  EXPECT_EQ(CheckElectedToken(10, 10, std::nullopt),
            ElectedToken::kDecidedByFence);
  EXPECT_EQ(CheckElectedToken(10, 12, 12), ElectedToken::kConfirmed);
  EXPECT_EQ(CheckElectedToken(10, 11, 12), ElectedToken::kAskSource);
  EXPECT_EQ(CheckElectedToken(10, std::numeric_limits<Token>::max(), 12),
            ElectedToken::kAskSource);
  EXPECT_EQ(CheckElectedToken(std::nullopt, 1, std::nullopt),
            ElectedToken::kAskSource)
      << "no fence yet: even a first token needs the source";
  EXPECT_EQ(CheckElectedToken(std::nullopt, 7, 7), ElectedToken::kConfirmed);
}

TEST(ElectionRuleTest, AHolderRaisesTheFenceButNeverLowersIt) {
  EXPECT_EQ(JudgeHolder(std::nullopt, 5), HolderVerdict::kRaise);
  EXPECT_EQ(JudgeHolder(4, 5), HolderVerdict::kRaise);
  EXPECT_EQ(JudgeHolder(5, 5), HolderVerdict::kAtFence);
  EXPECT_EQ(JudgeHolder(6, 5), HolderVerdict::kBehind)
      << "a restored source with lower numbers is never obeyed";
}

TEST(ElectionRuleTest, TheHolderIsTheLowestSequenceWhateverItsPrefix) {
  // kazoo's lock recipe, Curator's latch and fencepost's own leases.
  const std::vector<std::string_view> children = {
      "3f2a__lock__0000000012", "_c_9b-latch-0000000010", "n_0000000011",
      "not-a-candidate", "n_00000000x1"};
  EXPECT_EQ(LowestSequence(children), 1u);
  EXPECT_EQ(LowestSequence({"n_0000000002", "n_0000000001"}), 1u);
  EXPECT_EQ(LowestSequence({"short", "n_123"}), std::nullopt);
  EXPECT_EQ(LowestSequence({}), std::nullopt);
}

}  // namespace
}  // namespace fencepost::fence
