// A commit LMDB did not sync (MDB_NOSYNC) whose meta page reached the disk
// before the pages it names: the next open rolls that meta page back to
// the last checkpoint recorded as synced (fence/checkpoint_file.h).

#include "fence/checkpoint_file.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "fence/env.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Puts `count` keys "PREFIXn" in one commit; returns its transaction id.
std::uint64_t Put(Env& env, const std::string& prefix, int count) {
  MDB_txn* txn = nullptr;
  EXPECT_EQ(mdb_txn_begin(env.raw(), nullptr, 0, &txn), 0);
  const std::uint64_t id = mdb_txn_id(txn);
  const std::string body(200, 'v');
  for (int i = 0; i < count; ++i) {
    std::string key = prefix + std::to_string(i);
    MDB_val k{key.size(), key.data()};
    MDB_val v{body.size(), const_cast<char*>(body.data())};
    EXPECT_EQ(mdb_put(txn, env.values(), &k, &v, 0), 0);
  }
  EXPECT_EQ(mdb_txn_commit(txn), 0);
  return id;
}

bool Has(Env& env, const std::string& key) {
  Env::ReadTxn txn(env);
  MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
  return mdb_get(txn.get(), env.values(), &k, &v) == 0;
}

std::uint64_t LastTxnid(Env& env) {
  MDB_envinfo info;
  mdb_env_info(env.raw(), &info);
  return info.me_last_txnid;
}

TEST(CheckpointFileTest, AnUnsyncedMetaPageIsRolledBackToTheSyncedCheckpoint) {
  testing::TempDir dir;
  const std::string data = dir / "data.mdb";
  std::uint64_t synced = 0, unsynced = 0;
  std::string at_checkpoint, after;
  {
    Env env({dir.path(), 64u << 20});
    synced = Put(env, "kept", 50);
    ASSERT_EQ(env.SyncCheckpoint(synced), 0);
    at_checkpoint = ReadBytes(data);  // what the disk holds
    ASSERT_EQ(env.BeginCheckpoint(synced + 1), 0);
    unsynced = Put(env, "lost", 2000);  // committed, not synced
    after = ReadBytes(data);            // the page cache
  }
  ASSERT_EQ(unsynced, synced + 1);
  ASSERT_GT(after.size(), at_checkpoint.size());
  // The power cut: of the unsynced commit, only its meta page reached the
  // disk (the kernel may write it first); its new pages read as zeros.
  const std::size_t page = 4096;
  const std::size_t slot = (unsynced % 2) * page;
  std::string cut = at_checkpoint;
  cut.resize(after.size(), '\0');
  cut.replace(slot, page, after, slot, page);
  WriteBytes(data, cut);

  // Without the roll-back, LMDB opens the unsynced commit over missing
  // pages (only its meta page is read here: its tree is zeros).
  {
    MDB_env* raw = nullptr;
    ASSERT_EQ(mdb_env_create(&raw), 0);
    ASSERT_EQ(mdb_env_open(raw, dir.path().c_str(), MDB_RDONLY, 0644), 0);
    MDB_envinfo info;
    mdb_env_info(raw, &info);
    mdb_env_close(raw);
    EXPECT_EQ(info.me_last_txnid, unsynced) << "LMDB did not open it";
  }
  // Not while another process has the environment open (a backup left
  // from before the crash would read pages the commits after the
  // roll-back reuse): the start refuses, saying why.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t reader = ::fork();
  ASSERT_GE(reader, 0);
  if (reader == 0) {
    MDB_env* raw = nullptr;
    if (mdb_env_create(&raw) != 0 ||
        mdb_env_open(raw, dir.path().c_str(), MDB_RDONLY, 0644) != 0) {
      ::_exit(1);
    }
    [[maybe_unused]] const auto n = ::write(ready[1], "r", 1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the reader did not open";
  try {
    Env refused({dir.path(), 64u << 20});
    ADD_FAILURE() << "rolled back under another process's reader";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("another process"), std::string::npos)
        << e.what();
  }
  ::kill(reader, SIGKILL);
  ::waitpid(reader, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  // Alone, the open rolls the meta page back to the checkpoint.
  Env env({dir.path(), 64u << 20});
  EXPECT_EQ(env.rolled_back(), unsynced);
  EXPECT_EQ(LastTxnid(env), synced);
  EXPECT_TRUE(Has(env, "kept49"));
  EXPECT_FALSE(Has(env, "lost0"));
  // And it goes on from there: a new commit, synced, opens again.
  const std::uint64_t next = Put(env, "next", 10);
  ASSERT_EQ(env.SyncCheckpoint(next), 0);
}

// A checkpoint recorded in flight whose commit never happened (the crash
// came between the record and the commit): nothing to roll back, and the
// checkpoint before stands.
TEST(CheckpointFileTest,
     ACheckpointInFlightThatNeverCommittedLeavesAllAsItWas) {
  testing::TempDir dir;
  {
    Env env({dir.path(), 64u << 20});
    const std::uint64_t synced = Put(env, "kept", 5);
    ASSERT_EQ(env.SyncCheckpoint(synced), 0);
    ASSERT_EQ(env.BeginCheckpoint(synced + 1), 0);
  }
  Env env({dir.path(), 64u << 20});
  EXPECT_EQ(env.rolled_back(), 0u);
  EXPECT_TRUE(Has(env, "kept4"));
}

// A commit after a checkpoint recorded as synced is not one of the
// applier's (LMDB's own tools sync theirs): it stands.
TEST(CheckpointFileTest, ASyncedCommitAfterTheLastCheckpointStands) {
  testing::TempDir dir;
  {
    Env env({dir.path(), 64u << 20});
    ASSERT_EQ(env.SyncCheckpoint(Put(env, "kept", 5)), 0);
    Put(env, "tool", 5);
    ASSERT_EQ(mdb_env_sync(env.raw(), 1), 0);
  }
  Env env({dir.path(), 64u << 20});
  EXPECT_EQ(env.rolled_back(), 0u);
  EXPECT_TRUE(Has(env, "tool4"));
}

TEST(CheckpointFileTest, ATornRecordOrAFileThatIsNotLmdbsRefusesToStart) {
  testing::TempDir dir;
  { Env env({dir.path(), 64u << 20}); }
  std::string recorded = ReadBytes(dir / "checkpoint");
  ASSERT_EQ(recorded.size(), 13u);
  recorded[3] ^= 0x10;
  WriteBytes(dir / "checkpoint", recorded);
  EXPECT_THROW(CheckpointFile::RollBack(dir.path()), std::runtime_error);
  testing::TempDir other;
  {
    CheckpointFile file(other.path(), 1);
    ASSERT_EQ(file.Begin(2), 0);  // a commit in flight: the metas are read
  }
  WriteBytes(other / "data.mdb", std::string(8192, 'x'));
  EXPECT_THROW(CheckpointFile::RollBack(other.path()), std::runtime_error);
}

}  // namespace
}  // namespace fencepost::fence
