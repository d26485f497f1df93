#include "tests/reliability/history.h"

#include <gtest/gtest.h>

namespace fencepost::reliability {
namespace {

using Outcome = Op::Outcome;

Op Write(std::uint64_t token, Outcome outcome, std::int64_t sent = 0,
         std::int64_t acked = 0) {
  Op op;
  op.key = "k";
  op.token = token;
  op.sent_ns = sent;
  op.acked_ns = acked;
  op.outcome = outcome;
  return op;
}
Op Accepted(std::uint64_t token, std::int64_t sent, std::int64_t acked) {
  return Write(token, Outcome::kAccepted, sent, acked);
}
// A 409 answered after the other writes of a history (which end by 1000
// here) unless told when.
Op Rejected(std::uint64_t token, std::uint64_t current,
            std::int64_t sent = 1000, std::int64_t acked = 1001) {
  Op op = Write(token, Outcome::kRejected, sent, acked);
  op.current_token = current;
  return op;
}
Op Unknown(std::uint64_t token) { return Write(token, Outcome::kUnknown); }
// What a key holds: its fence, and its value's token and body.
std::map<std::string, KeyState> Holds(std::uint64_t fence,
                                      std::optional<std::uint64_t> value,
                                      const std::string& body = "") {
  KeyState state;
  state.fence = fence;
  state.value = value;
  state.body = body;
  return {{"k", state}};
}

TEST(HistoryCheckTest, ACleanHistoryPasses) {
  std::vector<Op> history = {Accepted(5, 0, 10), Accepted(7, 11, 20),
                             Rejected(6, 7), Write(9, Outcome::kUnknown, 21)};
  // The unacknowledged 9 may or may not have landed; both are fine.
  EXPECT_TRUE(Check(history, Holds(7, 7)).empty());
  EXPECT_TRUE(Check(history, Holds(9, 9)).empty());
  // Concurrent writes (4 sent before 5 was acknowledged) may land in either
  // order.
  history.push_back(Accepted(4, 5, 12));
  EXPECT_TRUE(Check(history, Holds(9, 9)).empty());
}

TEST(HistoryCheckTest, FindsALostAcknowledgedWrite) {
  const std::vector<Op> history = {Accepted(5, 0, 10), Accepted(7, 11, 20)};
  EXPECT_EQ(Check(history, Holds(5, 5)).size(), 2u)
      << "both the fence and the value went back";
  EXPECT_EQ(Check(history, Holds(7, 5)).size(), 1u);
  EXPECT_EQ(Check(history, std::map<std::string, KeyState>{}).size(), 2u)
      << "the key vanished";
}

TEST(HistoryCheckTest, FindsAWriteAcceptedBelowAnAcknowledgedOne) {
  const std::vector<Op> history = {Accepted(7, 0, 10), Accepted(6, 11, 20)};
  const auto violations = Check(history, Holds(7, 7));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("had shown token 7"), std::string::npos);
}

TEST(HistoryCheckTest, FindsAnInventedCurrentToken) {
  const std::vector<Op> history = {Accepted(7, 0, 10), Rejected(6, 8)};
  // 8 was never presented, and the fence it showed is not held.
  EXPECT_EQ(Check(history, Holds(7, 7)).size(), 2u);
  const std::vector<Op> lower = {Accepted(7, 0, 10), Rejected(8, 7)};
  EXPECT_EQ(Check(lower, Holds(7, 7)).size(), 1u)
      << "a 409 must name a token above the refused one";
}

TEST(HistoryCheckTest, FindsAStateNobodyWrote) {
  const std::vector<Op> history = {Accepted(7, 0, 10)};
  EXPECT_EQ(Check(history, Holds(70, 7)).size(), 1u);
  // 70: it is above the fence, and no PUT sent it.
  EXPECT_EQ(Check(history, Holds(7, 70)).size(), 2u);
}

// Each history below is one the checker once passed although it breaks a
// promise.
TEST(HistoryCheckTest, FindsAFenceBelowATokenItHadShown) {
  // A 409 showed 8; the fence read back later is 7.
  const std::vector<Op> shown = {Unknown(7), Unknown(8), Rejected(6, 8)};
  EXPECT_EQ(Check(shown, Holds(7, std::nullopt, "")).size(), 1u);
  // A restart's read showed 9; a later read shows 5.
  const std::vector<Op> read = {Unknown(5), Unknown(9)};
  EXPECT_EQ(Check(read, Holds(5, std::nullopt, ""), {{"k", 9}}).size(), 1u);
  EXPECT_TRUE(Check(read, Holds(9, std::nullopt, ""), {{"k", 9}}).empty());
}

TEST(HistoryCheckTest, FindsAValueAboveItsFence) {
  const std::vector<Op> history = {Accepted(5, 0, 10), Unknown(9)};
  const auto violations = Check(history, Holds(5, 9, ""));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("above the fence"), std::string::npos);
}

