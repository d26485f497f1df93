#include "fence/fold.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace fencepost::fence {
namespace {

using Verdict = WriteOutcome::Verdict;

// Storage in maps; a put's tag is "t" and its change's number.
class MapSource : public Fold::Source {
 public:
  std::map<std::string, Token> fences;
  std::map<std::string, std::string> values;  // key -> tag
  int loads = 0;
  std::size_t admitted = 0, unadmitted = 0;

  std::error_code LoadFence(const std::string& name, FenceNow* now) override {
    ++loads;
    if (auto it = fences.find(name); it != fences.end()) {
      now->token = it->second;
    } else {
      now->created = true;
    }
    return {};
  }
  std::error_code LoadValue(const std::string& key, bool with_tag,
                            ValueNow* now) override {
    if (auto it = values.find(key); it != values.end()) {
      now->exists = true;
      if (with_tag) now->tag = it->second;
    }
    return {};
  }
  std::error_code Admit(Change& change, std::size_t number,
                        WriteOutcome*) override {
    ++admitted;
    if (change.op == Change::Op::kPut)
      change.tag = "t" + std::to_string(number);
    return {};
  }
  void Unadmit(const std::vector<Change>& changes) override {
    unadmitted += changes.size();
  }
};

FencedWrite Put(std::string key, Token token) {
  FencedWrite w;
  w.fence = key;
  w.token = token;
  w.value = ValueOp{ValueOp::Kind::kPut, key, "body", ""};
  return w;
}

TEST(FoldTest, EachWriteSeesTheWritesBeforeItInItsGroup) {
  MapSource source;
  source.fences["a"] = 5;
  Fold fold(source);
  WriteOutcome first, stale;
  fold.Decide(Put("a", 7), 1, &first);
  fold.Decide(Put("a", 6), 2, &stale);
  EXPECT_EQ(first.verdict, Verdict::kAccepted);
  EXPECT_EQ(stale.verdict, Verdict::kRejected);
  EXPECT_EQ(stale.current, Token{7});
  EXPECT_EQ(source.loads, 1);  // the second read the group's raise
  ASSERT_EQ(fold.changes().size(), 1u);
  EXPECT_EQ(fold.changes()[0].fence_token, Token{7});
}

TEST(FoldTest, AnIfMatchSeesThePutBeforeItInItsGroup) {
  MapSource source;
  Fold fold(source);
  WriteOutcome put, matched;
  fold.Decide(Put("k", 1), 1, &put);
  EXPECT_TRUE(put.created);
  FencedWrite again = Put("k", 1);
  again.precondition.has_match = true;
  again.precondition.match = {"t0"};
  fold.Decide(again, 2, &matched);
  EXPECT_EQ(matched.verdict, Verdict::kAccepted);
  EXPECT_FALSE(matched.created);
}

TEST(FoldTest, ABatchWithAStaleWriteChangesNothing) {
  MapSource source;
  source.fences["b"] = 9;
  Fold fold(source);
  Batch batch;
  batch.writes = {Put("a", 3), Put("b", 2), Put("c", 1)};
  std::vector<WriteOutcome> outcomes;
  EXPECT_FALSE(fold.Decide(batch, 1, &outcomes));
  ASSERT_EQ(outcomes.size(), 2u);  // stopped at the stale write
  EXPECT_EQ(BatchOutcome(outcomes).verdict, Verdict::kRejected);
  EXPECT_TRUE(fold.changes().empty());
  EXPECT_EQ(source.unadmitted, 1u);  // the first write's change, given back
  WriteOutcome after;
  fold.Decide(Put("a", 1), 2, &after);
  EXPECT_EQ(after.verdict, Verdict::kAccepted);  // "a" was not raised to 3
}

TEST(FoldTest, AnAppliedBatchKeepsItsChangesInOneRun) {
  MapSource source;
  Fold fold(source);
  Batch batch;
  batch.writes = {Put("a", 1), Put("b", 1)};
  std::vector<WriteOutcome> outcomes;
  EXPECT_TRUE(fold.Decide(batch, 1, &outcomes));
  ASSERT_EQ(fold.changes().size(), 2u);
  EXPECT_TRUE(fold.changes()[0].batch_continues);
  EXPECT_FALSE(fold.changes()[1].batch_continues);
}

}  // namespace
}  // namespace fencepost::fence
