// The power-cut test: the crash loop's load (concurrent fenced PUTs, DELETEs
// and bumps with increasing and stale tokens, and reads of the same keys'
// values and fences, checked with history.h) on two shards, but the data
// directory is on tests/reliability/powercut_fs.py, a FUSE file system that
// keeps every write in memory until its file is fsync'ed (or fdatasync'ed, or
// written through an O_DSYNC descriptor) and drops every unsynced write, in
// every file, on SIGUSR1. Each cycle SIGKILLs the server, cuts the power,
// restarts the server on the same mount and checks the whole history so far
// against what it reads back.
//
// What it models: the machine loses power right after the process dies.
// Whatever the log, data.mdb or lock.mdb held only in the page cache is gone,
// so an answer sent before the sync that makes it durable shows up as a lost
// write (kill -9 alone keeps the page cache and cannot see that).
//
// What it does not model (see the top of powercut_fs.py): metadata (create,
// rename, unlink, truncate) is durable at once, so a missing directory fsync
// goes unseen; a cut drops all of a file's unsynced writes, never a part (no
// torn or reordered writes, no corrupt sectors); the cut comes after the
// kill, never in the middle of a write or a sync; dirty mmap pages the kernel
// has not written back yet are not dropped; and the disk under the mount is
// the host's file system, trusted once os.fsync returns.
//
// Needs /dev/fuse, root (or fusermount), Debian's python3-fusepy and fuse
// (libfuse2); it fails without them (deps.sh installs them). Cycles:
// FENCEPOST_POWERCUT_CYCLES (20 by default). FENCEPOST_POWERCUT_LYING_DISK=1
// mounts with --ignore-sync (fsync succeeds and syncs nothing), and
// FENCEPOST_POWERCUT_LYING_DISK=log with --ignore-log-syncs (only the log's
// group syncs are missing): the test must then fail, which shows that it
// sees a missing sync; with `log`, the history check is what fails.
// PowerLossTest.ALogThatDoesNotSyncIsCaught runs that `log` control in the
// test command, and FsBackendWritesSurvivePowerCuts the fs: backend.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/reliability/history.h"
#include "tests/reliability/load.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost::reliability {
namespace {

using testing::ChildProcess;
using testing::ReadFile;
using testing::ServerProcess;
using testing::TempDir;

constexpr int kThreads = 4;
// Readers GET the keys' values and fences while the writers run: a read
// must show nothing older than a write acknowledged before it was sent,
// and nothing that was never written (Checker::Add).
constexpr int kReaders = 2;
// Half the writes go to the first four keys.
const std::vector<std::string> kKeys = {
    "cut/a", "cut/b", "cut/c", "cut/d", "cut/e", "cut/f", "cut/g", "cut/h",
    "cut/i", "cut/j", "cut/k", "cut/l", "cut/m", "cut/n", "cut/o", "cut/p"};
constexpr std::size_t kHot = 4;
// Two logs and two LMDB environments: a cut must find each one's syncs.
const std::vector<std::string> kArgs = {"--lmdb-shards", "2"};

std::int64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int Cycles(int otherwise) {
  const char* text = std::getenv("FENCEPOST_POWERCUT_CYCLES");
  return text ? std::max(1, std::atoi(text)) : otherwise;
}

// "" (an honest disk), "1" (every sync ignored) or "log" (the log's).
std::string LyingDisk() {
  const char* text = std::getenv("FENCEPOST_POWERCUT_LYING_DISK");
  return text != nullptr ? text : "";
}

// Debian's python3-fusepy is installed for /usr/bin/python3, which may not be
// the python3 first on PATH.
std::string Python() {
  return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3"
                                                 : "python3";
}

// Why the test cannot run here, or "".
std::string Unsupported() {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) return "no usable /dev/fuse";
  const std::string probe =
      Python() + " -c 'from fusepy import FUSE' >/dev/null 2>&1 || " +
      Python() + " -c 'from fuse import FUSE' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    return "no fusepy for " + Python() +
           " (apt-get install -y python3-fusepy fuse)";
  }
  return "";
}

