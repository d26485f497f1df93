// The lease rules, decided by the committer against a fake monotonic clock
// (no sleeps), over real LMDB and the real write-ahead log.

#include "fence/lease.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fence/committer.h"
#include "fence/errc.h"
#include "fence/fence_store.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

using Verdict = LeaseOutcome::Verdict;
constexpr std::int64_t kMs = 1000000;

class LeaseTest : public ::testing::Test {
 protected:
  LeaseTest() { Open(); }

  void Open() {
    env_ = std::make_unique<Env>(Env::Options{dir_.path(), 64u << 20});
    Committer::Options options;
    options.steady_now = [this] { return now_.load(); };
    options.on_lease_expired = on_expired_;
    committer_ = std::make_unique<Committer>(*env_, options);
  }
  // A clean stop and a new process (the clock goes on).
  void Restart() {
    committer_.reset();
    env_.reset();
    Open();
  }

  WriteOutcome Submit(FenceWrite write) {
    std::promise<WriteOutcome> promise;
    auto future = promise.get_future();
    committer_->Submit(std::move(write),
                       [&promise](WriteOutcome o) { promise.set_value(o); });
    return future.get();
  }
  WriteOutcome Lease(LeaseOp op, const std::string& fence = "") {
    op.fence = fence.empty() ? op.name : fence;
    return Submit(std::move(op));
  }
  LeaseOutcome Acquire(const std::string& name, const std::string& holder,
                       std::uint64_t ttl_ms = 1000,
                       const std::string& fence = "") {
    auto o =
        Lease({LeaseOp::Kind::kAcquire, name, holder, ttl_ms, 0, ""}, fence);
    EXPECT_TRUE(o.lease.has_value());
    return o.lease.value_or(LeaseOutcome{});
  }
  LeaseOutcome Release(const std::string& name, const std::string& holder,
                       Token token) {
    auto o = Lease({LeaseOp::Kind::kRelease, name, holder, 0, token, ""});
    EXPECT_TRUE(o.lease.has_value());
    return o.lease.value_or(LeaseOutcome{});
  }
  WriteOutcome Write(const std::string& fence, Token token) {
    return Submit(FencedWrite{fence, token, false, std::nullopt});
  }
  std::optional<Token> FenceOf(const std::string& name) {
    std::optional<FenceRecord> fence;
    EXPECT_FALSE(FenceStore(*env_).Get(name, &fence));
    if (!fence) return std::nullopt;
    return fence->token;
  }

  testing::TempDir dir_;
  std::atomic<std::int64_t> now_ = 1000 * kMs;
  std::function<void(const std::string&, const LeaseRecord&)> on_expired_;
  std::unique_ptr<Env> env_;
  std::unique_ptr<Committer> committer_;
};

TEST(LeaseRecordTest, EncodesAndDecodes) {
  LeaseRecord in{"worker-7", true, "jobs/", 18446744073709551615ull,
                 3600000,    -5,   42,      9};
  LeaseRecord out;
  ASSERT_TRUE(DecodeLease(EncodeLease(in), &out));
  EXPECT_EQ(out.holder, in.holder);
  EXPECT_TRUE(out.released);
  EXPECT_EQ(out.fence, "jobs/");
  EXPECT_EQ(out.token, in.token);
  EXPECT_EQ(out.ttl_ms, in.ttl_ms);
  EXPECT_EQ(out.acquired_at_ns, in.acquired_at_ns);
  EXPECT_EQ(out.renewed_at_ns, in.renewed_at_ns);
  EXPECT_EQ(out.transitions, in.transitions);
  EXPECT_FALSE(DecodeLease("short", &out));
}

TEST_F(LeaseTest, TheFirstGrantGetsTokenOneAndSetsTheFence) {
  LeaseOutcome a = Acquire("jobs/x", "a");
  EXPECT_EQ(a.verdict, Verdict::kGranted);
  EXPECT_EQ(a.lease.token, 1u);
  EXPECT_EQ(a.lease.transitions, 0u);
  EXPECT_EQ(a.lease.fence, "jobs/x");
  EXPECT_EQ(a.expires_in_ms, 1000);
  EXPECT_EQ(FenceOf("jobs/x"), 1u);
}

