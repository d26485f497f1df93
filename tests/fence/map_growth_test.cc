// The map grows past its starting size under the committer's writes and
// keeps every fence and value, through the remaps and across a reopen.

#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <string>

#include "fence/committer.h"
#include "fence/env.h"
#include "fence/fence_store.h"
#include "fence/values.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

using Verdict = WriteOutcome::Verdict;

constexpr std::uint64_t kStart = 256u << 10;
constexpr std::uint64_t kCap = 64u << 20;
constexpr int kWrites = 400;  // 400 × 4000 bytes: over six starting maps

std::string Key(int i) { return "grow/" + std::to_string(i); }
std::string Body(int i) { return std::string(4000, 'a' + i % 26); }

WriteOutcome Put(Committer& committer, int i) {
  std::promise<WriteOutcome> promise;
  auto future = promise.get_future();
  committer.Submit(FencedWrite{Key(i), static_cast<Token>(i + 1), false,
                               ValueOp{ValueOp::Kind::kPut, Key(i), Body(i)}},
                   [&promise](WriteOutcome o) { promise.set_value(o); });
  return future.get();
}

// Every fence at its token and every value whole, read from LMDB.
void ExpectEverythingStored(const Env& env) {
  for (int i = 0; i < kWrites; ++i) {
    std::optional<FenceRecord> fence;
    EXPECT_FALSE(FenceStore(env).Get(Key(i), &fence));
    ASSERT_TRUE(fence) << Key(i);
    EXPECT_EQ(fence->token, static_cast<Token>(i + 1));
    Env::ReadTxn txn(env);
    StoredValue stored;
    ASSERT_EQ(ReadValue(txn.get(), env.values(), Key(i), &stored), 0);
    ASSERT_TRUE(stored.found) << Key(i);
    EXPECT_EQ(std::string(stored.body), Body(i)) << Key(i);
  }
}

TEST(MapGrowthTest, TheMapGrowsPastItsStartingSizeAndKeepsEverything) {
  testing::TempDir dir;
  {
    Env env({dir.path(), kCap, kStart});
    ASSERT_EQ(env.map_size(), kStart) << "the map must start small";
    Committer committer(env, {});
    for (int i = 0; i < kWrites; ++i) {
      const WriteOutcome o = Put(committer, i);
      ASSERT_EQ(o.verdict, Verdict::kAccepted)
          << "write " << i << " at map size " << env.map_size();
    }
    committer.Stop();
    EXPECT_GT(env.map_size(), kStart) << "the map never grew";
    EXPECT_LE(env.map_size(), kCap);
    EXPECT_GT(env.used_bytes(), kStart) << "the data fits the starting map";
    ExpectEverythingStored(env);
  }
  Env reopened({dir.path(), kCap, kStart});
  EXPECT_GT(reopened.map_size(), kStart) << "the grown size is kept";
  ExpectEverythingStored(reopened);
}

}  // namespace
}  // namespace fencepost::fence