TEST(HistoryCheckTest, FindsAWrongBody) {
  Op write = Accepted(5, 0, 10);
  write.body = "from A";
  EXPECT_TRUE(Check({write}, Holds(5, 5, "from A")).empty());
  EXPECT_EQ(Check({write}, Holds(5, 5, "from B")).size(), 1u);
}

TEST(HistoryCheckTest, FindsAnswersOtherThan2xxOr409) {
  for (int status : {500, 503, 507, 400}) {
    Op failed = Unknown(6);
    failed.outcome = Outcome::kError;
    failed.status = status;
    const auto violations = Check({Accepted(5, 0, 10), failed}, Holds(5, 5));
    ASSERT_EQ(violations.size(), 1u) << status;
    EXPECT_NE(violations[0].find("answered " + std::to_string(status)),
              std::string::npos)
        << violations[0];
  }
}

TEST(HistoryCheckTest, FindsARunOfMostlyFailedAnswers) {
  // Most answers 500, 503 or 507: each one is reported, not only the run.
  std::vector<Op> history = {Accepted(5, 0, 10)};
  const int statuses[] = {500, 503, 507};
  for (int i = 0; i < 9; ++i) {
    Op failed = Unknown(6 + i);
    failed.outcome = Outcome::kError;
    failed.status = statuses[i % 3];
    history.push_back(failed);
  }
  EXPECT_EQ(Check(history, Holds(5, 5)).size(), 9u);
}

Op Of(Op::Kind kind, Op op) {
  op.kind = kind;
  return op;
}

TEST(HistoryCheckTest, ADeleteOrABumpIsAWriteToTheFence) {
  using Kind = Op::Kind;
  // An acknowledged DELETE leaves no value and its token on the fence.
  const std::vector<Op> deleted = {Accepted(5, 0, 10),
                                   Of(Kind::kDelete, Accepted(7, 11, 20))};
  EXPECT_TRUE(Check(deleted, Holds(7, std::nullopt)).empty());
  // A bump raises the fence and leaves the value alone.
  const std::vector<Op> bumped = {Accepted(5, 0, 10),
                                  Of(Kind::kBump, Accepted(9, 11, 20))};
  EXPECT_TRUE(Check(bumped, Holds(9, 5)).empty());
  // A DELETE whose answer never came may or may not have landed.
  const std::vector<Op> maybe = {Accepted(5, 0, 10),
                                 Of(Kind::kDelete, Unknown(6))};
  EXPECT_TRUE(Check(maybe, Holds(5, 5)).empty());
  EXPECT_TRUE(Check(maybe, Holds(6, std::nullopt)).empty());
}