TEST_F(LeaseTest, RenewalKeepsTheTokenAndResetsTheExpiry) {
  Acquire("l", "a", 1000);
  now_ += 900 * kMs;
  LeaseOutcome r = Acquire("l", "a", 2000);
  EXPECT_EQ(r.verdict, Verdict::kRenewed);
  EXPECT_EQ(r.lease.token, 1u);
  EXPECT_EQ(r.lease.ttl_ms, 2000u);
  EXPECT_EQ(r.expires_in_ms, 2000);
  now_ += 1900 * kMs;  // past the first expiry, within the renewed one
  EXPECT_EQ(Acquire("l", "b").verdict, Verdict::kDenied);
  EXPECT_EQ(FenceOf("l"), 1u);
}

TEST_F(LeaseTest, NoTwoLiveHolders) {
  Acquire("l", "a", 1000);
  now_ += 999 * kMs;
  LeaseOutcome b = Acquire("l", "b");
  EXPECT_EQ(b.verdict, Verdict::kDenied);
  EXPECT_EQ(b.lease.holder, "a");
  EXPECT_EQ(b.expires_in_ms, 1);
  EXPECT_EQ(env_->lease_table().Find("l")->record.holder, "a");
}

TEST_F(LeaseTest, AGrantAfterExpiryGetsTheNextTokenAndCountsTheExpiry) {
  Acquire("l", "a", 1000);
  now_ += 1000 * kMs;
  LeaseOutcome b = Acquire("l", "b");
  EXPECT_EQ(b.verdict, Verdict::kGranted);
  EXPECT_EQ(b.lease.token, 2u);
  EXPECT_EQ(b.lease.transitions, 1u);
  EXPECT_EQ(b.reason, LeaseOutcome::GrantReason::kExpired);
  EXPECT_EQ(b.previous_holder, "a");
  EXPECT_TRUE(b.previous_expired);
  EXPECT_TRUE(b.expired.has_value());
  EXPECT_EQ(FenceOf("l"), 2u);
  // The old holder's writes are fenced at once.
  EXPECT_EQ(Write("l", 1).verdict, WriteOutcome::Verdict::kRejected);
}

TEST_F(LeaseTest, TheHolderOfRecordKeepsItsTokenPastExpiryWhileNobodyTookIt) {
  Acquire("l", "a", 1000);
  now_ += 5000 * kMs;
  LeaseOutcome r = Acquire("l", "a");
  EXPECT_EQ(r.verdict, Verdict::kRenewed);
  EXPECT_EQ(r.lease.token, 1u);
  EXPECT_TRUE(r.expired.has_value());
}

TEST_F(LeaseTest, AGrantIsOneAboveTheLargerOfLeaseAndFence) {
  ASSERT_EQ(Write("l", 40).verdict, WriteOutcome::Verdict::kAccepted);
  LeaseOutcome a = Acquire("l", "a");
  EXPECT_EQ(a.lease.token, 41u);
  EXPECT_EQ(FenceOf("l"), 41u);
}

TEST_F(LeaseTest, AGrantRaisesTheScopedFence) {
  // The proxy passes the fence that guards the name: here a scope.
  ASSERT_EQ(Write("jobs/", 7).verdict, WriteOutcome::Verdict::kAccepted);
  LeaseOutcome a = Acquire("jobs/leader", "a", 1000, "jobs/");
  EXPECT_EQ(a.lease.token, 8u);
  EXPECT_EQ(FenceOf("jobs/"), 8u);
  EXPECT_EQ(FenceOf("jobs/leader"), std::nullopt);
}

TEST_F(LeaseTest, AFenceAboveTheLeaseMakesTheHoldersNextAcquireAGrant) {
  Acquire("l", "a");
  ASSERT_EQ(Write("l", 10).verdict, WriteOutcome::Verdict::kAccepted);
  LeaseOutcome r = Acquire("l", "a");
  EXPECT_EQ(r.verdict, Verdict::kGranted);
  EXPECT_EQ(r.lease.token, 11u);
  EXPECT_EQ(r.reason, LeaseOutcome::GrantReason::kFenceAbove);
  EXPECT_EQ(r.lease.transitions, 0u);  // the same holder
  EXPECT_FALSE(r.previous_expired);
}

