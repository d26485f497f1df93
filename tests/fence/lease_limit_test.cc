// --max-leases as the committers decide it (fence::LeaseLimit): in the step
// that commits a grant, across every shard of a data directory, over real
// LMDB and the real write-ahead log, on a fake monotonic clock.

#include "fence/lease_limit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fence/shards.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

using Verdict = LeaseOutcome::Verdict;
constexpr std::int64_t kMs = 1000000;

class LeaseLimitTest : public ::testing::Test {
 protected:
  // Four shards, each committer on a thread of its own (no loop), so that
  // grants to different shards are decided at the same time.
  void Open(std::size_t max_leases) {
    Shards::Options options;
    options.dir = dir_.path();
    options.max_map_size = 256u << 20;
    options.count = 4;
    options.max_leases = max_leases;
    options.committer.steady_now = [this] { return now_.load(); };
    shards_ = std::make_unique<Shards>(options);
  }

  WriteOutcome Submit(LeaseOp op) {
    std::promise<WriteOutcome> promise;
    auto future = promise.get_future();
    op.fence = op.name;
    shards_->CommitterOf(op.fence).Submit(
        std::move(op), [&promise](WriteOutcome o) { promise.set_value(o); });
    return future.get();
  }
  LeaseOutcome Acquire(const std::string& name, const std::string& holder,
                       std::uint64_t ttl_ms = 60000) {
    WriteOutcome o =
        Submit({LeaseOp::Kind::kAcquire, name, holder, ttl_ms, 0, ""});
    EXPECT_TRUE(o.lease.has_value()) << o.error.message();
    return o.lease.value_or(LeaseOutcome{});
  }
  LeaseOutcome Release(const std::string& name, const std::string& holder,
                       Token token) {
    WriteOutcome o =
        Submit({LeaseOp::Kind::kRelease, name, holder, 0, token, ""});
    EXPECT_TRUE(o.lease.has_value()) << o.error.message();
    return o.lease.value_or(LeaseOutcome{});
  }

  testing::TempDir dir_;
  std::atomic<std::int64_t> now_ = 1000 * kMs;
  std::unique_ptr<Shards> shards_;
};

// With room for one lease, 16 grants of distinct leases submitted at once
// to the committers of four shards give exactly one lease, in each of 10
// rounds; the others are too many leases and change nothing.
TEST_F(LeaseLimitTest, ConcurrentGrantsAcrossShardsNeverPassTheLimit) {
  Open(1);
  constexpr int kGrants = 16;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<std::string> names;
    std::set<std::size_t> shards;
    for (int i = 0; i < kGrants; ++i) {
      names.push_back("r" + std::to_string(round) + "-" + std::to_string(i));
      shards.insert(shards_->IndexOf(names.back()));
    }
    ASSERT_GE(shards.size(), 3u) << "the grants must reach several shards";
    std::atomic<int> ready = 0;
    std::atomic<bool> go = false;
    std::vector<LeaseOutcome> outcomes(kGrants);
    std::vector<std::thread> clients;
    for (int i = 0; i < kGrants; ++i) {
      clients.emplace_back([&, i] {
        ++ready;
        while (!go) std::this_thread::yield();
        outcomes[i] = Acquire(names[i], "h");
      });
    }
    while (ready < kGrants) std::this_thread::yield();
    go = true;
    for (auto& t : clients) t.join();
    int granted = -1, count = 0;
    for (int i = 0; i < kGrants; ++i) {
      if (outcomes[i].verdict == Verdict::kGranted) {
        granted = i;
        ++count;
      } else {
        EXPECT_EQ(outcomes[i].verdict, Verdict::kTooManyLeases) << names[i];
      }
    }
    ASSERT_EQ(count, 1);
    std::size_t live = 0;
    for (std::size_t s = 0; s < shards_->size(); ++s) {
      live += shards_->env(s).lease_table().Live(now_);
    }
    EXPECT_EQ(live, 1u);
    ASSERT_EQ(
        Release(names[granted], "h", outcomes[granted].lease.token).verdict,
        Verdict::kReleased);
  }
}

// Only grants count: at the limit a renewal is granted, an acquire of a
// live lease is denied as ever, and a released or run-out lease frees its
// room at once. A refused grant leaves no record and takes no room.
TEST_F(LeaseLimitTest, OnlyGrantsCountAndEndedLeasesFreeTheirRoom) {
  Open(2);
  const LeaseOutcome a = Acquire("a", "h", 1000);
  ASSERT_EQ(a.verdict, Verdict::kGranted);
  const LeaseOutcome b = Acquire("b", "h");
  ASSERT_EQ(b.verdict, Verdict::kGranted);
  const LeaseOutcome over = Acquire("c", "h");
  EXPECT_EQ(over.verdict, Verdict::kTooManyLeases);
  EXPECT_FALSE(over.existed);
  EXPECT_FALSE(shards_->LeasesOf("c").Find("c")) << "the refusal left nothing";
  EXPECT_EQ(Acquire("b", "h").verdict, Verdict::kRenewed);
  EXPECT_EQ(Acquire("b", "other").verdict, Verdict::kDenied);

  EXPECT_EQ(Release("b", "h", b.lease.token).verdict, Verdict::kReleased);
  const LeaseOutcome c = Acquire("c", "h");
  EXPECT_EQ(c.verdict, Verdict::kGranted) << "a released lease is free room";
  EXPECT_EQ(Acquire("d", "h").verdict, Verdict::kTooManyLeases);
  now_ += 1001 * kMs;  // `a` runs out
  EXPECT_EQ(Acquire("d", "h").verdict, Verdict::kGranted)
      << "a lease that ran out is free room";
  EXPECT_EQ(Acquire("a", "h").verdict, Verdict::kRenewed)
      << "the holder of record renews past expiry, even at the limit";
}

}  // namespace
}  // namespace fencepost::fence
