#include "fence/applier.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "fence/env.h"
#include "fence/values.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

WalRecord Put(std::uint64_t seq, std::uint64_t key) {
  char name[16];
  std::snprintf(name, sizeof name, "k%06llu",
                static_cast<unsigned long long>(key));
  WalRecord r;
  r.seq = seq;
  r.fence = r.key = name;
  r.fence_token = seq;
  r.op = WalRecord::Op::kPut;
  // Two values to a leaf page at most.
  r.body = std::string(1900, static_cast<char>('a' + seq % 26));
  return r;
}

// The last committed transaction: the one a reader sees.
std::uint64_t LastTxn(Env& env) {
  Env::ReadTxn txn(env);
  return mdb_txn_id(txn.get());
}

// In a tree larger than the leaves one transaction should touch, a
// checkpoint of records on keys spread over it is applied as several
// transactions, each a checkpoint that retires its own records: LMDB's
// cost per dirty page rises with their number, and a committer waiting for
// room waits for one of them, not for everything gathered.
TEST(ApplierTest, ACheckpointOverALargeTreeIsAppliedInParts) {
  testing::TempDir dir;
  Env env({.dir = dir.path(), .initial_map_size = 64u << 20});
  Applier applier(
      env, /*checkpoint_bytes=*/1u << 20, /*skip_sync=*/false,
      [](const std::string& what, int rc) {
        ADD_FAILURE() << what << ": " << rc;
        std::abort();
      },
      /*dirty_pages=*/64);
  // A tree of about a thousand leaves, in one transaction: an empty tree
  // has no leaves to spread over.
  constexpr std::uint64_t kKeys = 2000;
  std::vector<WalRecord> seeded;
  for (std::uint64_t k = 1; k <= kKeys; ++k) seeded.push_back(Put(k, k));
  const std::uint64_t before = LastTxn(env);
  ASSERT_EQ(applier.Apply(seeded), 0);
  EXPECT_EQ(LastTxn(env), before + 1) << "an empty tree was split up";

  // A thousand updates on keys spread over it: about 66 to a transaction.
  std::mt19937_64 random(7);
  std::vector<WalRecord> logged;
  std::uint64_t seq = kKeys;
  std::vector<std::uint64_t> keys;
  for (int i = 0; i < 1000; ++i) {
    keys.push_back(1 + random() % kKeys);
    logged.push_back(Put(++seq, keys.back()));
  }
  applier.Start(std::move(logged));
  std::uint64_t first = 0;
  applier.WaitUntil([&first](const Applier::Backlog& b) {
    first = b.applied_seq;
    return b.applied_seq > kKeys;
  });
  EXPECT_LT(first, seq) << "the checkpoint was retired whole";
  ASSERT_TRUE(applier.Finish());
  EXPECT_EQ(applier.applied_seq(), seq);
  EXPECT_GE(LastTxn(env), before + 1 + 10) << "too few transactions";
  EXPECT_LE(LastTxn(env), before + 1 + 40) << "too many transactions";
  // Each key holds its last write.
  Env::ReadTxn txn(env);
  for (std::uint64_t i = 0; i < keys.size(); ++i) {
    const WalRecord want = Put(kKeys + 1 + i, keys[i]);
    StoredValue value;
    ASSERT_EQ(ReadValue(txn.get(), env.values(), want.key, &value), 0);
    ASSERT_TRUE(value.found) << want.key;
    if (value.seq == want.seq) {
      EXPECT_EQ(value.body, want.body);
    }
    EXPECT_GE(value.seq, want.seq) << want.key << " went back";
  }
}

}  // namespace
}  // namespace fencepost::fence