TEST_F(LeaseTest, OneLiveLeasePerFence) {
  // Two leases under one scope would take the fence from each other.
  EXPECT_EQ(Acquire("s/leader", "a", 1000, "s/").verdict, Verdict::kGranted);
  LeaseOutcome c = Acquire("s/compactor", "c", 1000, "s/");
  EXPECT_EQ(c.verdict, Verdict::kDenied);
  EXPECT_EQ(c.blocking_lease, "s/leader");
  EXPECT_EQ(c.lease.holder, "a");
  EXPECT_EQ(Acquire("s/leader", "a", 1000, "s/").verdict, Verdict::kRenewed);
  now_ += 1000 * kMs;
  LeaseOutcome later = Acquire("s/compactor", "c", 1000, "s/");
  EXPECT_EQ(later.verdict, Verdict::kGranted);
  EXPECT_EQ(later.lease.token, 2u);
}

TEST_F(LeaseTest, ReleaseNeedsTheLiveHolderAndItsToken) {
  Acquire("l", "a");
  EXPECT_EQ(Release("l", "b", 1).verdict, Verdict::kNotHeld);
  EXPECT_EQ(Release("l", "a", 2).verdict, Verdict::kNotHeld);
  EXPECT_EQ(env_->lease_table().Find("l")->record.holder, "a");
  EXPECT_EQ(Release("l", "a", 1).verdict, Verdict::kReleased);
  EXPECT_EQ(Release("l", "a", 1).verdict, Verdict::kNotHeld);
  EXPECT_EQ(FenceOf("l"), 1u);  // the fence stays
  EXPECT_TRUE(env_->lease_table().Find("l")->record.released);
  LeaseOutcome b = Acquire("l", "b");
  EXPECT_EQ(b.verdict, Verdict::kGranted);
  EXPECT_EQ(b.lease.token, 2u);
  EXPECT_EQ(b.reason, LeaseOutcome::GrantReason::kReleased);
  EXPECT_FALSE(b.previous_expired);
  Release("l", "b", 2);
  // A grant back to the same last holder is no transition.
  EXPECT_EQ(Acquire("l", "b").lease.transitions, 1u);
}

TEST_F(LeaseTest, ReleaseOfALeaseThatRanOutIsNotHeld) {
  Acquire("l", "a", 1000);
  now_ += 1000 * kMs;
  EXPECT_EQ(Release("l", "a", 1).verdict, Verdict::kNotHeld);
}

TEST_F(LeaseTest, ARestartKeepsHoldersAndTokensAndRenewsAtStart) {
  Acquire("l", "a", 1000);
  Acquire("free", "c");
  Release("free", "c", 1);
  now_ += 900 * kMs;
  Restart();
  now_ += 900 * kMs;  // 1800 ms after the grant, 900 after the start
  EXPECT_EQ(Acquire("l", "b").verdict, Verdict::kDenied);
  auto entry = env_->lease_table().Find("l");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->record.holder, "a");
  EXPECT_EQ(entry->record.token, 1u);
  now_ += 100 * kMs;
  EXPECT_EQ(Acquire("l", "b").lease.token, 2u);
  EXPECT_EQ(Acquire("free", "d").lease.token, 2u);
}

TEST_F(LeaseTest, ALeaseThatRanOutBeforeARestartIsNotRenewedAtStart) {
  Acquire("l", "a", 100);
  // The wall clock tells the new process it ran out (the monotonic clock
  // cannot: it does not survive the process).
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  Restart();
  EXPECT_FALSE(IsLive(*env_->lease_table().Find("l"), now_));
  EXPECT_EQ(Acquire("l", "b").lease.token, 2u);
}

// The committer notices a lease that ran out with nobody asking (it looks
// about once a second), reports it once, and then no decision reports it
// again.
TEST_F(LeaseTest, TheCommitterNoticesAnExpiryOnItsOwnAndReportsItOnce) {
  std::mutex mu;
  std::vector<std::pair<std::string, Token>> lost;
  on_expired_ = [&](const std::string& name, const LeaseRecord& lease) {
    std::lock_guard lock(mu);
    lost.emplace_back(name, lease.token);
  };
  Restart();
  const Token token = Acquire("quiet", "a", 100).lease.token;
  Acquire("busy", "b", 60000);
  now_ += 2000 * kMs;  // past "quiet"'s ttl and the next look
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mu);
      if (!lost.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(lost.size(), 1u);
    EXPECT_EQ(lost[0].first, "quiet");
    EXPECT_EQ(lost[0].second, token);
  }
  // A grant to another holder finds it already noticed.
  const LeaseOutcome next = Acquire("quiet", "c", 1000);
  EXPECT_EQ(next.verdict, Verdict::kGranted);
  EXPECT_FALSE(next.expired.has_value());
  committer_.reset();  // no sweep after `lost` goes
  std::lock_guard lock(mu);
  EXPECT_EQ(lost.size(), 1u);
}

