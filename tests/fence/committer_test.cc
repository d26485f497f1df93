#include "fence/committer.h"

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <latch>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "fence/big_endian.h"
#include "fence/errc.h"
#include "fence/fence_store.h"
#include "fence/values.h"
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
    return Commit(FencedWrite{fence, token, false, std::nullopt});
  }
  std::optional<std::string> Value(const std::string& key) {
    auto lock = env_.overlay().Lock();
    if (const Overlay::Value* v = env_.overlay().FindValue(key)) {
      return v->present ? std::optional<std::string>(v->body) : std::nullopt;
    }
    Env::ReadTxn txn(env_);
    lock.unlock();
    StoredValue stored;
    EXPECT_EQ(ReadValue(txn.get(), env_.values(), key, &stored), 0);
    if (!stored.found) return std::nullopt;
    return std::string(stored.body);
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

TEST_F(CommitterTest, ARejectedWriteStoresNoValue) {
  Commit(FencedWrite{"k", 10, false, ValueOp{ValueOp::Kind::kPut, "k", "new"}});
  WriteOutcome o = Commit(
      FencedWrite{"k", 9, false, ValueOp{ValueOp::Kind::kPut, "k", "old"}});
  EXPECT_EQ(o.verdict, Verdict::kRejected);
  EXPECT_EQ(Value("k"), "new");
}

TEST_F(CommitterTest, ObserveAppliesStaleWriteButNeverLowersTheFence) {
  Commit("k", 10);
  WriteOutcome o =
      Commit(FencedWrite{"k", 3, true, ValueOp{ValueOp::Kind::kPut, "k", "v"}});
  EXPECT_EQ(o.verdict, Verdict::kObserved);
  EXPECT_EQ(Value("k"), "v");
  EXPECT_EQ(o.current, Token{10});
  EXPECT_EQ(Get("k")->token, 10u);
  WriteOutcome missing =
      Commit(FencedWrite{"new", std::nullopt, true, std::nullopt});
  EXPECT_EQ(missing.verdict, Verdict::kObserved);
  EXPECT_FALSE(Get("new")) << "a write without a token creates no fence";
}

TEST_F(CommitterTest, PutsSayWhetherTheyMadeTheValueAndDeletesRemoveIt) {
  auto put = [this](Token t) {
    return Commit(
        FencedWrite{"k", t, false, ValueOp{ValueOp::Kind::kPut, "k", "v"}});
  };
  EXPECT_TRUE(put(1).created);
  EXPECT_FALSE(put(2).created);
  WriteOutcome gone = Commit(
      FencedWrite{"k", 3, false, ValueOp{ValueOp::Kind::kDelete, "k", ""}});
  EXPECT_EQ(gone.verdict, Verdict::kAccepted);
  EXPECT_FALSE(Value("k"));
  EXPECT_TRUE(put(4).created);
  EXPECT_EQ(Get("k")->token, 4u) << "the fence stays across the delete";
}

// A put of a key that is its own fence keeps the fence in its value record
// (KeptFence) once the fence has a record of its own, and every later change
// of that value record hands the fence on: another put keeps it, a delete
// gives it to the fences database. Read from LMDB alone (after the applier
// and at a restart), no fence is ever below a token it accepted.
TEST(KeptFenceTest, AValueRecordKeepsItsKeysFenceAndNeverLowersIt) {
  testing::TempDir dir;
  Env env({dir.path(), 64u << 20});
  auto put = [](std::string fence, std::optional<Token> token, bool observe,
                std::string key, std::string body) {
    return FencedWrite{
        std::move(fence), token, observe,
        ValueOp{ValueOp::Kind::kPut, std::move(key), std::move(body)}};
  };
  {
    Committer committer(env, {});
    auto commit = [&committer](FenceWrite write) {
      std::promise<WriteOutcome> done;
      committer.Submit(std::move(write),
                       [&done](WriteOutcome o) { done.set_value(o); });
      return done.get_future().get().verdict;
    };
    EXPECT_EQ(commit(put("k", 5, false, "k", "a")), Verdict::kAccepted);
    EXPECT_EQ(commit(put("k", 9, false, "k", "b")), Verdict::kAccepted);
    // A stale put in observe mode replaces the value, not the fence.
    EXPECT_EQ(commit(put("k", 3, true, "k", "c")), Verdict::kObserved);
    // A put of `k` under another fence (a scope added since) keeps fence k.
    EXPECT_EQ(commit(put("s/", 1, false, "k", "d")), Verdict::kAccepted);
    // A stale delete in observe mode: fence j goes to the fences database.
    EXPECT_EQ(commit(put("j", 7, false, "j", "e")), Verdict::kAccepted);
    EXPECT_EQ(commit(put("j", 8, false, "j", "f")), Verdict::kAccepted);
    EXPECT_EQ(commit(FencedWrite{"j", 2, true,
                                 ValueOp{ValueOp::Kind::kDelete, "j", ""}}),
              Verdict::kObserved);
    committer.Stop();
  }
  {
    // What the fences database itself holds: k's record stayed at its
    // first token (the writes after it changed only the value record), j's
    // moved at the delete.
    Env::ReadTxn txn(env);
    Slot slot;
    std::optional<FenceRecord> stored;
    ASSERT_EQ(ReadFence(txn.get(), env.fences(), "k", &slot, &stored), 0);
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->token, 5u);
    ASSERT_EQ(ReadFence(txn.get(), env.fences(), "j", &slot, &stored), 0);
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->token, 8u);
    StoredValue value;
    ASSERT_EQ(ReadValue(txn.get(), env.values(), "k", &value), 0);
    EXPECT_EQ(value.body, "d");
  }
  // The fences as read.
  const FenceStore store(env);
  std::optional<FenceRecord> fence;
  ASSERT_FALSE(store.Get("k", &fence));
  EXPECT_EQ(fence->token, 9u);
  ASSERT_FALSE(store.Get("j", &fence));
  EXPECT_EQ(fence->token, 8u);
  FenceList list;
  ASSERT_FALSE(store.List("", "", 10, &list));
  std::map<std::string, Token> listed;
  for (const FenceRecord& f : list.fences) listed[f.name] = f.token;
  EXPECT_EQ(listed,
            (std::map<std::string, Token>{{"j", 8}, {"k", 9}, {"s/", 1}}));
  // A restart decides against them.
  Committer again(env, {});
  std::promise<WriteOutcome> stale;
  again.Submit(put("k", 8, false, "k", "late"),
               [&stale](WriteOutcome o) { stale.set_value(o); });
  EXPECT_EQ(stale.get_future().get().verdict, Verdict::kRejected);
}

