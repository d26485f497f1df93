#include "fence/shards.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <set>

#include "fence/fence_store.h"
#include "fence/long_keys.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

namespace fs = std::filesystem;

WriteOutcome Commit(Shards& shards, const std::string& fence, Token token) {
  std::promise<WriteOutcome> promise;
  auto future = promise.get_future();
  shards.CommitterOf(fence).Submit(
      FencedWrite{fence, token, false, std::nullopt},
      [&promise](WriteOutcome o) { promise.set_value(o); });
  return future.get();
}

Shards::Options At(const std::string& dir, std::size_t count = 4) {
  Shards::Options options;
  options.dir = dir;
  options.max_map_size = 64u << 20;
  options.count = count;
  return options;
}

std::vector<std::string> Names(const FenceList& list) {
  std::vector<std::string> names;
  for (const auto& f : list.fences) names.push_back(f.name);
  return names;
}

TEST(ShardsTest, NewDirectoryRecordsItsCountAndKeepsIt) {
  testing::TempDir dir;
  {
    Shards shards(At(dir.path(), 3));
    EXPECT_EQ(shards.size(), 3u);
    ASSERT_EQ(Commit(shards, "orders/1", 7).verdict,
              WriteOutcome::Verdict::kAccepted);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(fs::exists(fs::path(dir.path()) /
                           ("shard-" + std::to_string(i)) / "data.mdb"));
  }
  // Reopening with another count must not move fences between environments.
  Shards reopened(At(dir.path(), 8));
  EXPECT_EQ(reopened.size(), 3u);
  std::optional<FenceRecord> fence;
  ASSERT_FALSE(FenceStore(reopened.envs()).Get("orders/1", &fence));
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->token, 7u);
}

TEST(ShardsTest, RefusesASingleEnvironmentDirectoryAndABadCount) {
  testing::TempDir dir;
  { Env old({dir.path(), 64u << 20}); }
  EXPECT_THROW(Shards(At(dir.path())), std::runtime_error);

  testing::TempDir bad;
  std::ofstream(fs::path(bad.path()) / "shards") << "zero\n";
  EXPECT_THROW(Shards(At(bad.path())), std::runtime_error);
}

std::string Slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// The bare count the releases before data format 3 wrote is rewritten at
// open with a first line those releases cannot read as a count (they then
// refuse the directory: tests/e2e/rollback.sh); a newer form is refused.
TEST(ShardsTest, TheCountFileIsRewrittenSoThatOlderReleasesRefuseIt) {
  testing::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "shards";
  { Shards created(At(dir.path(), 3)); }
  EXPECT_EQ(Slurp(file), "fencepost-shards format=3\n3\n");
  std::ofstream(file, std::ios::trunc) << "3\n";
  {
    Shards reopened(At(dir.path(), 8));
    EXPECT_EQ(reopened.size(), 3u);
  }
  EXPECT_EQ(Slurp(file), "fencepost-shards format=3\n3\n");
  std::size_t count = 0;
  EXPECT_FALSE(std::ifstream(file) >> count);  // as the older releases read it

  std::ofstream(file, std::ios::trunc) << "fencepost-shards format=4\n3\n";
  try {
    Shards newer(At(dir.path()));
    ADD_FAILURE() << "a count file of a newer release was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("newer release"), std::string::npos)
        << e.what();
  }
}

// A scope change is refused while a stored value would be guarded by a
// fence in another shard than the one that holds it: the values logged and
// not yet applied count, deleted ones do not.
TEST(ShardsTest, AScopeChangeThatWouldStrandAValueIsRefused) {
  testing::TempDir dir;
  Shards shards(At(dir.path()));
  const auto put = [&](const std::string& key, bool remove = false) {
    std::promise<WriteOutcome> promise;
    ValueOp value;
    value.key = key;
    value.body = "v";
    if (remove) value.kind = ValueOp::Kind::kDelete;
    shards.CommitterOf(key).Submit(
        FencedWrite{key, 7, false, value},
        [&promise](WriteOutcome o) { promise.set_value(o); });
    return promise.get_future().get().verdict;
  };
  std::size_t moving = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string key = "a/" + std::to_string(i);
    ASSERT_EQ(put(key), WriteOutcome::Verdict::kAccepted);
    if (ShardOf(key, 4) != ShardOf("a/", 4)) ++moving;
  }
  ASSERT_GT(moving, 0u);
  const Scopes none({}), a({"a/"}), b({"b/"});
  const std::string refusal = shards.RefuseScopeChange(none, a);
  EXPECT_NE(refusal.find(std::to_string(moving) + " stored value"),
            std::string::npos)
      << refusal;
  EXPECT_EQ(shards.RefuseScopeChange(none, b), "");
  EXPECT_EQ(shards.RefuseScopeChange(b, none), "");
  EXPECT_NE(shards.RefuseScopeChange(b, a), "");
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(put("a/" + std::to_string(i), true),
              WriteOutcome::Verdict::kAccepted);
  }
  EXPECT_EQ(shards.RefuseScopeChange(none, a), "");
  testing::TempDir one;
  EXPECT_EQ(Shards(At(one.path(), 1)).RefuseScopeChange(none, a), "");
}

TEST(ShardsTest, FencesSpreadOverEveryShard) {
  std::set<std::size_t> used;
  for (int i = 0; i < 200; ++i) used.insert(ShardOf(std::to_string(i), 4));
  EXPECT_EQ(used.size(), 4u);
  EXPECT_EQ(ShardOf("orders/1", 4), ShardOf("orders/1", 4));
}

TEST(ShardsTest, ListMergesShardsInNameOrderAcrossPages) {
  testing::TempDir dir;
  Shards shards(At(dir.path()));
  std::vector<std::string> all;
  for (int i = 0; i < 40; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "k/%02d", i);
    all.push_back(name);
    ASSERT_EQ(Commit(shards, name, 1).verdict,
              WriteOutcome::Verdict::kAccepted);
  }
  Commit(shards, "other", 1);
  std::set<std::size_t> used;
  for (const auto& name : all) used.insert(shards.IndexOf(name));
  ASSERT_GT(used.size(), 1u) << "the test needs fences in several shards";

  FenceStore store(shards.envs());
  std::uint64_t count = 0;
  ASSERT_FALSE(store.Count(&count));
  EXPECT_EQ(count, 41u);

  std::vector<std::string> seen;
  std::string after;
  for (int page = 0; page < 20; ++page) {
    FenceList list;
    ASSERT_FALSE(store.List("k/", after, 7, &list));
    for (auto& name : Names(list)) seen.push_back(name);
    if (!list.next) break;
    EXPECT_EQ(list.fences.size(), 7u);
    after = *list.next;
  }
  EXPECT_EQ(seen, all);
}

}  // namespace
}  // namespace fencepost::fence