TEST(HistoryCheckTest, FindsALostDeleteOrBump) {
  using Kind = Op::Kind;
  const std::vector<Op> deleted = {Accepted(5, 0, 10),
                                   Of(Kind::kDelete, Accepted(7, 11, 20))};
  EXPECT_EQ(Check(deleted, Holds(7, 5)).size(), 1u) << "the value came back";
  EXPECT_EQ(Check(deleted, Holds(5, std::nullopt)).size(), 2u)
      << "the fence went back, and it cannot hold the DELETE that removed "
         "the value";
  const std::vector<Op> bumped = {Accepted(5, 0, 10),
                                  Of(Kind::kBump, Accepted(9, 11, 20))};
  EXPECT_EQ(Check(bumped, Holds(5, 5)).size(), 1u);
}

TEST(HistoryCheckTest, FindsAValueThatVanished) {
  using Kind = Op::Kind;
  // No DELETE was sent, or only one below the acknowledged PUT, or one
  // that was refused.
  EXPECT_EQ(Check({Accepted(5, 0, 10)}, Holds(5, std::nullopt)).size(), 1u);
  const std::vector<Op> below = {Of(Kind::kDelete, Unknown(4)),
                                 Accepted(5, 0, 10)};
  EXPECT_EQ(Check(below, Holds(5, std::nullopt)).size(), 1u);
  const std::vector<Op> refused = {
      Accepted(5, 0, 10), Of(Kind::kDelete, Rejected(6, 7)), Unknown(7)};
  EXPECT_EQ(Check(refused, Holds(7, std::nullopt)).size(), 1u);
}

TEST(HistoryCheckTest, FindsAValueABumpOrADeleteStored) {
  using Kind = Op::Kind;
  // Only a PUT stores a body: a value carrying a bump's token is invented.
  Op put = Accepted(5, 0, 10);
  put.body = "from A";
  const std::vector<Op> history = {put, Of(Kind::kBump, Accepted(9, 11, 20))};
  EXPECT_EQ(Check(history, Holds(9, 9, "")).size(), 1u);
}

TEST(HistoryCheckTest, FindsADeleteAcceptedBelowAnAcknowledgedBump) {
  using Kind = Op::Kind;
  const std::vector<Op> history = {Of(Kind::kBump, Accepted(9, 0, 10)),
                                   Of(Kind::kDelete, Accepted(8, 11, 20))};
  const auto violations = Check(history, Holds(9, std::nullopt));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("had shown token 9"), std::string::npos);
}

TEST(HistoryCheckTest, FindsARefusedWriteThatLanded) {
  // A write refused before any change (503 fence-held) presents no token.
  Op refused = Write(9, Outcome::kRefused, 11, 20);
  refused.body = "late";
  const std::vector<Op> history = {Accepted(5, 0, 10), refused};
  EXPECT_TRUE(Check(history, Holds(5, 5)).empty());
  EXPECT_EQ(Check(history, Holds(9, 9, "late")).size(), 2u)
      << "the fence carries a token nobody presented, and no PUT that could "
         "land sent the value";
}

// A history in parts, as a crash loop's cycles feed it.
TEST(HistoryCheckTest, CarriesOrderAndFloorsAcrossParts) {
  Checker checker;
  const std::vector<Op> first = {Accepted(9, 0, 10)};
  checker.Add(first);
  EXPECT_TRUE(checker.Check(Holds(9, 9)).empty());
  checker.Floor("k", 9);
  // Sent after the first part was answered: 5 is below the acknowledged 9.
  const std::vector<Op> second = {Accepted(5, 20, 30)};
  checker.Add(second);
  const auto violations = checker.Check(Holds(9, 9));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("had shown token 9"), std::string::npos);
  // The floor holds in later checks.
  const std::vector<Op> third = {Write(3, Outcome::kUnknown, 40)};
  checker.Add(third);
  EXPECT_EQ(checker.Check(Holds(5, 5)).size(), 3u)
      << "fence and value below acknowledged 9, and the fence below the 9 "
         "it had shown";
}