// What was acknowledged is read back at once, whether or not the applier
// has put it into LMDB yet, and is in LMDB once the committer stops.
TEST_F(CommitterTest,
       AcknowledgedWritesAreVisibleBeforeAndAfterTheyAreApplied) {
  constexpr int kWrites = 2000;
  std::vector<std::promise<WriteOutcome>> promises(kWrites);
  for (int i = 0; i < kWrites; ++i) {
    const std::string key = "v" + std::to_string(i % 100);
    committer_.Submit(
        FencedWrite{key, Token(i), false,
                    ValueOp{ValueOp::Kind::kPut, key, std::to_string(i)}},
        [&promises, i](WriteOutcome o) { promises[i].set_value(o); });
  }
  for (int i = 0; i < kWrites; ++i) {
    const WriteOutcome o = promises[i].get_future().get();
    ASSERT_EQ(o.verdict, Verdict::kAccepted) << i;
    const std::string key = "v" + std::to_string(i % 100);
    const auto fence = Get(key);
    ASSERT_TRUE(fence);
    EXPECT_GE(fence->token, Token(i)) << "an acknowledged token is visible";
  }
  committer_.Stop();
  EXPECT_EQ(Value("v7"), std::to_string(kWrites - 100 + 7));
  EXPECT_LT(committer_.commits(), std::uint64_t{kWrites})
      << "writes in flight together share log syncs";
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
        committer_.Submit(FencedWrite{"hot", token, false, std::nullopt},
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

// Conditional writes from several threads at once, each a read of the
// value and its tag, then a put with If-Match on that tag (a counter): a
// put whose tag is no longer the value's must be refused, so every
// increment that was accepted is counted once. Also run under TSan: the
// reads race the committer's publishing and the applier's retiring.
TEST_F(CommitterTest, ConditionalIncrementsFromManyThreadsAreEachCountedOnce) {
  constexpr int kThreads = 4, kEach = 40;
  // The value and its tag as readers see them: the overlay, else LMDB.
  auto read = [this](std::string* body, std::string* tag) {
    auto lock = env_.overlay().Lock();
    if (const Overlay::Value* v = env_.overlay().FindValue("counter")) {
      *body = v->present ? v->body : "";
      *tag = v->present ? TagOf(v->seq) : "";
      return;
    }
    Env::ReadTxn txn(env_);
    lock.unlock();
    StoredValue stored;
    ASSERT_EQ(ReadValue(txn.get(), env_.values(), "counter", &stored), 0);
    *body = stored.found ? std::string(stored.body) : "";
    *tag = stored.found ? TagOf(stored.seq) : "";
  };
  ASSERT_EQ(Commit(FencedWrite{"counter", 1, false,
                               ValueOp{ValueOp::Kind::kPut, "counter", "0"}})
                .verdict,
            Verdict::kAccepted);
  std::atomic<int> refused = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int done = 0; done < kEach;) {
        std::string body, tag;
        read(&body, &tag);
        FencedWrite w{"counter", 1, false,
                      ValueOp{ValueOp::Kind::kPut, "counter",
                              std::to_string(std::stoi(body) + 1)}};
        w.precondition.has_match = true;
        w.precondition.match = {tag};
        const WriteOutcome o = Commit(std::move(w));
        if (o.verdict == Verdict::kAccepted) {
          ++done;
        } else {
          ASSERT_EQ(o.verdict, Verdict::kPreconditionFailed);
          EXPECT_NE(o.etag, tag);
          ++refused;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(Value("counter"), std::to_string(kThreads * kEach));
  committer_.Stop();
  EXPECT_EQ(Value("counter"), std::to_string(kThreads * kEach));
}

// Keys that are their own fences (KeptFence: the fence kept in the value
// record) written, deleted and bumped from several threads while others
// read the fences: a reader never sees a fence go down, whether it reads
// the overlay or LMDB, before or after the applier moved the fence between
// the value record and the fences database. Also run under TSan.
TEST_F(CommitterTest, KeptFencesNeverReadLowerUnderConcurrentWritesAndDeletes) {
  constexpr int kWriters = 3, kReaders = 2, kEach = 300, kKeys = 4;
  std::atomic<std::uint64_t> next = 1;
  std::atomic<bool> writing = true;
  std::vector<std::thread> readers;
  std::atomic<int> lowered = 0;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&] {
      std::vector<Token> seen(kKeys, 0);
      const FenceStore store(env_);
      while (writing) {
        for (int k = 0; k < kKeys; ++k) {
          std::optional<FenceRecord> fence;
          ASSERT_FALSE(store.Get("kept" + std::to_string(k), &fence));
          if (!fence) continue;
          if (fence->token < seen[k]) ++lowered;
          seen[k] = std::max(seen[k], fence->token);
        }
      }
    });
  }
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937 rng(w);
      for (int i = 0; i < kEach; ++i) {
        const std::string key = "kept" + std::to_string(rng() % kKeys);
        const Token token = next++;
        std::optional<ValueOp> op;
        switch (rng() % 3) {
          case 0:
            op = ValueOp{ValueOp::Kind::kPut, key, std::to_string(token)};
            break;
          case 1:
            op = ValueOp{ValueOp::Kind::kDelete, key, ""};
            break;
          default:
            break;  // a bump
        }
        const WriteOutcome o = Commit(FencedWrite{key, token, false, op});
        ASSERT_TRUE(o.verdict == Verdict::kAccepted ||
                    o.verdict == Verdict::kRejected);
      }
    });
  }
  for (auto& t : writers) t.join();
  writing = false;
  for (auto& t : readers) t.join();
  EXPECT_EQ(lowered, 0) << "a reader saw a fence go down";
  committer_.Stop();
  Token highest = 0;
  for (int k = 0; k < kKeys; ++k) {
    if (auto fence = Get("kept" + std::to_string(k))) {
      highest = std::max(highest, fence->token);
    }
  }
  EXPECT_EQ(highest, next - 1) << "the highest token is some key's fence";
}

