#include "fence/committer.h"

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <random>
#include <thread>

#include "fence/errc.h"
#include "fence/fence_store.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

using Verdict = WriteOutcome::Verdict;

class CommitterTest : public ::testing::Test {
 protected:
  WriteOutcome Commit(FenceWrite write) {
    std::promise<WriteOutcome> promise;
    auto future = promise.get_future();
    committer_.Submit(std::move(write),
                      [&promise](WriteOutcome o) { promise.set_value(o); });
    return future.get();
  }
  WriteOutcome Commit(const std::string& fence, Token token) {
    return Commit(FenceWrite{fence, token, false, {}, 0});
  }
  std::optional<FenceRecord> Get(const std::string& name) {
    std::optional<FenceRecord> fence;
    EXPECT_FALSE(FenceStore(env_).Get(name, &fence));
    return fence;
  }

  testing::TempDir dir_;
  Env env_{{dir_.path(), 64u << 20}};
  Committer committer_{env_, {}};
};

TEST_F(CommitterTest, AppliesTheAcceptRule) {
  WriteOutcome a = Commit("orders/1", 33);
  EXPECT_EQ(a.verdict, Verdict::kAccepted);
  EXPECT_TRUE(a.decision.creates);
  EXPECT_EQ(a.current, Token{33});

  WriteOutcome b = Commit("orders/1", 34);
  EXPECT_EQ(b.verdict, Verdict::kAccepted);
  EXPECT_TRUE(b.decision.advances);
  EXPECT_EQ(b.previous, Token{33});

  WriteOutcome stale = Commit("orders/1", 33);
  EXPECT_EQ(stale.verdict, Verdict::kRejected);
  EXPECT_EQ(stale.current, Token{34});
  EXPECT_EQ(Get("orders/1")->token, 34u);
}

TEST_F(CommitterTest, RejectedWriteDoesNotRunApply) {
  Commit("k", 10);
  bool ran = false;
  WriteOutcome o = Commit(FenceWrite{"k", 9, false,
                                     [&](MDB_txn*) {
                                       ran = true;
                                       return 0;
                                     },
                                     0});
  EXPECT_EQ(o.verdict, Verdict::kRejected);
  EXPECT_FALSE(ran);
}

TEST_F(CommitterTest, ObserveAppliesStaleWriteButNeverLowersTheFence) {
  Commit("k", 10);
  bool ran = false;
  WriteOutcome o = Commit(FenceWrite{"k", 3, true,
                                     [&](MDB_txn*) {
                                       ran = true;
                                       return 0;
                                     },
                                     0});
  EXPECT_EQ(o.verdict, Verdict::kObserved);
  EXPECT_TRUE(ran);
  EXPECT_EQ(o.current, Token{10});
  EXPECT_EQ(Get("k")->token, 10u);
  WriteOutcome missing = Commit(FenceWrite{"new", std::nullopt, true, {}, 0});
  EXPECT_EQ(missing.verdict, Verdict::kObserved);
  EXPECT_FALSE(Get("new")) << "a write without a token creates no fence";
}

TEST_F(CommitterTest, FailedApplyFailsOnlyItsOwnWrite) {
  // Many writes in flight so they share groups; every third one's apply fails.
  constexpr int kWrites = 300;
  std::vector<std::future<WriteOutcome>> futures;
  std::vector<std::promise<WriteOutcome>> promises(kWrites);
  for (int i = 0; i < kWrites; ++i) {
    futures.push_back(promises[i].get_future());
    FenceWrite w{"f" + std::to_string(i), Token(i), false,
                 [i](MDB_txn*) { return i % 3 == 0 ? MDB_BAD_VALSIZE : 0; }, 0};
    committer_.Submit(std::move(w), [&promises, i](WriteOutcome o) {
      promises[i].set_value(o);
    });
  }
  for (int i = 0; i < kWrites; ++i) {
    WriteOutcome o = futures[i].get();
    if (i % 3 == 0) {
      EXPECT_EQ(o.verdict, Verdict::kFailed) << i;
      EXPECT_FALSE(Get("f" + std::to_string(i))) << "failed write left a fence";
    } else {
      EXPECT_EQ(o.verdict, Verdict::kAccepted) << i;
      EXPECT_EQ(Get("f" + std::to_string(i))->token, Token(i));
    }
  }
}