TEST(HistoryCheckTest, RefusesPartsThatOverlapInTime) {
  Checker checker;
  const std::vector<Op> first = {Accepted(9, 0, 10)};
  checker.Add(first);
  const std::vector<Op> overlapping = {Accepted(10, 5, 30)};
  EXPECT_THROW(checker.Add(overlapping), std::invalid_argument);
}

// The value is the work of the PUT or DELETE that landed last: one that
// ended before another was sent cannot be it.
TEST(HistoryCheckTest, FindsAValueLeftByAWriteThatWasNotLast) {
  using Kind = Op::Kind;
  // A DELETE given up on at a kill, before the acknowledged PUT of a later
  // cycle was sent, cannot have removed that PUT's value.
  Checker cycles;
  const std::vector<Op> first = {
      Accepted(80, 0, 10),
      Of(Kind::kDelete, Write(100, Outcome::kUnknown, 11))};
  cycles.Add(first);
  EXPECT_TRUE(cycles.Check(Holds(80, 80)).empty());
  const std::vector<Op> second = {Accepted(95, 20, 30),
                                  Of(Kind::kBump, Accepted(130, 31, 40))};
  cycles.Add(second);
  EXPECT_EQ(cycles.Check(Holds(130, std::nullopt)).size(), 1u);

  // Equal tokens: a PUT acknowledged before a DELETE with its token was
  // sent, and the DELETE acknowledged, leave no value.
  const std::vector<Op> put_then_delete = {
      Accepted(7, 0, 10), Of(Kind::kDelete, Accepted(7, 11, 20))};
  EXPECT_TRUE(Check(put_then_delete, Holds(7, std::nullopt)).empty());
  EXPECT_EQ(Check(put_then_delete, Holds(7, 7)).size(), 1u);
  // And the other way round.
  const std::vector<Op> delete_then_put = {
      Of(Kind::kDelete, Accepted(7, 0, 10)), Accepted(7, 11, 20)};
  EXPECT_TRUE(Check(delete_then_put, Holds(7, 7)).empty());
  EXPECT_EQ(Check(delete_then_put, Holds(7, std::nullopt)).size(), 1u);

  // Two PUTs with one token, one after the other: the later body stays.
  Op a = Accepted(7, 0, 10);
  a.body = "first";
  Op b = Accepted(7, 11, 20);
  b.body = "second";
  EXPECT_TRUE(Check({a, b}, Holds(7, 7, "second")).empty());
  EXPECT_EQ(Check({a, b}, Holds(7, 7, "first")).size(), 1u)
      << "the second PUT's overwrite was lost";

  // Concurrent (each sent before the other was answered): either may land
  // last.
  const std::vector<Op> concurrent = {Accepted(7, 0, 20),
                                      Of(Kind::kDelete, Accepted(7, 5, 15))};
  EXPECT_TRUE(Check(concurrent, Holds(7, 7)).empty());
  EXPECT_TRUE(Check(concurrent, Holds(7, std::nullopt)).empty());
}

// The scope "s/" and two keys under it.
Op To(const std::string& key, Op op) {
  op.key = key;
  return op;
}
// What s/a and s/b hold: the fence each reads, and each value's token.
std::map<std::string, KeyState> UnderScope(std::uint64_t fence_a,
                                           std::optional<std::uint64_t> a,
                                           std::uint64_t fence_b,
                                           std::optional<std::uint64_t> b) {
  std::map<std::string, KeyState> state;
  state["s/a"] = {fence_a, a, ""};
  state["s/b"] = {fence_b, b, ""};
  return state;
}
std::vector<std::string> CheckUnderScope(
    const std::vector<Op>& history,
    const std::map<std::string, KeyState>& state) {
  Checker checker;
  checker.Scope("s/");
  checker.Add(history);
  return checker.Check(state);
}

