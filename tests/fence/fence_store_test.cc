#include "fence/fence_store.h"

#include <gtest/gtest.h>

#include <future>

#include "fence/committer.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

class FenceStoreTest : public ::testing::Test {
 protected:
  void Put(const std::string& name, Token token) {
    std::promise<WriteOutcome> p;
    auto f = p.get_future();
    committer_->Submit(FencedWrite{name, token, false, std::nullopt},
                       [&p](WriteOutcome o) { p.set_value(o); });
    ASSERT_EQ(f.get().verdict, WriteOutcome::Verdict::kAccepted);
  }
  // A write of `key`'s value under its own fence (a delete without
  // `body`); the outcome.
  WriteOutcome Write(const std::string& key, Token token,
                     std::optional<std::string> body) {
    std::promise<WriteOutcome> p;
    auto f = p.get_future();
    FencedWrite write{key, token, false, std::nullopt};
    write.value = ValueOp{body ? ValueOp::Kind::kPut : ValueOp::Kind::kDelete,
                          key, body.value_or(""), ""};
    committer_->Submit(std::move(write),
                       [&p](WriteOutcome o) { p.set_value(o); });
    WriteOutcome outcome = f.get();
    EXPECT_EQ(outcome.verdict, WriteOutcome::Verdict::kAccepted);
    return outcome;
  }
  // Writes `key` at `token` until the write's update time differs from
  // `than` (the clock is read once per group; a few tries at most).
  WriteOutcome WriteLaterThan(const std::string& key, Token token,
                              std::optional<std::string> body,
                              std::int64_t than) {
    WriteOutcome outcome;
    for (int i = 0; i < 1000; ++i) {
      outcome = Write(key, token, body);
      if (outcome.updated_at_ns != than) break;
    }
    EXPECT_NE(outcome.updated_at_ns, than);
    return outcome;
  }
  std::optional<FenceRecord> Get(const std::string& name) {
    std::optional<FenceRecord> fence;
    EXPECT_FALSE(FenceStore(*env_).Get(name, &fence));
    return fence;
  }
  std::vector<std::string> Names(const FenceList& list) {
    std::vector<std::string> out;
    for (const auto& f : list.fences) out.push_back(f.name);
    return out;
  }
  void Reopen() {
    committer_.reset();
    env_.reset();
    env_ = std::make_unique<Env>(Env::Options{dir_.path(), 64u << 20});
    committer_ = std::make_unique<Committer>(*env_, Committer::Options{});
  }

  testing::TempDir dir_;
  std::unique_ptr<Env> env_ =
      std::make_unique<Env>(Env::Options{dir_.path(), 64u << 20});
  std::unique_ptr<Committer> committer_ =
      std::make_unique<Committer>(*env_, Committer::Options{});
};

TEST_F(FenceStoreTest, MissingFenceIsNullopt) { EXPECT_FALSE(Get("nope")); }

TEST_F(FenceStoreTest, RecordsTokenAndTimeAndSurvivesReopen) {
  Put("orders/1", 34);
  auto fence = Get("orders/1");
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->token, 34u);
  EXPECT_GT(fence->updated_at_ns, 1'700'000'000'000'000'000);
  Reopen();
  EXPECT_EQ(Get("orders/1")->token, 34u);
}

// Two records of one fence, in the fences database and in the value record
// of its key (format 3): the one ahead is the one moved last, by token and
// then by time.
TEST(KeptIsAheadTest, TheHigherTokenThenTheLaterTime) {
  const FenceRecord record{"k", 5, 100};
  EXPECT_TRUE(KeptIsAhead({6, 50}, record));
  EXPECT_TRUE(KeptIsAhead({5, 101}, record)) << "same token, moved later";
  EXPECT_FALSE(KeptIsAhead({5, 100}, record));
  EXPECT_FALSE(KeptIsAhead({5, 99}, record));
  EXPECT_FALSE(KeptIsAhead({4, 200}, record));
}