bool Mounted(const std::string& mountpoint) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    if (point == mountpoint &&
        line.find(" - fuse.powercut ") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// Detaches the mount when it goes out of scope, whatever state the file
// system is in (lazily, so a process still using it cannot keep it).
class Unmount {
 public:
  explicit Unmount(std::string mountpoint)
      : mountpoint_(std::move(mountpoint)) {}
  ~Unmount() {
    if (!Mounted(mountpoint_)) return;
    const std::string quiet = " '" + mountpoint_ + "' >/dev/null 2>&1";
    if (std::system(("fusermount -u -z" + quiet).c_str()) != 0) {
      const int status = std::system(("umount -l" + quiet).c_str());
      if (status != 0) std::cerr << "cannot unmount " << mountpoint_ << "\n";
    }
  }
  Unmount(const Unmount&) = delete;
  Unmount& operator=(const Unmount&) = delete;

 private:
  std::string mountpoint_;
};

// powercut_fs.py serving `root` on `mountpoint` (an existing, canonical
// path), its output in `log`. Unmounted, then stopped, on destruction, also
// when the constructor throws.
class PowercutFs {
 public:
  PowercutFs(const std::string& root, const std::string& mountpoint,
             const std::string& log, const std::string& lying)
      : log_(log),
        fs_(std::make_unique<ChildProcess>(Argv(root, mountpoint, lying), log)),
        unmount_(mountpoint) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (!Mounted(mountpoint)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("powercut_fs.py did not mount " + mountpoint +
                                 ": " + ReadFile(log_));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // The power cut (SIGUSR1): every unsynced write is dropped. Returns how
  // many were, once the file system has logged it.
  std::uint64_t Cut() {
    const std::string kLine = "powercut: dropped ";
    const auto cuts = [&] {
      const std::string log = ReadFile(log_);
      std::size_t n = 0;
      for (auto at = log.find(kLine); at != std::string::npos;
           at = log.find(kLine, at + 1)) {
        ++n;
      }
      return n;
    };
    const std::size_t before = cuts();
    if (::kill(fs_->pid(), SIGUSR1) != 0) {
      throw std::runtime_error("cannot signal powercut_fs.py");
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (cuts() == before) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("powercut_fs.py did not cut: " + Log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const std::string log = ReadFile(log_);
    return std::stoull(log.substr(log.rfind(kLine) + kLine.size()));
  }

  std::string Log() const { return ReadFile(log_); }

 private:
  static std::vector<std::string> Argv(const std::string& root,
                                       const std::string& mountpoint,
                                       const std::string& lying) {
    std::vector<std::string> argv = {Python(),
                                     std::string(FENCEPOST_SOURCE_DIR) +
                                         "/tests/reliability/powercut_fs.py"};
    if (lying == "1") argv.push_back("--ignore-sync");
    if (lying == "log") argv.push_back("--ignore-log-syncs");
    argv.push_back(root);
    argv.push_back(mountpoint);
    return argv;
  }

  std::string log_;
  std::unique_ptr<ChildProcess> fs_;  // destroyed after unmount_
  Unmount unmount_;
};

// The model itself: a closed but unsynced file loses its data in a cut, a
// synced one keeps it.
void ExpectTheCutDropsUnsyncedWrites(PowercutFs& fs, const std::string& mnt,
                                     bool lying) {
  const std::string synced = mnt + "/probe-synced";
  const std::string unsynced = mnt + "/probe-unsynced";
  const int fd =
      ::open(synced.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "kept", 4), 4);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
  { std::ofstream(unsynced) << "lost"; }  // closed (a FUSE flush), not synced
  ASSERT_EQ(ReadFile(unsynced), "lost");
  EXPECT_GE(fs.Cut(), 1u);
  if (!lying) {
    EXPECT_EQ(ReadFile(synced), "kept");
  }
  EXPECT_EQ(ReadFile(unsynced), "") << "an unsynced write survived the cut";
}

// One power-cut run: `cycles` of load, SIGKILL, cut and restart on a fresh
// mount, the writes to kKeys (and lease grants, and on LMDB batches) checked
// after each restart. Returns the violations; stops at the first cycle with
// any.
struct PowerCutRun {
  std::string lying;       // see LyingDisk
  bool fs_values = false;  // the fs: backend, its store on the same mount
  int cycles = 20;
};

std::vector<std::string> PowerCuts(const PowerCutRun& run) {
  // Like every tool-dependent test here, it fails rather than skip:
  // scripts/deps.sh installs fusepy, and this kind of machine has /dev/fuse.
  if (const std::string why = Unsupported(); !why.empty()) {
    ADD_FAILURE() << why;
    return {};
  }
  TempDir dir;
  std::filesystem::create_directories(dir / "root");
  std::filesystem::create_directories(dir / "mnt");
  const std::string mnt = std::filesystem::canonical(dir / "mnt").string();
  PowercutFs fs(dir / "root", mnt, dir / "powercut_fs.log", run.lying);
  ExpectTheCutDropsUnsyncedWrites(fs, mnt, run.lying == "1");
  if (::testing::Test::HasFatalFailure()) return {};

  const std::string data = mnt + "/data";
  std::vector<std::string> args = kArgs;
  args.insert(args.end(), {"--fence-scope", "pair/"});
  if (run.fs_values)
    args.insert(args.end(), {"--backend", "fs:" + mnt + "/store"});
  Load load(kKeys, kHot, kThreads);
  // Through this FUSE mount an open that races a rename of the same name
  // can fail with ENOENT (the high-level FUSE API finds files by path), which
  // a kernel file system never does: with the fs: backend's values on the
  // mount, a GET racing a PUT's rename would read a value as gone. There,
  // only fences are read.
  load.ReadAlong(kReaders, /*values=*/!run.fs_values);
  // Two leases named like written keys: a grant raises the key's fence.
  LeaseLoad leases({"cut/a", "cut/e", "cut-lease"});
  BatchLoad batch_load;
  Restarts restarts;
  std::size_t grants_added = 0;
  std::mt19937 rng(std::random_device{}());
  std::vector<std::string> found;
  std::uint64_t dropped = 0;
  std::int64_t load_ns = 0;
  auto started = std::chrono::steady_clock::now();
  auto server = std::make_unique<ServerProcess>(data, args);
  int cycle = 0;
  for (; cycle < run.cycles && found.empty(); ++cycle) {
    const std::size_t before = load.history().size();
    const std::int64_t began = Now();
    const std::size_t acked_before = load.acknowledged();
    load.Start(server->data_port(), server->admin_port());
    leases.Start(server->admin_port());
    if (!run.fs_values) batch_load.Start(server->data_port());
    // The cut lands at a random moment after the cycle's first
    // acknowledgement, as in the crash loop: every write is synced through
    // the FUSE mount, and a restarted server's first answers can take
    // longer than a short pause on a loaded machine.
    load.AwaitAcknowledgedAbove(acked_before, std::chrono::seconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
    // Still answering at the kill (see the crash loop).
    EXPECT_TRUE(load.AcknowledgesWithin(std::chrono::seconds(10)))
        << "cycle " << cycle << ": no write was acknowledged for 10 s while "
        << "the server lived";
    const auto killed = std::chrono::steady_clock::now();
    server->Kill();
    load.Stop();
    leases.Stop();
    batch_load.Stop();
    load_ns += Now() - began;
    for (const auto* lost : {&load.disconnects(), &leases.disconnects(),
                             &batch_load.disconnects()}) {
      for (const auto& line : DisconnectsWhileAlive(*lost, started, killed)) {
        ADD_FAILURE() << "cycle " << cycle << ": " << line;
      }
    }

    dropped += fs.Cut();  // the process is gone: now the power goes

    try {
      started = std::chrono::steady_clock::now();
      server = std::make_unique<ServerProcess>(data, args);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cycle " << cycle
                    << ": no restart after the cut: " << e.what()
                    << "\nfile system: " << fs.Log();
      return found;
    }
    found = leases.Recover(server->admin_port());
    const auto grants = leases.GrantsAsWrites(load.keys(), grants_added);
    grants_added = leases.grants().size();
    for (auto& v :
         restarts.Check(load.history(), ReadState(*server, load.keys()), grants,
                        load.reads())) {
      found.push_back(std::move(v));
    }
    for (auto& v : leases.Check(server->admin_port(), load.history())) {
      found.push_back(std::move(v));
    }
    for (auto& v : batch_load.Check(server->data_port())) {
      found.push_back(std::move(v));
    }
    for (auto& v : found) v = "cycle " + std::to_string(cycle) + ": " + v;
    EXPECT_GT(load.AcknowledgedSince(before), 0u)
        << "cycle " << cycle << " acknowledged nothing";
  }
  server.reset();  // off the mount before it is unmounted
  const std::size_t acked = load.AcknowledgedSince(0);
  std::cout << "power loss" << (run.fs_values ? " (fs:)" : "")
            << (run.lying.empty() ? "" : " on a lying disk (" + run.lying + ")")
            << ": " << cycle << " cuts, " << load.history().size()
            << " writes, " << load.reads().size() << " reads, " << acked
            << " acknowledged ("
            << (load_ns > 0 ? acked * 1'000'000'000ull /
                                  static_cast<std::uint64_t>(load_ns)
                            : 0)
            << "/s), " << leases.grants().size() << " lease grants, "
            << batch_load.acknowledged() << " batches, " << dropped
            << " unsynced writes dropped, " << found.size() << " violations\n";
  EXPECT_GT(acked, static_cast<std::size_t>(cycle)) << "the load ran";
  if (run.lying.empty()) {
    EXPECT_GT(load.AcknowledgedOf(Op::Kind::kDelete), 0u);
    EXPECT_GT(load.AcknowledgedOf(Op::Kind::kBump), 0u);
    EXPECT_GT(leases.grants().size(), 0u);
    std::size_t fence_reads = 0;
    for (const Read& r : load.reads()) {
      fence_reads += r.kind == Read::Kind::kFence;
    }
    EXPECT_GT(fence_reads, 0u);
    if (!run.fs_values) {
      EXPECT_GT(load.reads().size() - fence_reads, 0u) << "no value was read";
    }
    if (!run.fs_values) {
      EXPECT_GT(batch_load.acknowledged(), 0u);
    }
  }
  return found;
}

TEST(PowerLossTest, AcknowledgedWritesSurvivePowerCuts) {
  PowerCutRun run;
  run.lying = LyingDisk();
  run.cycles = Cycles(20);
  for (const auto& v : PowerCuts(run)) ADD_FAILURE() << v;
}

// The fs: backend with its values on the same file system: a fence raised
// for a value is durable before the value is written, and an acknowledged
// value survives the cut.
TEST(PowerLossTest, FsBackendWritesSurvivePowerCuts) {
  PowerCutRun run;
  run.fs_values = true;
  run.cycles = Cycles(8);
  for (const auto& v : PowerCuts(run)) ADD_FAILURE() << v;
}

// The negative control, run by the test command: with the log's syncs
// dropped (they succeed and sync nothing), the same check must find lost
// writes. A durability test never seen failing proves nothing.
TEST(PowerLossTest, ALogThatDoesNotSyncIsCaught) {
  PowerCutRun run;
  run.lying = "log";
  run.cycles = 20;  // the first cut nearly always finds a loss
  EXPECT_FALSE(PowerCuts(run).empty())
      << "the power cuts did not see the log's syncs missing";
}

// A failed log sync on a sync thread's shared group, not the committer's
// own sync (FaultsTest's one client at a time finds the committer idle, and
// the committer syncs its group itself then). The test build's
// FENCEPOST_TEST_SYNC_THREADS_ONLY leaves every sync to the sync threads,
// and sixteen writers keep groups overlapping; strace fails each thread's
// 5th and later fdatasync of the log with EIO without running it, so the
// failed group's bytes stay unsynced on this mount. The process must stop;
// after the power cut nothing acknowledged may be missing (a group answered
// despite its failed sync would be). strace's record shows the failed sync
// was on a thread that never wrote the log: a sync thread.
TEST(PowerLossTest, AFailedSyncOnASyncThreadIsNeverAcknowledged) {
  if (const std::string why = Unsupported(); !why.empty()) FAIL() << why;
  if (std::system("strace -V >/dev/null 2>&1") != 0) {
    FAIL() << "strace is not installed; scripts/deps.sh installs it";
  }
  TempDir dir;
  std::filesystem::create_directories(dir / "root");
  std::filesystem::create_directories(dir / "mnt");
  const std::string mnt = std::filesystem::canonical(dir / "mnt").string();
  PowercutFs fs(dir / "root", mnt, dir / "powercut_fs.log", "");
  const std::string data = mnt + "/data";
  const std::string trace = dir / "strace.log";
  Load load(kKeys, kHot, 16);
  {
    ServerProcess server(
        data, {}, {"FENCEPOST_TEST_SYNC_THREADS_ONLY=1"},
        {"strace", "-f", "-qq", "-o", trace, "-P", data + "/shard-0/wal-0",
         "-e", "trace=pwrite64,fdatasync", "-e",
         "inject=fdatasync:error=EIO:when=5+"});
    load.Start(server.data_port(), server.admin_port());
    const int status = server.Wait(20);
    load.Stop();
    EXPECT_NE(status, -1) << "the process carried on after its sync failed";
    EXPECT_NE(status, 0);
    EXPECT_NE(server.Log().find("stopping: the write-ahead log sync failed"),
              std::string::npos)
        << server.Log();
    if (status == -1) server.Kill();
  }
  fs.Cut();
  ServerProcess restarted(data);
  Restarts restarts;
  for (const auto& v :
       restarts.Check(load.history(), ReadState(restarted, load.keys()))) {
    ADD_FAILURE() << v;
  }
  EXPECT_GT(load.AcknowledgedSince(0), 0u) << "the load ran";

  // "1234  pwrite64(...", "1235  fdatasync(...) = -1 EIO (...) (INJECTED)".
  std::set<std::string> writers;
  std::string failed;
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);) {
    const std::string tid = line.substr(0, line.find(' '));
    if (line.find("pwrite64(") != std::string::npos) writers.insert(tid);
    if (failed.empty() && line.find("INJECTED") != std::string::npos) {
      failed = tid;
    }
  }
  ASSERT_FALSE(failed.empty()) << "strace injected no failure";
  EXPECT_EQ(writers.count(failed), 0u)
      << "the failed sync was on thread " << failed << ", which wrote the log";
}

}  // namespace
}  // namespace fencepost::reliability
