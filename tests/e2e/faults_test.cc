// Storage faults, end to end: a map that fills up, the log's sync failing
// with EIO or ENOSPC (injected by powercut_fs.py, under the sync whatever
// issued it), and the fs: backend's fsync failing with ENOSPC (injected
// with strace: that backend syncs with plain syscalls).

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/http_client.h"
#include "tests/testing/powercut_fs.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::FsEvent;
using testing::PowercutFs;
using testing::PowercutFsOptions;
using testing::PowercutFsUnsupported;
using testing::ServerProcess;
using testing::TempDir;

TEST(FaultsTest, TinyMapFillsUpWith507AndRecoversWithALargerOne) {
  TempDir dir;
  const std::string body(8192, 'v');
  int stored = 0;
  {
    ServerProcess server(dir / "data", {"--max-map-size", "1048576"});
    int status = 0;
    for (int i = 0; i < 1000; ++i) {
      status = Fetch(server.data_port(), "PUT", "/fill/" + std::to_string(i),
                     {{"Fencing-Token", "1"}}, body)
                   .status;
      if (status != 201) break;
      ++stored;
    }
    ASSERT_EQ(status, 507) << "after " << stored << " values";
    ASSERT_GT(stored, 10);
    auto full = Fetch(server.data_port(), "PUT", "/fill/more",
                      {{"Fencing-Token", "1"}}, body);
    EXPECT_EQ(full.status, 507);
    EXPECT_NE(full.body.find("urn:fencepost:problem:map-full"),
              std::string::npos);
    // Reads and the admin port keep working.
    EXPECT_EQ(Fetch(server.data_port(), "GET", "/fill/0").body, body);
    EXPECT_EQ(Fetch(server.admin_port(), "GET", "/metrics").status, 200);
    EXPECT_EQ(Fetch(server.admin_port(), "GET", "/readyz").status, 200);
    EXPECT_EQ(Fetch(server.data_port(), "PUT", "/fill/0",
                    {{"Fencing-Token", "0"}}, "stale")
                  .status,
              409)
        << "the accept rule still answers first";
  }
  ServerProcess bigger(dir / "data", {"--max-map-size", "67108864"});
  EXPECT_EQ(Fetch(bigger.data_port(), "PUT", "/fill/more",
                  {{"Fencing-Token", "1"}}, body)
                .status,
            201);
  EXPECT_EQ(
      Fetch(bigger.data_port(), "GET", "/fill/" + std::to_string(stored - 1))
          .body,
      body);
}

bool HaveStrace() { return std::system("strace -V >/dev/null 2>&1") == 0; }

// The write-ahead log's sync (of shard-0/wal-0, each group's one flush)
// fails with `error` (EIO, or ENOSPC as ext4 can report at writeback): the
// data directory is on powercut_fs.py, which fails the 3rd and every later
// sync of that file however it was issued (fdatasync, or io_uring's
// IORING_OP_FSYNC). That write is never acknowledged and the process stops
// instead of carrying on. The client, one request at a time (one group, one
// sync each), must have seen exactly as many acknowledgements as the
// journal shows syncs of the file returning 0 before the first failure.
// After a restart the fence holds the last acknowledged token, or the one
// whose sync failed (its bytes may have reached the log: never
// acknowledged, it may still land), never less. `wrapper` runs the server
// (without_io_uring: the loop's own fdatasync instead of io_uring's).
void ExpectLogSyncFailureStops(const std::string& error,
                               const std::vector<std::string>& wrapper = {}) {
  if (const std::string why = PowercutFsUnsupported(); !why.empty()) {
    FAIL() << why;
  }
  TempDir dir;
  PowercutFsOptions options;
  options.journal = true;
  PowercutFs fs(dir / "fs", options);
  const std::string data = fs.mountpoint() + "/data";
  // Create the environment first, so the failure counts only writes.
  { ServerProcess first(data); }
  const std::size_t before = fs.Journal().size();
  fs.FailSyncs("*/shard-0/wal-0", 3, error);
  ServerProcess server(data, {}, {}, wrapper);
  int acked = 0, last = 0;
  for (int token = 1; token <= 10; ++token) {
    try {
      auto r = Fetch(server.data_port(), "PUT", "/eio",
                     {{"Fencing-Token", std::to_string(token)}}, "v");
      if (r.status / 100 != 2) break;
      ++acked;
      last = token;
    } catch (const std::exception&) {
      break;  // the server stopped mid-request: not acknowledged
    }
  }
  const int status = server.Wait(15);
  EXPECT_NE(status, 0) << "the process must stop, not carry on";
  EXPECT_NE(server.Log().find("stopping"), std::string::npos) << server.Log();
  const auto journal = fs.Journal();
  int synced = 0;
  bool failed = false;
  for (std::size_t i = before; i < journal.size() && !failed; ++i) {
    const FsEvent& e = journal[i];
    if (e.kind != FsEvent::Kind::kFsyncEnd || e.path != "/data/shard-0/wal-0") {
      continue;
    }
    failed = e.result == error;
    synced += e.result == "0";
  }
  ASSERT_TRUE(failed) << "no sync failed with " << error << ": " << fs.Log();
  EXPECT_GE(synced, 2);
  EXPECT_EQ(acked, synced) << "every acknowledgement needs its own sync, and "
                              "none may follow the failed one";

  fs.Control("");
  ServerProcess restarted(data);
  auto fence = Fetch(restarted.admin_port(), "GET", "/v1/fences/eio");
  ASSERT_EQ(fence.status, 200);
  const bool acknowledged =
      fence.body.find("\"token\":" + std::to_string(last) + ",") !=
      std::string::npos;
  const bool failed_one =
      fence.body.find("\"token\":" + std::to_string(last + 1) + ",") !=
      std::string::npos;
  EXPECT_TRUE(acknowledged || failed_one) << fence.body;
}

