#include "fence/commit_stats.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "fence/committer.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

TEST(BucketsTest, AValueOnABoundCountsInThatBoundsBucket) {
  static constexpr double kBounds[] = {1, 2, 4};
  Buckets b(kBounds);
  for (double v : {0.5, 1.0, 2.0, 3.0, 4.0, 9.0}) b.Observe(v);
  const std::vector<std::uint64_t> counts(b.counts().begin(), b.counts().end());
  EXPECT_EQ(counts, (std::vector<std::uint64_t>{2, 1, 2, 1}));
  EXPECT_EQ(b.count(), 6u);
  EXPECT_DOUBLE_EQ(b.sum(), 19.5);
  Buckets twice = b;
  twice += b;
  EXPECT_EQ(twice.count(), 12u);
  EXPECT_DOUBLE_EQ(twice.sum(), 39.0);
}

class CommitStatsTest : public ::testing::Test {
 protected:
  // Submits every write at once and waits for all their answers.
  std::vector<WriteOutcome> CommitAll(std::vector<FenceWrite> writes) {
    std::vector<std::promise<WriteOutcome>> promises(writes.size());
    for (std::size_t i = 0; i < writes.size(); ++i) {
      committer_.Submit(std::move(writes[i]), [&promises, i](WriteOutcome o) {
        promises[i].set_value(std::move(o));
      });
    }
    std::vector<WriteOutcome> outcomes;
    for (auto& p : promises) outcomes.push_back(p.get_future().get());
    return outcomes;
  }

  testing::TempDir dir_;
  Env env_{{dir_.path(), 64u << 20}};
  Committer committer_{env_, {}};
};

TEST_F(CommitStatsTest, CountsEveryWriteInItsGroupAndTimesEachSync) {
  constexpr int kWrites = 300;
  std::vector<FenceWrite> writes;
  for (int i = 0; i < kWrites; ++i) {
    const std::string key = "k" + std::to_string(i % 10);
    writes.push_back(FencedWrite{key, Token(i), false,
                                 ValueOp{ValueOp::Kind::kPut, key, "v"}});
  }
  for (const WriteOutcome& o : CommitAll(std::move(writes))) {
    ASSERT_EQ(o.verdict, WriteOutcome::Verdict::kAccepted);
  }
  const CommitStats stats = committer_.stats();
  EXPECT_EQ(stats.group_writes.sum(), double{kWrites})
      << "every write is counted in its group";
  EXPECT_GE(stats.group_writes.count(), 1u);
  EXPECT_LE(stats.group_writes.count(), std::uint64_t{kWrites});
  EXPECT_EQ(stats.group_wait_seconds.count(), stats.group_writes.count())
      << "each group's wait is timed";
  EXPECT_EQ(stats.sync_seconds.count(), stats.group_writes.count())
      << "each of these groups logged records and was synced once";
  EXPECT_EQ(stats.sync_seconds.count(), committer_.commits());
  EXPECT_GT(stats.sync_seconds.sum(), 0.0) << "a sync takes time";
  EXPECT_GT(stats.group_wait_seconds.sum(), 0.0);
}

TEST_F(CommitStatsTest, AGroupThatLogsNothingCountsWithoutASync) {
  CommitAll({FencedWrite{"f", 5, false, std::nullopt}});
  const CommitStats before = committer_.stats();
  ASSERT_EQ(before.group_writes.count(), 1u);
  ASSERT_EQ(before.sync_seconds.count(), 1u);
  const auto stale = CommitAll({FencedWrite{"f", 4, false, std::nullopt}});
  ASSERT_EQ(stale[0].verdict, WriteOutcome::Verdict::kRejected);
  const CommitStats after = committer_.stats();
  EXPECT_EQ(after.group_writes.count(), 2u);
  EXPECT_EQ(after.group_writes.sum(), 2.0);
  EXPECT_EQ(after.group_wait_seconds.count(), 2u);
  EXPECT_EQ(after.sync_seconds.count(), 1u) << "a refusal logs nothing";
}

}  // namespace
}  // namespace fencepost::fence