// Hammers group commit with interleaved stale and fresh writes to one fence
// from several threads: every acceptance must be justified by the order in
// which the committer applied them, and the fence ends at the highest token.
TEST_F(CommitterTest, GroupCommitKeepsTheAcceptRuleUnderContention) {
  constexpr int kThreads = 8, kPerThread = 200;
  std::mutex mu;
  std::vector<std::pair<Token, WriteOutcome>> applied;  // committer order
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < kPerThread; ++i) {
        const Token token = rng() % 1000;
        std::promise<void> done;
        committer_.Submit(FenceWrite{"hot", token, false, {}, 0},
                          [&, token](WriteOutcome o) {
                            {
                              std::lock_guard lock(mu);
                              applied.emplace_back(token, o);
                            }
                            done.set_value();
                          });
        done.get_future().wait();
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(applied.size(), size_t{kThreads * kPerThread});
  std::optional<Token> highest;
  for (const auto& [token, o] : applied) {
    EXPECT_EQ(o.previous, highest);
    const bool should_accept = !highest || token >= *highest;
    EXPECT_EQ(o.verdict == Verdict::kAccepted, should_accept);
    if (should_accept) highest = token;
  }
  EXPECT_EQ(Get("hot")->token, *highest);
  EXPECT_LT(committer_.commits(), applied.size())
      << "concurrent writes should share commits";
}

TEST(CommitterMapTest, GrowsTheMapThenAnswersMapFullAtTheCap) {
  testing::TempDir dir;
  Env env({dir.path(), 1u << 20});
  Committer committer(env, {});
  auto commit = [&](int i) {
    std::promise<WriteOutcome> p;
    auto f = p.get_future();
    const std::string value(4000, 'v');
    committer.Submit(
        FenceWrite{
            "k" + std::to_string(i), 1, false,
            [&env, value, i](MDB_txn* txn) {
              std::string k = "v" + std::to_string(i);
              MDB_val key{k.size(), k.data()};
              MDB_val data{value.size(), const_cast<char*>(value.data())};
              return mdb_put(txn, env.values(), &key, &data, 0);
            },
            value.size()},
        [&p](WriteOutcome o) { p.set_value(o); });
    return f.get();
  };
  int i = 0;
  WriteOutcome o;
  while ((o = commit(i)).verdict == Verdict::kAccepted && i < 10000) ++i;
  EXPECT_EQ(o.verdict, Verdict::kFailed);
  EXPECT_EQ(o.error, Errc::kMapFull);
  EXPECT_GT(i, 10) << "some writes fit before the map filled";
  std::optional<FenceRecord> fence;
  EXPECT_FALSE(FenceStore(env).Get("k" + std::to_string(i), &fence));
  EXPECT_FALSE(fence) << "the failed write left no fence";
  EXPECT_FALSE(FenceStore(env).Get("k0", &fence));
  EXPECT_TRUE(fence) << "reads still work when the map is full";
}

TEST(EnvTest, OpensWithDurableFlagsOnly) {
  testing::TempDir dir;
  Env env({dir.path(), 64u << 20});
  const unsigned flags = env.flags();
  EXPECT_EQ(flags & MDB_NOSYNC, 0u);
  EXPECT_EQ(flags & MDB_NOMETASYNC, 0u);
  EXPECT_EQ(flags & MDB_WRITEMAP, 0u);
  EXPECT_EQ(flags & MDB_MAPASYNC, 0u);
}

TEST(EnvTest, GrowsOnlyUpToTheCap) {
  testing::TempDir dir;
  Env env({dir.path(), 3u << 20});
  EXPECT_EQ(env.map_size(), 3u << 20);
  EXPECT_FALSE(env.Grow());
}

TEST(EnvTest, UnusableDirectoryThrows) {
  testing::TempDir dir;
  const std::string file = dir / "file";
  FILE* f = fopen(file.c_str(), "w");
  fclose(f);
  EXPECT_THROW(Env({file, 1u << 20}), std::runtime_error);
}

}  // namespace
}  // namespace fencepost::fence