// A put or a delete at the fence's own token leaves the fence as its raise
// set it, token and time, wherever it is kept: in the value record of its
// key (format 3), or in the fences database once the value is deleted. A
// raise moves both.
TEST_F(FenceStoreTest, AnEqualTokenWriteLeavesTheFenceAsItsRaiseSetIt) {
  const WriteOutcome first = Write("k", 5, "a");
  const WriteOutcome second = Write("k", 5, "b");
  EXPECT_EQ(second.updated_at_ns, first.updated_at_ns);
  Reopen();  // the committer applied both: the read is LMDB's
  ASSERT_TRUE(Get("k"));
  EXPECT_EQ(Get("k")->token, 5u);
  EXPECT_EQ(Get("k")->updated_at_ns, first.updated_at_ns);

  const WriteOutcome removed = Write("k", 5, std::nullopt);
  EXPECT_EQ(removed.updated_at_ns, first.updated_at_ns);
  Reopen();
  EXPECT_EQ(Get("k")->updated_at_ns, first.updated_at_ns);

  const WriteOutcome raised = WriteLaterThan("k", 6, "c", first.updated_at_ns);
  Reopen();
  EXPECT_EQ(Get("k")->token, 6u);
  EXPECT_EQ(Get("k")->updated_at_ns, raised.updated_at_ns);
}

TEST_F(FenceStoreTest, LongNamesNeverCollide) {
  // Two 1024-byte names that agree on far more than LMDB's 511-byte key
  // limit: truncation would merge them.
  const std::string a = std::string(1000, 'x') + "-aaaaaaaaaaaaaaaaaaaaaaa";
  const std::string b = std::string(1000, 'x') + "-bbbbbbbbbbbbbbbbbbbbbbb";
  Put(a, 5);
  Put(b, 7);
  Put(std::string(511, 'x'), 9);  // the longest direct key
  EXPECT_EQ(Get(a)->token, 5u);
  EXPECT_EQ(Get(b)->token, 7u);
  EXPECT_EQ(Get(std::string(511, 'x'))->token, 9u);
  EXPECT_FALSE(Get(std::string(1000, 'x') + "-ccc"));
  Reopen();
  EXPECT_EQ(Get(a)->name, a);
  EXPECT_EQ(Get(b)->token, 7u);
  std::uint64_t count = 0;
  ASSERT_FALSE(FenceStore(*env_).Count(&count));
  EXPECT_EQ(count, 3u);
}

TEST_F(FenceStoreTest, ListsByNameWithPrefixAndPages) {
  for (const char* name : {"b/2", "a/1", "b/1", "c", "b/3"}) Put(name, 1);
  FenceStore store(*env_);
  FenceList list;
  ASSERT_FALSE(store.List("", "", 100, &list));
  EXPECT_EQ(Names(list),
            (std::vector<std::string>{"a/1", "b/1", "b/2", "b/3", "c"}));
  EXPECT_FALSE(list.next);

  ASSERT_FALSE(store.List("b/", "", 2, &list));
  EXPECT_EQ(Names(list), (std::vector<std::string>{"b/1", "b/2"}));
  ASSERT_TRUE(list.next);
  EXPECT_EQ(*list.next, "b/2");
  ASSERT_FALSE(store.List("b/", *list.next, 2, &list));
  EXPECT_EQ(Names(list), (std::vector<std::string>{"b/3"}));
  EXPECT_FALSE(list.next);

  ASSERT_FALSE(store.List("", "b", 100, &list));
  EXPECT_EQ(Names(list), (std::vector<std::string>{"b/1", "b/2", "b/3", "c"}))
      << "after need not name an existing fence";
}

TEST_F(FenceStoreTest, ListsLongNamesUnderALongPrefix) {
  const std::string base(600, 'p');
  Put(base + "1", 1);
  Put(base + "2", 2);
  Put(base.substr(0, 500) + "q", 3);
  FenceList list;
  ASSERT_FALSE(FenceStore(*env_).List(base, "", 10, &list));
  ASSERT_EQ(list.fences.size(), 2u);
  for (const auto& f : list.fences) EXPECT_EQ(f.name.substr(0, 600), base);
  const std::string after = list.fences[0].name;
  ASSERT_FALSE(FenceStore(*env_).List(base, after, 10, &list));
  ASSERT_EQ(list.fences.size(), 1u);
}

}  // namespace
}  // namespace fencepost::fence
