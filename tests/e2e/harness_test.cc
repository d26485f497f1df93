// The harness's own promises: a sanitizer's report in a server's output is
// found, a server that exits without the harness's word fails the test that
// ran it, and a server under test reads no FENCEPOST_* variable the test
// did not give it.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/powercut_fs.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::PowercutFs;
using testing::PowercutFsUnsupported;
using testing::SanitizerReport;
using testing::ServerProcess;
using testing::TempDir;

TEST(HarnessTest, FindsEverySanitizersReport) {
  for (const std::string report :
       {"==7==ERROR: AddressSanitizer: heap-use-after-free on address",
        "==7==ERROR: LeakSanitizer: detected memory leaks",
        "WARNING: ThreadSanitizer: data race (pid=7)",
        "fence/wal.cc:12:5: runtime error: signed integer overflow",
        "==7==ERROR: UndefinedBehaviorSanitizer: SEGV on unknown address"}) {
    const std::string output =
        "info listening data=127.0.0.1:1\n" + report + "\n    #0 0x1 in main\n";
    EXPECT_NE(SanitizerReport(output).find(report), std::string::npos)
        << report;
  }
}

TEST(HarnessTest, ACleanLogHasNoReport) {
  EXPECT_EQ(SanitizerReport("info listening data=127.0.0.1:1\n"
                            "info stopping: SIGTERM\n"),
            "");
}

// Waits (at most 15 s) until `pid` has exited and waits to be reaped.
bool AwaitZombie(pid_t pid) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close != std::string::npos && line.compare(close, 4, ") Z ") == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(HarnessTest, AServerKilledFromOutsideFailsKill) {
  TempDir dir;
  ServerProcess server(dir / "data");
  ASSERT_EQ(::kill(server.pid(), SIGKILL), 0);  // not the harness's word
  ASSERT_TRUE(AwaitZombie(server.pid()));
  EXPECT_NONFATAL_FAILURE(server.Kill(), "exited by itself (status 137");
}

TEST(HarnessTest, AServerThatExitedByItselfFailsItsDestruction) {
  TempDir dir;
  auto server = std::make_unique<ServerProcess>(dir / "data");
  ASSERT_EQ(::kill(server->pid(), SIGTERM), 0);  // not the harness's word
  ASSERT_TRUE(AwaitZombie(server->pid()));
  EXPECT_NONFATAL_FAILURE(server.reset(), "exited by itself (status 0");
}

// The process aborts on its own: the log's sync fails (powercut_fs.py fails
// every sync of the log from the 2nd on with EIO) and the process stops, as
// it must. Its log's tail, with the "stopping" line, is in the failure.
TEST(HarnessTest, AServerThatAbortsUnderLoadFailsKill) {
  if (const std::string why = PowercutFsUnsupported(); !why.empty()) {
    FAIL() << why;
  }
  TempDir dir;
  PowercutFs fs(dir / "fs");
  const std::string data = fs.mountpoint() + "/data";
  { ServerProcess first(data); }
  fs.FailSyncs("*/shard-0/wal-0", 2, "EIO");
  ServerProcess server(data);
  for (int token = 1; token <= 10; ++token) {
    try {
      Fetch(server.data_port(), "PUT", "/k",
            {{"Fencing-Token", std::to_string(token)}}, "v");
    } catch (const std::exception&) {
      break;  // it stopped mid-request
    }
  }
  ASSERT_TRUE(AwaitZombie(server.pid()));
  EXPECT_NONFATAL_FAILURE(server.Kill(), "stopping: the write-ahead log sync");
}

TEST(HarnessTest, KillAtTheHarnesssWordPasses) {
  TempDir dir;
  ServerProcess server(dir / "data");
  server.Kill();
  ServerProcess again(dir / "data");
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(), 0);
}

// FENCEPOST_MODE=observe in the tests' environment (a shell's leftover)
// would make every server apply stale writes; the harness clears it.
TEST(HarnessTest, ServersDoNotInheritFencepostVariables) {
  ASSERT_EQ(::setenv("FENCEPOST_MODE", "observe", 1), 0);
  struct Unset {
    ~Unset() { ::unsetenv("FENCEPOST_MODE"); }
  } unset;
  TempDir dir;
  ServerProcess server(dir / "data");
  ASSERT_EQ(
      Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", "5"}}, "new")
          .status,
      201);
  EXPECT_EQ(
      Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", "4"}}, "stale")
          .status,
      409)
      << "the server read FENCEPOST_MODE=observe from the tests' environment";
  // What the test gives it still reaches it.
  ServerProcess observing(dir / "other", {}, {"FENCEPOST_MODE=observe"});
  ASSERT_EQ(
      Fetch(observing.data_port(), "PUT", "/k", {{"Fencing-Token", "5"}}, "new")
          .status,
      201);
  EXPECT_EQ(Fetch(observing.data_port(), "PUT", "/k", {{"Fencing-Token", "4"}},
                  "stale")
                    .status /
                100,
            2);
}

// FreePort never hands out one port twice (an etcd cluster given one port
// for two members does not start): 500 ports of the ~22,000 outside the
// ephemeral range, where random picks alone repeat one almost every time.
TEST(HarnessTest, FreePortNeverHandsOutAPortTwice) {
  std::set<std::uint16_t> ports;
  for (int i = 0; i < 500; ++i) {
    const std::uint16_t port = testing::FreePort();
    EXPECT_TRUE(ports.insert(port).second) << "port " << port << " twice";
  }
}

}  // namespace
}  // namespace fencepost