// The nice value of this process's thread named `name` (field 19 of
// /proc/self/task/TID/stat), or nullopt when there is none.
std::optional<int> NiceOfThread(const std::string& name) {
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (!std::getline(comm, line) || line != name) continue;
    std::ifstream stat(task.path() / "stat");
    std::getline(stat, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
    }
    return std::stoi(field);
  }
  return std::nullopt;
}

// Where the applier shares a core with the io thread, the answers go
// first: it runs ten nice levels below the thread that started it.
TEST(CommitterApplierTest, RunsTenNiceLevelsBelowTheAnswerPath) {
  testing::TempDir dir;
  Env env({dir.path(), 64u << 20});
  const int own = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
  // At nice 19 already there is nothing lower to see; from nice 10 up the
  // applier stops at 19.
  if (own == 19) GTEST_SKIP() << "already at nice 19";
  Committer committer(env, {});
  std::optional<int> nice;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    nice = NiceOfThread("fp-applier");
    if (nice && *nice != own) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(nice) << "no thread named fp-applier";
  EXPECT_EQ(*nice, std::min(19, own + 10));
}

// The highest log record LMDB's last commit holds.
std::uint64_t AppliedInLmdb(Env& env) {
  Env::ReadTxn txn(env);
  MDB_val key{11, const_cast<char*>("applied_seq")}, data;
  if (mdb_get(txn.get(), env.meta(), &key, &data) != 0) return 0;
  return LoadBigEndian(static_cast<const char*>(data.mv_data), 8);
}