// Keys under a scope share its fence: a write to one key orders, and is
// refused by, the writes to the others.
TEST(HistoryCheckTest, KeysUnderAScopeShareItsFence) {
  // 5 to s/a, then 7 to s/b; a 409 to s/a at 6 names s/b's 7.
  const std::vector<Op> history = {To("s/a", Accepted(5, 0, 10)),
                                   To("s/b", Accepted(7, 11, 20)),
                                   To("s/a", Rejected(6, 7))};
  EXPECT_TRUE(CheckUnderScope(history, UnderScope(7, 5, 7, 7)).empty());
  // The shared fence lost s/b's token: it is read through both keys.
  EXPECT_EQ(CheckUnderScope(history, UnderScope(5, 5, 5, std::nullopt)).size(),
            3u)
      << "the fence below acknowledged 7 and below the 7 it showed, and s/b's "
         "value gone";
  // s/a accepted 6 after s/b's 7 was acknowledged.
  const std::vector<Op> below = {To("s/b", Accepted(7, 0, 10)),
                                 To("s/a", Accepted(6, 11, 20))};
  const auto violations = CheckUnderScope(below, UnderScope(7, 6, 7, 7));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("had shown token 7"), std::string::npos);
}

// A fence that went down and rose again between two reads is seen by what
// it showed in between.
TEST(HistoryCheckTest, FindsAFenceThatWentDownBetweenReads) {
  // A restart read 9 (a write given up on at the kill had landed); after
  // it, 7 was accepted.
  Checker cycles;
  const std::vector<Op> first = {Unknown(9)};
  cycles.Add(first);
  EXPECT_TRUE(cycles.Check(Holds(9, 9)).empty());
  cycles.Floor("k", 9);
  const std::vector<Op> second = {Accepted(7, 20, 30), Accepted(10, 31, 40)};
  cycles.Add(second);
  const auto violations = cycles.Check(Holds(10, 10));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("had shown token 9"), std::string::npos);
  // A 409 sent after 9 was acknowledged showed 8.
  const std::vector<Op> history = {Unknown(8), Accepted(9, 1, 10),
                                   Rejected(6, 8, 11, 12),
                                   Accepted(12, 13, 20)};
  const auto found = Check(history, Holds(12, 12));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].find("showed current_token 8"), std::string::npos);
  // Unless refusals may come from a replica's cache.
  EXPECT_TRUE(Check(history, Holds(12, 12), {}, Rejections::kMayLag).empty());
}

TEST(HistoryCheckTest, AScopedKeysFloorBeforeItsFirstWriteIsTheScopes) {
  Checker checker;
  checker.Scope("s/");
  checker.Add({To("s/a", Accepted(5, 0, 10))});
  EXPECT_TRUE(checker.Check(UnderScope(5, 5, 5, std::nullopt)).empty());
  // Restarts takes each key's read for a floor, s/b's too.
  checker.Floor("s/a", 5);
  checker.Floor("s/b", 5);
  checker.Add({});
  EXPECT_TRUE(checker.Check(UnderScope(5, 5, 5, std::nullopt)).empty());
  checker.Add({To("s/b", Accepted(6, 20, 30))});
  EXPECT_TRUE(checker.Check(UnderScope(6, 5, 6, 6)).empty());
}

TEST(HistoryCheckTest, FindsKeysOfOneScopeReadingDifferentFences) {
  EXPECT_EQ(CheckUnderScope({To("s/a", Accepted(7, 0, 10))},
                            UnderScope(7, 7, 99, std::nullopt))
                .size(),
            2u)
      << "two reads of one fence, and 99 nobody presented";
}

