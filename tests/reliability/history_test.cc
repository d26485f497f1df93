#include "tests/reliability/history.h"

#include <gtest/gtest.h>

namespace fencepost::reliability {
namespace {

using Outcome = Op::Outcome;

Op Accepted(std::uint64_t token, std::int64_t sent, std::int64_t acked) {
  return {"k", token, sent, acked, Outcome::kAccepted, std::nullopt};
}
Op Rejected(std::uint64_t token, std::uint64_t current) {
  return {"k", token, 0, 1, Outcome::kRejected, current};
}

TEST(HistoryCheckTest, ACleanHistoryPasses) {
  std::vector<Op> history = {Accepted(5, 0, 10),
                             Accepted(7, 11, 20),
                             Rejected(6, 7),
                             {"k", 9, 21, 0, Outcome::kUnknown, std::nullopt}};
  // The unacknowledged 9 may or may not have landed; both are fine.
  EXPECT_TRUE(Check(history, {{"k", {7, 7}}}).empty());
  EXPECT_TRUE(Check(history, {{"k", {9, 9}}}).empty());
  // Concurrent writes (4 sent before 5 was acknowledged) may land in either
  // order.
  history.push_back(Accepted(4, 5, 12));
  EXPECT_TRUE(Check(history, {{"k", {9, 9}}}).empty());
}

TEST(HistoryCheckTest, FindsALostAcknowledgedWrite) {
  const std::vector<Op> history = {Accepted(5, 0, 10), Accepted(7, 11, 20)};
  EXPECT_EQ(Check(history, {{"k", {5, 5}}}).size(), 2u)
      << "both the fence and the value went back";
  EXPECT_EQ(Check(history, {{"k", {7, 5}}}).size(), 1u);
  EXPECT_EQ(Check(history, {}).size(), 2u) << "the key vanished";
}

TEST(HistoryCheckTest, FindsAWriteAcceptedBelowAnAcknowledgedOne) {
  const std::vector<Op> history = {Accepted(7, 0, 10), Accepted(6, 11, 20)};
  const auto violations = Check(history, {{"k", {7, 7}}});
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("accepted after token 7"), std::string::npos);
}

TEST(HistoryCheckTest, FindsAnInventedCurrentToken) {
  const std::vector<Op> history = {Accepted(7, 0, 10), Rejected(6, 8)};
  EXPECT_EQ(Check(history, {{"k", {7, 7}}}).size(), 1u);
  const std::vector<Op> lower = {Accepted(7, 0, 10), Rejected(8, 7)};
  EXPECT_EQ(Check(lower, {{"k", {7, 7}}}).size(), 1u)
      << "a 409 must name a token above the refused one";
}

TEST(HistoryCheckTest, FindsAStateNobodyWrote) {
  const std::vector<Op> history = {Accepted(7, 0, 10)};
  EXPECT_EQ(Check(history, {{"k", {70, 7}}}).size(), 1u);
  EXPECT_EQ(Check(history, {{"k", {7, 70}}}).size(), 1u);
}

}  // namespace
}  // namespace fencepost::reliability