TEST(FaultsTest, FsyncEioIsNeverAcknowledgedAndStopsTheProcess) {
  ExpectLogSyncFailureStops("EIO");
}

TEST(FaultsTest, FsyncEnospcIsNeverAcknowledgedAndStopsTheProcess) {
  ExpectLogSyncFailureStops("ENOSPC");
}

// Where io_uring is forbidden, the loop's own fdatasync fails the same way.
TEST(FaultsTest, FsyncEioWithoutIoUringIsNeverAcknowledged) {
  ExpectLogSyncFailureStops("EIO", {FENCEPOST_WITHOUT_IO_URING});
}

// The fs: backend's disk fills up: the file's fsync fails with ENOSPC (as
// ext4 reports a full disk for delayed allocation), injected with strace on
// the 3rd fsync (LMDB itself uses fdatasync). The write gets 507 disk-full,
// the old file is intact, no temp file is left, and the server carries on.
TEST(FaultsTest, FsBackendDiskFullIs507AndLeavesTheOldFile) {
  if (!HaveStrace())
    FAIL() << "strace is not installed; scripts/deps.sh installs it";
  TempDir dir;
  const std::string data = dir / "data";
  const std::string store = dir / "store";
  { ServerProcess first(data, {"--backend", "fs:" + store}); }
  // strace counts `when=3` per thread: with one file-system worker (the test
  // build's switch) the 3rd fsync of that worker is the second PUT's file.
  ServerProcess server(
      data, {"--backend", "fs:" + store}, {"FENCEPOST_TEST_FS_THREADS=1"},
      {"strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync", "-e",
       "inject=fsync:error=ENOSPC:when=3"});
  const auto port = server.data_port();
  ASSERT_EQ(Fetch(port, "PUT", "/full", {{"Fencing-Token", "1"}}, "old").status,
            201);  // fsync 1 (file) and 2 (directory)
  auto full = Fetch(port, "PUT", "/full", {{"Fencing-Token", "2"}},
                    std::string(100000, 'n'));
  EXPECT_EQ(full.status, 507);
  EXPECT_NE(full.body.find("urn:fencepost:problem:disk-full"),
            std::string::npos);
  EXPECT_EQ(Fetch(port, "GET", "/full").body, "old");
  for (const auto& entry : std::filesystem::directory_iterator(store)) {
    EXPECT_EQ(entry.path().filename(), "full") << "a temp file was left";
  }
  EXPECT_EQ(Fetch(port, "PUT", "/full", {{"Fencing-Token", "3"}}, "new").status,
            200)
      << "the server carries on once there is room";
  EXPECT_EQ(Fetch(port, "GET", "/full").body, "new");
}

}  // namespace
}  // namespace fencepost