// A write without an answer at a kill that the restart showed had not
// landed (its fence reads below its token) cannot land later: the process
// that had it is gone.
TEST(HistoryCheckTest, FindsAnUnlandedWriteThatReappearsAfterALaterRestart) {
  Checker checker;
  checker.CheckAfterRestarts();
  Op lost = Write(9, Outcome::kUnknown, 11);
  lost.body = "nine";
  const std::vector<Op> first = {Accepted(7, 0, 10), lost};
  checker.Add(first);
  EXPECT_TRUE(checker.Check(Holds(7, 7)).empty()) << "9 did not land";
  checker.Floor("k", 7);
  // The next cycle writes nothing to k; then 9 shows up.
  checker.Add({});
  const auto violations = checker.Check(Holds(9, 9, "nine"));
  EXPECT_EQ(violations.size(), 2u)
      << "the fence and the value hold a write the first restart showed "
         "had not landed";
  // Without restarts between the checks (a write in flight may still land
  // later), the same reads are fine.
  Checker lenient;
  lenient.Add(first);
  EXPECT_TRUE(lenient.Check(Holds(7, 7)).empty());
  lenient.Add({});
  EXPECT_TRUE(lenient.Check(Holds(9, 9, "nine")).empty());
}

// A write the restart may have seen landed stays a possible author.
TEST(HistoryCheckTest, AnUnansweredWriteThatMayHaveLandedStaysExplained) {
  Checker checker;
  checker.CheckAfterRestarts();
  Op maybe = Write(9, Outcome::kUnknown, 11);
  maybe.body = "nine";
  checker.Add({Accepted(7, 0, 10), maybe});
  EXPECT_TRUE(checker.Check(Holds(9, 9, "nine")).empty());
  checker.Add({});
  EXPECT_TRUE(checker.Check(Holds(9, 9, "nine")).empty());
}

// A 409's current_token is the fence's: a token sent only after the 409
// came back cannot be it.
TEST(HistoryCheckTest, FindsA409CitingATokenSentOnlyAfterIt) {
  const std::vector<Op> history = {Accepted(5, 0, 10), Rejected(4, 8, 20, 30),
                                   Accepted(8, 40, 50)};
  const auto violations = Check(history, Holds(8, 8));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("no writer had sent before the 409"),
            std::string::npos)
      << violations[0];
  // Sent before the 409 came back (still in flight), it may be the fence's.
  const std::vector<Op> racing = {Accepted(5, 0, 10), Accepted(8, 15, 40),
                                  Rejected(4, 8, 20, 30)};
  EXPECT_TRUE(Check(racing, Holds(8, 8)).empty());
}

// Reads under load: GET /k and GET /v1/fences/k while the writes run.
Read ValueRead(std::optional<std::uint64_t> token, std::int64_t sent,
               std::int64_t answered, const std::string& body = "") {
  Read r;
  r.key = "k";
  r.sent_ns = sent;
  r.answered_ns = answered;
  r.status = token ? 200 : 404;
  r.token = token;
  r.body = body;
  return r;
}
Read FenceRead(std::optional<std::uint64_t> token, std::int64_t sent,
               std::int64_t answered) {
  Read r = ValueRead(token, sent, answered);
  r.kind = Read::Kind::kFence;
  return r;
}
std::vector<std::string> CheckReads(
    const std::vector<Op>& history, const std::vector<Read>& reads,
    const std::map<std::string, KeyState>& state) {
  Checker checker;
  checker.Add(history, reads);
  return checker.Check(state);
}

// 5, then 7 acknowledged at 20: a read sent after that shows 7 or more.
const std::vector<Op> kFiveThenSeven = {Accepted(5, 0, 10),
                                        Accepted(7, 11, 20)};

TEST(HistoryCheckTest, ReadsThatKeepUpPass) {
  const std::vector<Read> reads = {
      ValueRead(5, 12, 19),
      FenceRead(5, 12, 19),  // 7 not yet acknowledged
      ValueRead(7, 12, 19),
      FenceRead(7, 15, 30),  // 7 sent, may be read
      ValueRead(7, 21, 22),
      FenceRead(7, 21, 22),
      ValueRead(std::nullopt, 1, 2),
      FenceRead(std::nullopt, 1, 2)};
  EXPECT_TRUE(CheckReads(kFiveThenSeven, reads, Holds(7, 7)).empty());
}