// An expiry a refused grant noticed is reported with the failure, also when
// the grant failed because the fence's tokens ran out.
TEST_F(LeaseTest, AnExpiryIsReportedWhenTokensRunOut) {
  Acquire("t", "a", 100);
  now_ += 1000 * kMs;
  ASSERT_EQ(Write("t", std::numeric_limits<Token>::max()).verdict,
            WriteOutcome::Verdict::kAccepted);
  const WriteOutcome o =
      Lease({LeaseOp::Kind::kAcquire, "t", "b", 1000, 0, ""});
  EXPECT_EQ(o.error, std::error_code(Errc::kTokensExhausted));
  ASSERT_TRUE(o.lease.has_value());
  ASSERT_TRUE(o.lease->expired.has_value());
  EXPECT_EQ(o.lease->expired->holder, "a");
}

TEST_F(LeaseTest, TheTableCountsEachExpiryOnceAndLiveLeases) {
  Acquire("a", "x", 1000);
  Acquire("b", "y", 3000);
  EXPECT_EQ(env_->lease_table().Live(now_), 2u);
  now_ += 1500 * kMs;
  EXPECT_EQ(env_->lease_table().Live(now_), 1u);
  EXPECT_EQ(env_->lease_table().NoticeExpired(now_).size(), 1u);
  EXPECT_EQ(env_->lease_table().NoticeExpired(now_).size(), 0u);
  auto list = env_->lease_table().List("", "a", 10);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].first, "b");
}

// Held() counts only leases neither released nor run out (once noticed),
// through grants, renewals, releases, expiries and a restart: what
// --max-leases counts.
TEST_F(LeaseTest, HeldCountsOnlyLiveLeasesWhateverTheRecordsKept) {
  LeaseTable& table = env_->lease_table();
  const Token a = Acquire("a", "x", 1000).lease.token;
  Acquire("b", "y", 3000);
  Acquire("c", "z", 5000);
  EXPECT_EQ(table.Held(), 3u);
  EXPECT_EQ(Release("a", "x", a).verdict, Verdict::kReleased);
  EXPECT_EQ(table.Held(), 2u) << "a released lease is not held";
  now_ += 3500 * kMs;
  EXPECT_EQ(table.Live(now_), 1u);
  EXPECT_EQ(table.Held(), 2u) << "b ran out, not noticed yet";
  auto noticed = table.NoticeExpired(now_);
  ASSERT_EQ(noticed.size(), 1u);
  EXPECT_EQ(noticed[0].first, "b");
  EXPECT_EQ(table.Held(), 1u);
  EXPECT_EQ(Acquire("b", "y", 3000).verdict, Verdict::kRenewed)
      << "the holder of record renews past expiry";
  EXPECT_EQ(table.Held(), 2u);
  EXPECT_EQ(Acquire("c", "z", 9000).verdict, Verdict::kRenewed);
  now_ += 4000 * kMs;  // b runs out again; c's renewal moved its deadline
  EXPECT_EQ(table.NoticeExpired("c", now_), std::nullopt);
  ASSERT_TRUE(table.NoticeExpired("b", now_).has_value());
  EXPECT_EQ(table.Held(), 1u);
  EXPECT_EQ(table.NoticeExpired(now_).size(), 0u) << "each expiry once";
  EXPECT_EQ(table.List("", "", 10).size(), 3u) << "every record is kept";
  Restart();
  // By the wall clock (the fake one moved only the monotonic clock) neither
  // b nor c ran out before the restart: both are renewed at start; a is
  // still released.
  EXPECT_EQ(env_->lease_table().Held(), 2u);
  EXPECT_EQ(env_->lease_table().Live(now_), 2u);
}

}  // namespace
}  // namespace fencepost::fence