// Answered writes reach LMDB as checkpoints: a few hundred small ones stay
// in the log and the overlay (read back from there) until the interval or
// the budget; past half the budget the applier starts at once; a stop
// applies the rest.
TEST(CommitterCheckpointTest, WritesGatherUntilHalfTheBudget) {
  auto commit = [](Committer& committer, const std::string& key, Token token) {
    std::promise<WriteOutcome> p;
    committer.Submit(
        FencedWrite{key, token, false,
                    ValueOp{ValueOp::Kind::kPut, key, std::string(100, 'v')}},
        [&p](WriteOutcome o) { p.set_value(o); });
    return p.get_future().get().verdict;
  };
  testing::TempDir dir;
  {
    Env env({dir.path(), 64u << 20});
    Committer committer(env, {});  // 128 MiB: a checkpoint at 64 MiB
    for (int i = 1; i <= 300; ++i) {
      ASSERT_EQ(commit(committer, "k" + std::to_string(i), 5),
                Verdict::kAccepted);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_EQ(AppliedInLmdb(env), 0u) << "applied before its checkpoint";
    std::optional<FenceRecord> fence;
    ASSERT_FALSE(FenceStore(env).Get("k300", &fence));
    ASSERT_TRUE(fence);
    EXPECT_EQ(fence->token, 5u);
    committer.Stop();
    EXPECT_EQ(AppliedInLmdb(env), 300u) << "a stop leaves records unapplied";
  }
  testing::TempDir small;
  Env env({small.path(), 64u << 20});
  Committer::Options options;
  // 300 records of about 360 held bytes each: past 64 KiB, half of it.
  options.max_unapplied_bytes = 128u << 10;
  Committer committer(env, options);
  for (int i = 1; i <= 300; ++i) {
    ASSERT_EQ(commit(committer, "k" + std::to_string(i), 5),
              Verdict::kAccepted);
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (AppliedInLmdb(env) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(AppliedInLmdb(env), 0u) << "half the budget started nothing";
}

TEST(CommitterMapTest, GrowsTheMapThenAnswersMapFullAtTheCap) {
  testing::TempDir dir;
  Env env({dir.path(), 1u << 20});
  Committer committer(env, {});
  auto commit = [&](int i) {
    std::promise<WriteOutcome> p;
    auto f = p.get_future();
    const std::string key = "k" + std::to_string(i);
    committer.Submit(
        FencedWrite{key, 1, false,
                    ValueOp{ValueOp::Kind::kPut, key, std::string(4000, 'v')}},
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
  committer.Stop();
  EXPECT_FALSE(FenceStore(env).Get("k0", &fence));
  EXPECT_TRUE(fence) << "every accepted write was applied";
  EXPECT_FALSE(FenceStore(env).Get("k" + std::to_string(i - 1), &fence));
  EXPECT_TRUE(fence);
}

TEST(CommitterQueueTest, PastTheQueueBoundWritesAreRefusedAtOnce) {
  testing::TempDir dir;
  Env env({dir.path(), 64u << 20});
  Committer::Options options;
  options.max_queue_writes = 4;
  options.max_batch_writes = 1;
  Committer committer(env, options);
  constexpr int kWrites = 400;
  std::atomic<int> overloaded = 0, accepted = 0;
  std::latch done(kWrites);
  for (int i = 0; i < kWrites; ++i) {
    committer.Submit(
        FencedWrite{"f" + std::to_string(i), 1, false, std::nullopt},
        [&](WriteOutcome o) {
          if (o.error == Errc::kOverloaded) ++overloaded;
          if (o.verdict == Verdict::kAccepted) ++accepted;
          done.count_down();
        });
  }
  done.wait();
  EXPECT_GT(overloaded.load(), 0);
  EXPECT_GT(accepted.load(), 0);
  EXPECT_EQ(overloaded + accepted, kWrites);
}

// LMDB does not sync the applier's commits (it does: Env::SyncCheckpoint),
// and nothing writes through the map.
TEST(EnvTest, OpensWithoutLmdbsOwnSyncsAndWithoutAWritableMap) {
  testing::TempDir dir;
  Env env({dir.path(), 64u << 20});
  const unsigned flags = env.flags();
  EXPECT_NE(flags & MDB_NOSYNC, 0u);
  EXPECT_EQ(flags & MDB_WRITEMAP, 0u);
  EXPECT_EQ(flags & MDB_MAPASYNC, 0u);
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoint"));
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

FencedWrite Put(const std::string& key, Token token, const std::string& body) {
  return FencedWrite{key, token, false,
                     ValueOp{ValueOp::Kind::kPut, key, body}};
}

TEST_F(CommitterTest, ABatchIsAppliedWhole) {
  Commit(Put("b", 3, "old b"));
  Batch batch;
  batch.writes = {
      Put("a", 5, "new a"), Put("b", 5, "new b"),
      FencedWrite{"c", 5, false, ValueOp{ValueOp::Kind::kDelete, "c", ""}}};
  WriteOutcome o = Commit(batch);
  EXPECT_EQ(o.verdict, Verdict::kAccepted);
  ASSERT_EQ(o.batch.size(), 3u);
  EXPECT_TRUE(o.batch[0].created);
  EXPECT_FALSE(o.batch[1].created);
  EXPECT_TRUE(o.batch[1].decision.advances);
  EXPECT_EQ(Value("a"), "new a");
  EXPECT_EQ(Value("b"), "new b");
  for (const char* name : {"a", "b", "c"}) EXPECT_EQ(Get(name)->token, 5u);
}

TEST_F(CommitterTest, ABatchWithAStaleWriteInTheMiddleChangesNothing) {
  Commit(Put("b", 10, "b at 10"));
  Batch batch;
  batch.writes = {Put("a", 7, "a"), Put("b", 7, "b"), Put("c", 7, "c")};
  WriteOutcome o = Commit(batch);
  EXPECT_EQ(o.verdict, Verdict::kRejected);
  ASSERT_EQ(o.batch.size(), 2u);  // up to the stale one
  EXPECT_EQ(o.batch.back().verdict, Verdict::kRejected);
  EXPECT_EQ(o.batch.back().current, Token{10});
  EXPECT_EQ(Value("a"), std::nullopt);
  EXPECT_EQ(Get("a"), std::nullopt);
  EXPECT_EQ(Value("b"), "b at 10");
  EXPECT_EQ(Get("c"), std::nullopt);
  // Writes in the same group after a refused batch are decided as usual.
  EXPECT_EQ(Commit(Put("a", 7, "alone")).verdict, Verdict::kAccepted);
  EXPECT_EQ(Value("a"), "alone");
}

TEST_F(CommitterTest, BatchesAndSingleWritesInOneGroupSeeEachOther) {
  // Submitted together, so they share groups: each batch all or nothing,
  // and every write sees what the ones before it left.
  std::vector<std::future<WriteOutcome>> done;
  std::vector<std::promise<WriteOutcome>> promises(200);
  for (int i = 0; i < 200; ++i) {
    const Token t = 100 + i;
    FenceWrite w;
    if (i % 2 == 0) {
      w = Batch{{Put("x", t, "x" + std::to_string(t)),
                 Put("y", t, "y" + std::to_string(t))}};
    } else {
      w = Put(i % 4 == 1 ? "x" : "y", t - 50, "stale");
    }
    done.push_back(promises[i].get_future());
    committer_.Submit(std::move(w),
                      [p = &promises[i]](WriteOutcome o) { p->set_value(o); });
  }
  for (int i = 0; i < 200; ++i) {
    WriteOutcome o = done[i].get();
    EXPECT_EQ(o.verdict, i % 2 == 0 ? Verdict::kAccepted : Verdict::kRejected)
        << i;
  }
  EXPECT_EQ(Value("x"), "x298");
  EXPECT_EQ(Value("y"), "y298");
}

// A loop the test turns by hand: everything submitted before the first
// turn is one group.
class HandLoop {
 public:
  Committer::Options::Loop loop() {
    return {[this](std::function<void()> fn) { posted_.push_back(fn); },
            [this](int fd, std::function<void()> ready) {
              watched_.emplace_back(fd, std::move(ready));
            }};
  }
  // Runs what was posted and what the watched descriptors wake, until
  // `done` holds (at most 10 s).
  template <class Done>
  void RunUntil(Done done) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::vector<std::function<void()>> now;
      now.swap(posted_);
      for (auto& fn : now) fn();
      for (auto& [fd, ready] : watched_) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 1) == 1) ready();
      }
    }
  }

 private:
  std::vector<std::function<void()>> posted_;
  std::vector<std::pair<int, std::function<void()>>> watched_;
};

// A batch refused for a precondition takes no record numbers, also when
// writes after it are decided in the same group: the log stays without a
// gap (recovery stops at one), and the tags (the numbers) run on.
TEST(CommitterGroupTest, ARefusedBatchLeavesNoGapInItsGroup) {
  testing::TempDir dir;
  Env env{{dir.path(), 64u << 20}};
  HandLoop hand;
  Committer::Options options;
  options.loop = hand.loop();
  Committer committer(env, options);
  auto put = [](const std::string& key, const std::string& body) {
    return FencedWrite{key, 1, false, ValueOp{ValueOp::Kind::kPut, key, body}};
  };
  std::vector<WriteOutcome> outcomes(4);
  std::atomic<int> answered = 0;
  auto submit = [&](FenceWrite w, int i) {
    committer.Submit(std::move(w), [&, i](WriteOutcome o) {
      outcomes[i] = std::move(o);
      ++answered;
    });
  };
  submit(put("a", "a0"), 0);
  hand.RunUntil([&] { return answered == 1; });
  ASSERT_EQ(outcomes[0].etag, "1");

  Batch batch;
  batch.writes.push_back(put("x", "x0"));
  batch.writes.push_back(put("a", "a1"));
  batch.writes.back().precondition.has_match = true;
  batch.writes.back().precondition.match = {"nope"};
  submit(std::move(batch), 1);
  submit(put("b", "b0"), 2);
  submit(put("c", "c0"), 3);
  hand.RunUntil([&] { return answered == 4; });
  ASSERT_EQ(answered, 4);
  EXPECT_EQ(outcomes[1].verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(outcomes[2].etag, "2");
  EXPECT_EQ(outcomes[3].etag, "3");
  committer.Stop();
}

// Where io_uring is forbidden (a container with Docker's default seccomp
// profile) the log's syncs run in SyncRing::Submit, and Submit must still
// wake the loop's watch of its eventfd, as io_uring's completion would:
// otherwise a lone write waits for the committer's next timer tick, up to a
// second. The test runs itself again (this one case) in a child process
// where io_uring_setup fails, as tests/testing/without_io_uring.cc arranges
// for the server; there a hand-turned loop that never runs the timer's
// watch must still answer a lone write.
constexpr char kWithoutIoUring[] = "FENCEPOST_TEST_CHILD_WITHOUT_IO_URING";

// Makes io_uring_setup fail with EPERM in this process and its children.
bool ForbidIoUring() {
#if defined(__x86_64__)
  constexpr unsigned kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr unsigned kArch = AUDIT_ARCH_AARCH64;
#else
  return false;
#endif
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{
      static_cast<unsigned short>(sizeof filter / sizeof *filter), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// What an open descriptor is, as /proc names it ("anon_inode:[timerfd]").
std::string Describe(int fd) {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd),
                                       ec)
      .string();
}

TEST(SyncFallbackTest, WithoutIoUringALoneWriteIsAnsweredBeforeAnyTick) {
  const ::testing::TestInfo* me =
      ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      std::string(me->test_suite_name()) + "." + me->name();
  if (std::getenv(kWithoutIoUring) == nullptr) {
    // The parent: the same case again, in a child without io_uring.
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (!ForbidIoUring() || ::setenv(kWithoutIoUring, "1", 1) != 0) {
        ::_exit(120);
      }
      const std::string filter = "--gtest_filter=" + name;
      ::execl("/proc/self/exe", "committer_test", filter.c_str(), nullptr);
      ::_exit(121);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "the child died: " << status;
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "the case failed without io_uring (120: no seccomp filter, 121: "
           "no exec; its output is above)";
    return;
  }
  testing::TempDir dir;
  Env env{{dir.path(), 64u << 20}};
  // Runs posted work and the eventfd's watch, never the timer's.
  std::vector<std::function<void()>> posted;
  std::vector<std::pair<int, std::function<void()>>> watched;
  Committer::Options options;
  options.loop = {[&](std::function<void()> fn) { posted.push_back(fn); },
                  [&](int fd, std::function<void()> ready) {
                    watched.emplace_back(fd, std::move(ready));
                  }};
  Committer committer(env, options);
  ASSERT_FALSE(committer.sync_fallback().empty())
      << "io_uring was available in the child";
  std::vector<std::function<void()>> on_eventfd;
  int timers = 0;
  for (auto& [fd, ready] : watched) {
    const std::string what = Describe(fd);
    if (what.find("[timerfd]") != std::string::npos) {
      ++timers;
    } else {
      ASSERT_NE(what.find("[eventfd]"), std::string::npos) << what;
      on_eventfd.push_back([fd = fd, ready = ready] {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 10) == 1) ready();
      });
    }
  }
  ASSERT_EQ(timers, 1) << "the committer watches its timer";
  ASSERT_EQ(on_eventfd.size(), 1u);

  std::atomic<bool> answered = false;
  committer.Submit(FencedWrite{"lone", 1, false, std::nullopt},
                   [&](WriteOutcome o) {
                     EXPECT_EQ(o.verdict, WriteOutcome::Verdict::kAccepted);
                     answered = true;
                   });
  // Bounded only for the failure: without the wake-up, nothing here ever
  // answers it.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!answered && std::chrono::steady_clock::now() < deadline) {
    std::vector<std::function<void()>> now;
    now.swap(posted);
    for (auto& fn : now) fn();
    on_eventfd[0]();
  }
  EXPECT_TRUE(answered)
      << "the sync's completion did not wake the loop: the write waited for "
         "the timer";
  committer.Stop();
}

}  // namespace
}  // namespace fencepost::fence