TEST(HistoryCheckTest, FindsAStaleRead) {
  const auto value =
      CheckReads(kFiveThenSeven, {ValueRead(5, 21, 22)}, Holds(7, 7));
  ASSERT_EQ(value.size(), 1u);
  EXPECT_NE(value[0].find("a read of its value showed token 5 after a write "
                          "of token 7"),
            std::string::npos)
      << value[0];
  const auto fence =
      CheckReads(kFiveThenSeven, {FenceRead(5, 21, 22)}, Holds(7, 7));
  ASSERT_EQ(fence.size(), 1u);
  EXPECT_NE(fence[0].find("a read of its fence showed token 5 after the "
                          "fence had shown token 7"),
            std::string::npos)
      << fence[0];
  // One read shows 7; another, sent after it was answered, shows 5.
  const std::vector<Op> racing = {Accepted(5, 0, 10), Accepted(7, 11, 40)};
  EXPECT_EQ(CheckReads(racing, {FenceRead(7, 12, 13), FenceRead(5, 14, 15)},
                       Holds(7, 7))
                .size(),
            1u);
  // A value (or fence) gone after it was acknowledged, with no DELETE.
  EXPECT_EQ(CheckReads(kFiveThenSeven,
                       {ValueRead(std::nullopt, 21, 22),
                        FenceRead(std::nullopt, 21, 22)},
                       Holds(7, 7))
                .size(),
            2u);
  // A DELETE at 8 sent before the read's answer explains the absence.
  Op erase = Write(8, Outcome::kUnknown, 21);
  erase.kind = Op::Kind::kDelete;
  std::vector<Op> deleting = kFiveThenSeven;
  deleting.push_back(erase);
  EXPECT_TRUE(CheckReads(deleting, {ValueRead(std::nullopt, 21, 22)},
                         Holds(8, std::nullopt))
                  .empty());
}

TEST(HistoryCheckTest, FindsAReadOfSomethingNeverWritten) {
  EXPECT_EQ(CheckReads(kFiveThenSeven,
                       {FenceRead(9, 21, 22), ValueRead(7, 21, 22, "other"),
                        ValueRead(9, 21, 22)},
                       Holds(7, 7))
                .size(),
            4u)
      << "9 nobody presented (read as the fence and as the value), a body "
         "no PUT sent, and the fence read back at 7, below the 9 it showed";
  // Sent only after the read came back: not yet written when it was read.
  const std::vector<Op> later = {Accepted(5, 0, 10), Accepted(7, 30, 40)};
  EXPECT_EQ(CheckReads(later, {FenceRead(7, 21, 22)}, Holds(7, 7)).size(), 1u);
  Read failed = ValueRead(7, 21, 22);
  failed.status = 500;
  EXPECT_EQ(CheckReads(kFiveThenSeven, {failed}, Holds(7, 7)).size(), 1u);
}

// What a read showed is durable (readers see published writes only): a
// write sent after it is held to it, and so is the fence after a restart.
TEST(HistoryCheckTest, AReadShowsTheFenceAsAnAnswerDoes) {
  const std::vector<Op> history = {Write(9, Outcome::kUnknown, 0),
                                   Accepted(8, 30, 40)};
  const auto violations =
      CheckReads(history, {FenceRead(9, 10, 20)}, Holds(9, 9));
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].find("token 8 was accepted after the fence had "
                               "shown token 9"),
            std::string::npos)
      << violations[0];
  Checker restarts;
  restarts.CheckAfterRestarts();
  restarts.Add({Write(9, Outcome::kUnknown, 0)}, {FenceRead(9, 10, 20)});
  EXPECT_EQ(restarts.Check(Holds(0, std::nullopt)).size(), 1u)
      << "the fence went below the 9 a read had shown";
}

}  // namespace
}  // namespace fencepost::reliability
