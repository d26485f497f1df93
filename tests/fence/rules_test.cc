// The rulebook (fence/rules.h), rule by rule, with no engine: each SPEC
// rule of fenced writes, batches and leases is a row of a table.

#include "fence/rules.h"

#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "fence/errc.h"

namespace fencepost::fence {
namespace {

using Verdict = WriteOutcome::Verdict;
using LeaseVerdict = LeaseOutcome::Verdict;
using Reason = LeaseOutcome::GrantReason;
constexpr std::int64_t kNow = 1'700'000'000'000'000'000;
constexpr std::int64_t kEarlier = 1'600'000'000'000'000'000;
constexpr Token kMax = std::numeric_limits<Token>::max();

struct WriteCase {
  const char* rule;
  std::optional<Token> fence;
  std::optional<Token> token;
  bool observe;
  Verdict verdict;
  std::optional<Token> after;  // the fence after
  bool raises;  // its fence record rewritten, its update time now
};

TEST(WriteRulesTest, EveryVerdictOfTheAcceptRule) {
  const WriteCase cases[] = {
      {"a first write makes the fence", std::nullopt, 5, false,
       Verdict::kAccepted, 5, true},
      {"an equal token is accepted, the fence unchanged", 5, 5, false,
       Verdict::kAccepted, 5, false},
      {"a higher token advances the fence", 5, 9, false, Verdict::kAccepted, 9,
       true},
      {"a lower token is rejected", 9, 5, false, Verdict::kRejected, 9, false},
      {"token 0 on a fence at 0", 0, 0, false, Verdict::kAccepted, 0, false},
      {"the largest token", 9, kMax, false, Verdict::kAccepted, kMax, true},
      {"observe applies a stale write, fence kept", 9, 5, true,
       Verdict::kObserved, 9, false},
      {"observe accepts a fresh one as enforce does", 5, 9, true,
       Verdict::kAccepted, 9, true},
      {"observe without a token never moves the fence", 9, std::nullopt, true,
       Verdict::kObserved, 9, false},
      {"observe without a token on no fence", std::nullopt, std::nullopt, true,
       Verdict::kObserved, std::nullopt, false},
  };
  for (const WriteCase& c : cases) {
    FencedWrite write{"orders/1", c.token, c.observe, std::nullopt};
    const WriteOutcome out = DecideWrite(write, c.fence, kEarlier, kNow);
    EXPECT_EQ(out.verdict, c.verdict) << c.rule;
    EXPECT_EQ(out.previous, c.fence) << c.rule;
    EXPECT_EQ(out.current, c.after) << c.rule;
    EXPECT_EQ(RaisesFence(out), c.raises) << c.rule;
    EXPECT_EQ(out.updated_at_ns, c.raises ? kNow : kEarlier) << c.rule;
    EXPECT_EQ(Applied(out), c.verdict != Verdict::kRejected) << c.rule;
    // A fence never goes down.
    if (c.fence && out.current) {
      EXPECT_GE(*out.current, *c.fence) << c.rule;
    }
  }
}

TEST(WriteRulesTest, TheDecisionTellsCreationAndChurn) {
  FencedWrite write{"k", 7, false, std::nullopt};
  EXPECT_TRUE(DecideWrite(write, std::nullopt, 0, kNow).decision.creates);
  EXPECT_TRUE(DecideWrite(write, 6, 0, kNow).decision.advances);
  EXPECT_FALSE(DecideWrite(write, 7, 0, kNow).decision.advances);
}

// If-Match and If-None-Match on writes (SPEC "Conditional writes"), each
// form against a value tagged "t", a value tagged "u" and no value.
TEST(PreconditionRulesTest, EachFormOfIfMatchAndIfNoneMatch) {
  struct Case {
    const char* rule;
    Precondition pre;
    bool on_t, on_u, on_none;
  };
  const auto match = [](bool any, std::vector<std::string> tags) {
    Precondition p;
    p.has_match = true;
    p.match_any = any;
    p.match = std::move(tags);
    return p;
  };
  const auto none_match = [](bool any, std::vector<std::string> tags) {
    Precondition p;
    p.has_none_match = true;
    p.none_match_any = any;
    p.none_match = std::move(tags);
    return p;
  };
  const Case cases[] = {
      {"no precondition", {}, true, true, true},
      {"If-Match: *", match(true, {}), true, true, false},
      {"If-Match: \"t\"", match(false, {"t"}), true, false, false},
      {"If-Match: a list naming t", match(false, {"x", "t"}), true, false,
       false},
      {"If-None-Match: *", none_match(true, {}), false, false, true},
      {"If-None-Match: \"t\"", none_match(false, {"t"}), false, true, true},
      {"If-None-Match: a list naming t", none_match(false, {"x", "t"}), false,
       true, true},
      {"If-None-Match: a list without t", none_match(false, {"x", "y"}), true,
       true, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(PreconditionHolds(c.pre, {true, "t"}), c.on_t) << c.rule;
    EXPECT_EQ(PreconditionHolds(c.pre, {true, "u"}), c.on_u) << c.rule;
    EXPECT_EQ(PreconditionHolds(c.pre, {false, ""}), c.on_none) << c.rule;
    // A write whose token is accepted is refused exactly when it fails.
    FencedWrite write{"k", 7, false, std::nullopt};
    write.precondition = c.pre;
    EXPECT_EQ(DecideWrite(write, 5, kEarlier, kNow, {true, "t"}).verdict,
              c.on_t ? Verdict::kAccepted : Verdict::kPreconditionFailed)
        << c.rule;
  }
}

TEST(GateRulesTest, AHeldFenceTellsHowLongToWait) {
  constexpr std::int64_t kMs = 1'000'000;
  struct Case {
    const char* rule;
    std::int64_t now, until;
    int seconds;
  };
  const Case cases[] = {
      {"never held", 5000 * kMs, 0, 0},
      {"the hold has ended", 5000 * kMs, 5000 * kMs, 0},
      {"past its end", 5001 * kMs, 5000 * kMs, 0},
      {"under a millisecond left is still a second", 0, kMs / 2, 1},
      {"one millisecond left", 0, kMs, 1},
      {"a whole second left", 0, 1000 * kMs, 1},
      {"a second and a millisecond", 0, 1001 * kMs, 2},
      {"partial milliseconds round down first", 0, 1000 * kMs + kMs / 2, 1},
      {"the default settle", 0, 2000 * kMs, 2},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(HeldSeconds(c.now, c.until), c.seconds) << c.rule;
  }
}

TEST(GateRulesTest, AStaleTokenIsStillRejectedWhileTheFenceIsHeld) {
  struct Case {
    const char* rule;
    std::optional<Token> fence;
    std::optional<Token> token;
    bool observe;
    bool rejected;  // else: the write waits (503 fence-held)
  };
  const Case cases[] = {
      {"a stale token gets its 409 first", 9, 5, false, true},
      {"an equal token waits", 9, 9, false, false},
      {"a higher token waits", 9, 12, false, false},
      {"the first write of a fence waits", std::nullopt, 1, false, false},
      {"observe mode waits even when stale", 9, 5, true, false},
      {"observe mode without a token waits", 9, std::nullopt, true, false},
  };
  for (const Case& c : cases) {
    FencedWrite write{"orders/1", c.token, c.observe, std::nullopt};
    // A precondition never makes a held write's answer.
    write.precondition.has_match = true;
    const std::optional<WriteOutcome> out =
        RejectWhileHeld(write, c.fence, kEarlier);
    ASSERT_EQ(out.has_value(), c.rejected) << c.rule;
    if (!out) continue;
    EXPECT_EQ(out->verdict, Verdict::kRejected) << c.rule;
    EXPECT_EQ(out->current, c.fence) << c.rule;
    EXPECT_EQ(out->updated_at_ns, kEarlier) << c.rule;
    EXPECT_FALSE(RaisesFence(*out)) << c.rule;
  }
}

TEST(GateRulesTest, APreconditionIsDecidedAgainInTheTurn) {
  Precondition if_match_t;
  if_match_t.has_match = true;
  if_match_t.match = {"t"};
  Precondition create_only;
  create_only.has_none_match = true;
  create_only.none_match_any = true;
  struct Case {
    const char* rule;
    Precondition pre;
    ValueNow now;
    Verdict verdict;
    const char* etag;
  };
  const Case cases[] = {
      {"no precondition always holds", {}, {true, "u"}, Verdict::kAccepted, ""},
      {"If-Match still holds", if_match_t, {true, "t"}, Verdict::kAccepted, ""},
      {"If-Match after another replica wrote",
       if_match_t,
       {true, "u"},
       Verdict::kPreconditionFailed,
       "u"},
      {"If-Match after another replica deleted",
       if_match_t,
       {false, ""},
       Verdict::kPreconditionFailed,
       ""},
      {"create-only still holds",
       create_only,
       {false, ""},
       Verdict::kAccepted,
       ""},
      {"create-only after another replica created",
       create_only,
       {true, "u"},
       Verdict::kPreconditionFailed,
       "u"},
  };
  for (const Case& c : cases) {
    FencedWrite write{"k", 7, false, std::nullopt};
    const WriteOutcome committed = DecideWrite(write, 5, kEarlier, kNow);
    ASSERT_TRUE(Applied(committed)) << c.rule;
    const WriteOutcome out = RecheckPrecondition(committed, c.pre, c.now);
    EXPECT_EQ(out.verdict, c.verdict) << c.rule;
    EXPECT_EQ(out.etag, c.etag) << c.rule;
    // The fence keeps the move its commit made, which is always safe.
    EXPECT_EQ(out.current, Token{7}) << c.rule;
    EXPECT_EQ(out.updated_at_ns, kNow) << c.rule;
  }
}

TEST(GateRulesTest, WhatTheStoreDidDecidesTheAnswerAndTheHold) {
  const std::error_code kStoreError = std::make_error_code(std::errc::io_error);
  struct Case {
    const char* rule;
    bool observe;
    Landing landing;
    Verdict verdict;
    bool error;
    bool holds;
  };
  const Case cases[] = {
      {"applied: the commit's verdict", false, Landing::kApplied,
       Verdict::kAccepted, false, false},
      {"applied in observe mode", true, Landing::kApplied, Verdict::kObserved,
       false, false},
      {"not applied fails; nothing may still land", false, Landing::kNotApplied,
       Verdict::kFailed, true, false},
      {"unknown fails and holds the fence closed", false, Landing::kUnknown,
       Verdict::kFailed, true, true},
      {"unknown in observe mode holds too", true, Landing::kUnknown,
       Verdict::kFailed, true, true},
  };
  for (const Case& c : cases) {
    FencedWrite write{"k", c.observe ? 3 : 7, c.observe, std::nullopt};
    const WriteOutcome committed = DecideWrite(write, 5, kEarlier, kNow);
    ASSERT_TRUE(Applied(committed)) << c.rule;
    const WriteOutcome out = AfterLanding(committed, c.landing, kStoreError);
    EXPECT_EQ(out.verdict, c.verdict) << c.rule;
    EXPECT_EQ(out.error, c.error ? kStoreError : std::error_code{}) << c.rule;
    EXPECT_EQ(HoldsFence(c.landing), c.holds) << c.rule;
    // Whatever the store did, the fence stands where the commit put it.
    EXPECT_EQ(out.current, committed.current) << c.rule;
    EXPECT_EQ(out.decision.accepted, committed.decision.accepted) << c.rule;
  }
}

WriteOutcome Outcome(Verdict verdict, std::error_code error = {}) {
  WriteOutcome out;
  out.verdict = verdict;
  out.error = error;
  return out;
}

TEST(BatchRulesTest, AllOrNothingWithTheVerdictOfTheWriteThatStopsIt) {
  struct Case {
    const char* rule;
    std::vector<Verdict> writes;
    Verdict verdict;
  } cases[] = {
      {"all accepted",
       {Verdict::kAccepted, Verdict::kAccepted},
       Verdict::kAccepted},
      {"one observed makes it observed",
       {Verdict::kAccepted, Verdict::kObserved},
       Verdict::kObserved},
      {"a stale write stops it",
       {Verdict::kAccepted, Verdict::kRejected},
       Verdict::kRejected},
      {"a failed write stops it",
       {Verdict::kObserved, Verdict::kFailed},
       Verdict::kFailed},
  };
  for (const Case& c : cases) {
    std::vector<WriteOutcome> outcomes;
    for (Verdict v : c.writes) outcomes.push_back(Outcome(v));
    EXPECT_EQ(StopsBatch(outcomes.back()),
              c.verdict == Verdict::kRejected || c.verdict == Verdict::kFailed)
        << c.rule;
    const WriteOutcome out = BatchOutcome(outcomes);
    EXPECT_EQ(out.verdict, c.verdict) << c.rule;
    EXPECT_EQ(out.batch.size(), c.writes.size()) << c.rule;
  }
  const WriteOutcome failed = BatchOutcome(
      {Outcome(Verdict::kAccepted), Outcome(Verdict::kFailed, Errc::kMapFull)});
  EXPECT_EQ(failed.error, std::error_code(Errc::kMapFull));
}

LeaseRecord Record(const std::string& holder, Token token,
                   bool released = false) {
  LeaseRecord r;
  r.holder = holder;
  r.fence = "jobs/nightly";
  r.token = token;
  r.ttl_ms = 1000;
  r.acquired_at_ns = r.renewed_at_ns = kEarlier;
  r.released = released;
  return r;
}

LeaseOp Acquire(const std::string& holder, std::uint64_t ttl_ms = 3000) {
  return LeaseOp{LeaseOp::Kind::kAcquire, "jobs/nightly", holder, ttl_ms, 0,
                 "jobs/nightly"};
}

LeaseOp Release(const std::string& holder, Token token) {
  return LeaseOp{LeaseOp::Kind::kRelease, "jobs/nightly", holder, 0, token,
                 "jobs/nightly"};
}

LeaseState State(std::optional<LeaseRecord> record, bool live,
                 std::int64_t expires_in_ms = 0) {
  LeaseState s;
  s.record = std::move(record);
  s.live = live;
  s.expires_in_ms = expires_in_ms;
  return s;
}

LeaseState Blocked(LeaseState s) {
  LeaseRecord other = Record("c", 40);
  s.other = LeaseState::Blocking{"jobs/other", other, 700};
  return s;
}

struct LeaseCase {
  const char* rule;
  LeaseOp op;
  std::optional<Token> fence;
  LeaseState state;
  Verdict verdict;
  LeaseVerdict lease;
  Token token;  // the lease's token after (or the blocking one's)
  std::optional<Token> fence_after;
};

TEST(LeaseRulesTest, EveryRuleOfTheLeasesSection) {
  const LeaseCase cases[] = {
      {"the first grant: token 1 + the fence", Acquire("a"), 7,
       State(std::nullopt, false), Verdict::kAccepted, LeaseVerdict::kGranted,
       8, 8},
      {"the first grant on no fence", Acquire("a"), std::nullopt,
       State(std::nullopt, false), Verdict::kAccepted, LeaseVerdict::kGranted,
       1, 1},
      {"the holder of record renews: same token", Acquire("a"), 5,
       State(Record("a", 5), true), Verdict::kAccepted, LeaseVerdict::kRenewed,
       5, 5},
      {"the holder of record renews past expiry while nobody took it",
       Acquire("a"), 5, State(Record("a", 5), false), Verdict::kAccepted,
       LeaseVerdict::kRenewed, 5, 5},
      {"another holder of a live lease is denied", Acquire("b"), 5,
       State(Record("a", 5), true, 900), Verdict::kRejected,
       LeaseVerdict::kDenied, 5, 5},
      {"another holder after expiry gets a grant above both", Acquire("b"), 5,
       State(Record("a", 5), false), Verdict::kAccepted, LeaseVerdict::kGranted,
       6, 6},
      {"after a release, a grant", Acquire("b"), 5,
       State(Record("a", 5, true), false), Verdict::kAccepted,
       LeaseVerdict::kGranted, 6, 6},
      {"the lease's token wins over a lower fence", Acquire("b"), 2,
       State(Record("a", 9), false), Verdict::kAccepted, LeaseVerdict::kGranted,
       10, 10},
      {"a bumped fence makes the holder's renewal a grant", Acquire("a"), 20,
       State(Record("a", 5), true), Verdict::kAccepted, LeaseVerdict::kGranted,
       21, 21},
      {"one live lease per fence: a grant is denied", Acquire("b"), 40,
       Blocked(State(std::nullopt, false)), Verdict::kRejected,
       LeaseVerdict::kDenied, 40, 40},
      {"one live lease per fence: no renewal either", Acquire("a"), 5,
       Blocked(State(Record("a", 5), false)), Verdict::kRejected,
       LeaseVerdict::kDenied, 40, 5},
      {"a bumped fence past an expired holder: a grant", Acquire("a"), 20,
       State(Record("a", 5), false), Verdict::kAccepted, LeaseVerdict::kGranted,
       21, 21},
      {"the holder acquires again after its release: a grant", Acquire("a"), 5,
       State(Record("a", 5, true), false), Verdict::kAccepted,
       LeaseVerdict::kGranted, 6, 6},
      {"a renewal at the largest token", Acquire("a"), kMax,
       State(Record("a", kMax), true), Verdict::kAccepted,
       LeaseVerdict::kRenewed, kMax, kMax},
      {"a denial names the lease's own holder first", Acquire("b"), 5,
       Blocked(State(Record("a", 5), true, 900)), Verdict::kRejected,
       LeaseVerdict::kDenied, 5, 5},
      {"release by the live holder with its token", Release("a", 5), 5,
       State(Record("a", 5), true), Verdict::kAccepted, LeaseVerdict::kReleased,
       5, 5},
      {"release with a wrong token", Release("a", 4), 5,
       State(Record("a", 5), true), Verdict::kRejected, LeaseVerdict::kNotHeld,
       5, 5},
      {"release by another holder", Release("b", 5), 5,
       State(Record("a", 5), true), Verdict::kRejected, LeaseVerdict::kNotHeld,
       5, 5},
      {"release of a lease that ran out", Release("a", 5), 5,
       State(Record("a", 5), false), Verdict::kRejected, LeaseVerdict::kNotHeld,
       5, 5},
      {"release of a released lease", Release("a", 5), 5,
       State(Record("a", 5, true), false), Verdict::kRejected,
       LeaseVerdict::kNotHeld, 5, 5},
      {"release of a lease never granted", Release("a", 1), std::nullopt,
       State(std::nullopt, false), Verdict::kRejected, LeaseVerdict::kNotHeld,
       0, std::nullopt},
      {"release while another lease holds the fence", Release("a", 5), 5,
       Blocked(State(Record("a", 5), true)), Verdict::kAccepted,
       LeaseVerdict::kReleased, 5, 5},
  };
  for (const LeaseCase& c : cases) {
    const LeaseDecision d = DecideLease(c.op, c.fence, c.state, kNow);
    ASSERT_TRUE(d.outcome.lease.has_value()) << c.rule;
    const LeaseOutcome& lease = *d.outcome.lease;
    EXPECT_EQ(d.outcome.verdict, c.verdict) << c.rule;
    EXPECT_EQ(lease.verdict, c.lease) << c.rule;
    EXPECT_EQ(lease.lease.token, c.token) << c.rule;
    EXPECT_EQ(d.outcome.current, c.fence_after) << c.rule;
    EXPECT_EQ(d.next.has_value(), c.verdict == Verdict::kAccepted) << c.rule;
    EXPECT_EQ(lease.existed, c.state.record.has_value()) << c.rule;
    if (c.fence && d.outcome.current) {
      EXPECT_GE(*d.outcome.current, *c.fence) << c.rule;  // never down
    }
  }
}

TEST(LeaseRulesTest, AGrantStampsTheRecordAndSaysWhyItWasPossible) {
  LeaseDecision d =
      DecideLease(Acquire("b", 2500), 5, State(Record("a", 5), false), kNow);
  ASSERT_TRUE(d.next);
  EXPECT_EQ(d.next->holder, "b");
  EXPECT_EQ(d.next->fence, "jobs/nightly");
  EXPECT_EQ(d.next->ttl_ms, 2500u);
  EXPECT_EQ(d.next->acquired_at_ns, kNow);
  EXPECT_EQ(d.next->renewed_at_ns, kNow);
  EXPECT_EQ(d.next->transitions, 1u);
  EXPECT_EQ(d.outcome.lease->reason, Reason::kExpired);
  EXPECT_EQ(d.outcome.lease->previous_holder, "a");
  EXPECT_TRUE(d.outcome.lease->previous_expired);
  EXPECT_EQ(d.outcome.lease->expires_in_ms, 2500);
  EXPECT_TRUE(d.outcome.decision.advances);
  EXPECT_EQ(d.outcome.updated_at_ns, kNow);

  d = DecideLease(Acquire("b"), 5, State(Record("a", 5, true), false), kNow);
  EXPECT_EQ(d.outcome.lease->reason, Reason::kReleased);
  EXPECT_FALSE(d.outcome.lease->previous_expired);
  d = DecideLease(Acquire("a"), 5, State(Record("a", 5, true), false), kNow);
  EXPECT_EQ(d.outcome.lease->reason, Reason::kReleased);
  EXPECT_EQ(d.next->transitions, 0u);  // its own lease again
  d = DecideLease(Acquire("a"), 20, State(Record("a", 5), false), kNow);
  EXPECT_EQ(d.outcome.lease->reason, Reason::kFenceAbove);
  EXPECT_FALSE(d.outcome.lease->previous_expired);
  d = DecideLease(Acquire("a"), 9, State(Record("a", 5), true), kNow);
  EXPECT_EQ(d.outcome.lease->reason, Reason::kFenceAbove);
  EXPECT_EQ(d.next->transitions, 0u);  // the same holder
  d = DecideLease(Acquire("a"), std::nullopt, State(std::nullopt, false), kNow);
  EXPECT_EQ(d.outcome.lease->reason, Reason::kFirst);
  EXPECT_EQ(d.next->transitions, 0u);
}

TEST(LeaseRulesTest, ARenewalKeepsTheGrantAndResetsTheTtl) {
  LeaseRecord held = Record("a", 5);
  held.transitions = 3;
  const LeaseDecision d =
      DecideLease(Acquire("a", 4000), 5, State(held, true, 10), kNow);
  ASSERT_TRUE(d.next);
  EXPECT_EQ(d.next->acquired_at_ns, kEarlier);
  EXPECT_EQ(d.next->renewed_at_ns, kNow);
  EXPECT_EQ(d.next->ttl_ms, 4000u);
  EXPECT_EQ(d.next->transitions, 3u);
  EXPECT_EQ(d.outcome.lease->expires_in_ms, 4000);
  EXPECT_FALSE(RaisesFence(d.outcome));
}

TEST(LeaseRulesTest, ADenialSaysWhoHoldsAndForHowLong) {
  LeaseDecision d =
      DecideLease(Acquire("b"), 5, State(Record("a", 5), true, 900), kNow);
  EXPECT_EQ(d.outcome.lease->lease.holder, "a");
  EXPECT_EQ(d.outcome.lease->expires_in_ms, 900);
  EXPECT_TRUE(d.outcome.lease->blocking_lease.empty());
  d = DecideLease(Acquire("b"), 40, Blocked(State(std::nullopt, false)), kNow);
  EXPECT_EQ(d.outcome.lease->blocking_lease, "jobs/other");
  EXPECT_EQ(d.outcome.lease->lease.holder, "c");
  EXPECT_EQ(d.outcome.lease->expires_in_ms, 700);
}

TEST(LeaseRulesTest, ReleaseLeavesTheFence) {
  const LeaseDecision d =
      DecideLease(Release("a", 5), 5, State(Record("a", 5), true), kNow);
  ASSERT_TRUE(d.next);
  EXPECT_TRUE(d.next->released);
  EXPECT_EQ(d.next->holder, "a");
  EXPECT_EQ(d.outcome.lease->expires_in_ms, 0);
  EXPECT_FALSE(RaisesFence(d.outcome));
}

TEST(LeaseRulesTest, TokensRunOutAtTheLargestToken) {
  LeaseDecision d =
      DecideLease(Acquire("b"), kMax, State(std::nullopt, false), kNow);
  EXPECT_EQ(d.outcome.verdict, Verdict::kFailed);
  EXPECT_EQ(d.outcome.error, std::error_code(Errc::kTokensExhausted));
  EXPECT_FALSE(d.next);
  d = DecideLease(Acquire("b"), 1, State(Record("a", kMax), false), kNow);
  EXPECT_EQ(d.outcome.error, std::error_code(Errc::kTokensExhausted));
  d = DecideLease(Acquire("b"), kMax - 1, State(std::nullopt, false), kNow);
  ASSERT_TRUE(d.next);
  EXPECT_EQ(d.next->token, kMax);
}

TEST(LeaseRulesTest, TheLeaseLimitRefusesOnlyNewLiveLeases) {
  const LeaseState free = State(std::nullopt, false);
  EXPECT_TRUE(OverLeaseLimit(Acquire("a"), free, 10, 10));
  EXPECT_FALSE(OverLeaseLimit(Acquire("a"), free, 9, 10));
  // A renewal (also past expiry), and a lease that is live (a 409 anyway).
  EXPECT_FALSE(
      OverLeaseLimit(Acquire("a"), State(Record("a", 5), false), 10, 10));
  EXPECT_FALSE(
      OverLeaseLimit(Acquire("b"), State(Record("a", 5), true), 10, 10));
  EXPECT_TRUE(
      OverLeaseLimit(Acquire("b"), State(Record("a", 5), false), 10, 10));
  EXPECT_FALSE(OverLeaseLimit(Release("a", 5), free, 10, 10));
  // A holder of record whose renewal becomes a grant is not counted.
  EXPECT_FALSE(
      CountsAgainstLeaseLimit(Acquire("a"), State(Record("a", 5), false)));
  EXPECT_TRUE(CountsAgainstLeaseLimit(Acquire("a"), free));
}

TEST(RoutingFenceTest, EachKindOfWriteGoesByItsFence) {
  EXPECT_EQ(RoutingFence(FencedWrite{"a", 1, false, std::nullopt}), "a");
  EXPECT_EQ(RoutingFence(Acquire("x")), "jobs/nightly");
  EXPECT_EQ(RoutingFence(Batch{{FencedWrite{"b", 1, false, std::nullopt},
                                FencedWrite{"c", 1, false, std::nullopt}}}),
            "b");
  EXPECT_EQ(RoutingFence(Batch{}), "");
}

// What a store's feed tells watchers of a lease record rewritten.
TEST(LeaseChangesTest, EachRewriteIsToldAsWhatHappenedToTheLease) {
  auto stored = [](Token token, std::int64_t renewed, bool released = false,
                   bool noticed = false) {
    StoredLease s;
    s.record.holder = "h";
    s.record.token = token;
    s.record.renewed_at_ns = renewed;
    s.record.released = released;
    s.noticed = noticed;
    return s;
  };
  using Changes = std::vector<std::string_view>;
  const StoredLease live = stored(1, 10);
  EXPECT_EQ(LeaseChanges(nullptr, live), Changes{"granted"});
  EXPECT_EQ(LeaseChanges(&live, stored(1, 20)), Changes{"renewed"});
  EXPECT_EQ(LeaseChanges(&live, stored(1, 10)), Changes{});
  EXPECT_EQ(LeaseChanges(&live, stored(1, 10, true)), Changes{"released"});
  const StoredLease released = stored(1, 10, true);
  EXPECT_EQ(LeaseChanges(&released, stored(2, 30)), Changes{"granted"});
  // Granted again without a release: the last holder's lease ended first.
  EXPECT_EQ(LeaseChanges(&live, stored(2, 30)),
            (Changes{"expired", "granted"}));
  // Marked as run out, then granted: told once.
  const StoredLease noticed = stored(1, 10, false, true);
  EXPECT_EQ(LeaseChanges(&live, noticed), Changes{"expired"});
  EXPECT_EQ(LeaseChanges(&noticed, stored(2, 30)), Changes{"granted"});
}

TEST(LeaseChangesTest, AStoredFenceIsRaisedOnlyByAHigherToken) {
  EXPECT_TRUE(RaisedBetween(std::nullopt, 0));
  EXPECT_TRUE(RaisedBetween(Token{4}, 5));
  EXPECT_FALSE(RaisedBetween(Token{5}, 5));
  EXPECT_FALSE(RaisedBetween(Token{6}, 5));
}

}  // namespace
}  // namespace fencepost::fence
