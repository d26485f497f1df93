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
// kill, never in the middle of a write or a sync; and the disk under the
// mount is the host's file system, trusted once os.fsync returns. Dirty mmap
// pages (LMDB's map, which its checkpoints write through) are dropped like
// unsynced writes: the cut writes them back to the file system first.
//
// Needs /dev/fuse, root (or fusermount), Debian's python3-fusepy and fuse
// (libfuse2); it fails without them (deps.sh installs them). Cycles:
// FENCEPOST_POWERCUT_CYCLES (20 by default). FENCEPOST_POWERCUT_LYING_DISK=1
// mounts with --ignore-sync (fsync succeeds and syncs nothing), and
// FENCEPOST_POWERCUT_LYING_DISK=log with --ignore-log-syncs (only the log's
// group syncs are missing): the test must then fail, which shows that it
// sees a missing sync; with `log`, the history check is what fails.
// PowerLossTest.ALogThatDoesNotSyncIsCaught runs that `log` control in the
// test command, FsBackendWritesSurvivePowerCuts the fs: backend,
// HttpBackendWritesSurvivePowerCuts the http:// backend (its upstream off
// the mount), S3BackendWritesSurvivePowerCuts the s3:// backend (a real Ceph
// RGW off the mount, testing::Rgw; FENCEPOST_POWERCUT_LYING_DISK applies to
// it too), and AcknowledgedWritesSurvivePowerCutsAcrossSegmentSwitches
// small log segments (the test build's FENCEPOST_TEST_SEGMENT_BYTES) with
// large values, the journal checked for a switch ahead of the sync of the
// segment left (testing::SwitchesAheadOfTheirSync).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
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
#include "tests/testing/powercut_fs.h"
#include "tests/testing/rgw.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost::reliability {
namespace {

using testing::PowercutFs;
using testing::PowercutFsUnsupported;
using testing::ReadFile;
using testing::Rgw;
using testing::ServerProcess;
using testing::TempDir;

constexpr int kThreads = 4;
constexpr int kSettleMs = 600;  // http:// and s3://: --upstream-settle
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

// The model itself: a closed but unsynced file loses its data in a cut, a
// synced one keeps it.
void ExpectTheCutDropsUnsyncedWrites(PowercutFs& fs, bool lying) {
  const std::string& mnt = fs.mountpoint();
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
  // A page of a synced file changed through a shared map, never synced
  // (as LMDB writes its pages): the page is lost, the file's synced bytes
  // stay.
  const std::string mapped = mnt + "/probe-mapped";
  const int mfd =
      ::open(mapped.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(mfd, 0);
  const std::string page(4096, 's');
  ASSERT_EQ(::write(mfd, page.data(), page.size()), 4096);
  ASSERT_EQ(::fsync(mfd), 0);
  void* map = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::memcpy(map, "lost", 4);
  ::munmap(map, 4096);
  ::close(mfd);
  EXPECT_GE(fs.Cut(), 1u);
  if (!lying) {
    EXPECT_EQ(ReadFile(synced), "kept");
    EXPECT_EQ(ReadFile(mapped), page) << "an unsynced mapped page survived";
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
  // The http:// backend in front of an upstream off the mount, which keeps
  // everything a cut drops: a write forwarded before its fence was durable
  // would show as a value above its fence.
  bool http_values = false;
  // The s3:// backend, its bucket in the process's shared RGW (off the
  // mount, under a prefix of its own), each object read back with the
  // independent client: no object may hold a token above its key's fence.
  bool s3_values = false;
  // Log segments this small (the test build's FENCEPOST_TEST_SEGMENT_BYTES;
  // 0: the product's), and a writer of large values to other keys, so the
  // log switches segments several times a cycle; the journal then shows
  // whether each switch waited for the sync of the segment left.
  std::size_t segment_bytes = 0;
  // The memory unapplied records may hold over both shards (the test
  // build's FENCEPOST_TEST_MAX_UNAPPLIED_BYTES; 0: the product's): small,
  // LMDB takes a checkpoint every few hundred writes, so cuts land during
  // checkpoints and the log's segments are reused behind them.
  std::size_t unapplied_bytes = 0;
  // The negative control: checkpoints committed without LMDB's syncs.
  bool checkpoint_without_sync = false;
  int cycles = 20;
};

// Large values to keys the history does not check, from two writers whose
// groups overlap, so the log goes round its segments and a switch comes
// while the previous group is being synced; only the load's keys are
// checked after a cut.
class Ballast {
 public:
  void Start(std::uint16_t port) {
    stop_ = false;
    acked_bytes_ = 0;
    for (int w = 0; w < 2; ++w) {
      threads_.emplace_back([this, port, w] {
        try {
          testing::HttpClient client(port);
          const std::string body(256u << 10, 'b');
          for (int i = 0; !stop_; ++i) {
            const auto r = client.Request(
                "PUT",
                "/ballast/" + std::to_string(w) + "/" + std::to_string(i % 4),
                {{"Fencing-Token", std::to_string(++token_)}}, body);
            if (r.status / 100 == 2) acked_bytes_ += body.size();
          }
        } catch (const std::exception&) {
          // The server was killed.
        }
      });
    }
  }
  // Waits (at most 30 s) until the writers have had `bytes` acknowledged
  // since Start: enough for the log to switch segments in this life,
  // however slow the machine.
  bool AwaitAcknowledgedBytes(std::size_t bytes) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (acked_bytes_ < bytes) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  ~Ballast() { Stop(); }

 private:
  std::atomic<bool> stop_ = false;
  std::atomic<std::uint64_t> token_ = 0;      // rises across restarts
  std::atomic<std::size_t> acked_bytes_ = 0;  // since Start
  std::vector<std::thread> threads_;
};

// The token in an object's x-amz-meta-fencing-token, if it has a number.
std::optional<std::uint64_t> MetadataToken(const testing::S3Object& object) {
  const auto it = object.metadata.find("fencing-token");
  if (it == object.metadata.end() || it->second.empty() ||
      it->second.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoull(it->second);
}

// What an s3:// fencepost holds for `keys`: each fence from its admin port,
// each value as the store holds it, read with the independent client (the
// object under `prefix`: its metadata's token and its bytes), not through
// fencepost. An object the Checker cannot take at face value (no token in
// its metadata, or one that is not its body's) or a key the store does not
// answer for adds a line to `found`.
std::map<std::string, KeyState> ReadS3State(
    std::uint16_t data_port, std::uint16_t admin_port, const Rgw& rgw,
    const std::string& prefix, const std::vector<std::string>& keys,
    std::vector<std::string>* found) {
  std::map<std::string, KeyState> state =
      ReadState(data_port, admin_port, keys);
  for (const std::string& key : keys) {
    KeyState& s = state[key];
    s.value.reset();
    s.body.clear();
    const testing::S3Object object = rgw.Get(prefix + key);
    if (object.status == 404) continue;
    if (object.status != 200) {
      found->push_back("the store answered " + std::to_string(object.status) +
                       " " + object.error + " for " + prefix + key);
      continue;
    }
    const auto token = MetadataToken(object);
    if (!token || TokenOfBody(object.body) != token) {
      found->push_back("object " + prefix + key + ": fencing-token '" +
                       (token ? std::to_string(*token) : "none") +
                       "' in its metadata, body '" + object.body + "'");
    }
    s.value = token.value_or(0);
    s.body = object.body;
  }
  return state;
}

std::vector<std::string> PowerCuts(const PowerCutRun& run) {
  // Like every tool-dependent test here, it fails rather than skip:
  // scripts/deps.sh installs fusepy, and this kind of machine has /dev/fuse.
  if (const std::string why = PowercutFsUnsupported(); !why.empty()) {
    ADD_FAILURE() << why;
    return {};
  }
  TempDir dir;
  testing::PowercutFsOptions options;
  options.lying = run.lying;
  options.journal = run.segment_bytes != 0;
  PowercutFs fs(dir.path(), options);
  const std::string& mnt = fs.mountpoint();
  ExpectTheCutDropsUnsyncedWrites(fs, run.lying == "1");
  if (::testing::Test::HasFatalFailure()) return {};
  // Syncs that take a while, so groups overlap and a segment switch that
  // did not wait for the sync of the segment left would show.
  if (run.segment_bytes != 0) fs.Control("delay */wal-* 5\n");

  const std::string data = mnt + "/data";
  std::vector<std::string> args = kArgs;
  args.insert(args.end(), {"--fence-scope", "pair/"});
  if (run.fs_values)
    args.insert(args.end(), {"--backend", "fs:" + mnt + "/store"});
  // Off the mount, outliving every kill and cut.
  std::optional<testing::FakeUpstream> upstream;
  if (run.http_values) {
    upstream.emplace();
    args.insert(
        args.end(),
        {"--backend", "http://127.0.0.1:" + std::to_string(upstream->port()),
         "--upstream-settle", std::to_string(kSettleMs / 1000.0)});
  }
  std::vector<std::string> env;
  // The process's RGW (started on first use), off the mount.
  Rgw* rgw = nullptr;
  std::string prefix;  // "cut.N/"
  if (run.s3_values) {
    try {
      rgw = &Rgw::Shared();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "no RGW: " << e.what();
      return {};
    }
    prefix = rgw->UniquePrefix("cut");
    args.insert(
        args.end(),
        {"--backend",
         "s3://" + rgw->bucket() + "/" + prefix.substr(0, prefix.size() - 1),
         "--s3-endpoint", rgw->endpoint(), "--upstream-settle",
         std::to_string(kSettleMs / 1000.0)});
    for (const std::string& var : rgw->Env()) env.push_back(var);
  }
  // Values kept elsewhere: fences held after an unclean start, no batches.
  const bool elsewhere = run.http_values || run.s3_values;
  if (run.segment_bytes != 0) {
    env.push_back("FENCEPOST_TEST_SEGMENT_BYTES=" +
                  std::to_string(run.segment_bytes));
  }
  if (run.unapplied_bytes != 0) {
    env.push_back("FENCEPOST_TEST_MAX_UNAPPLIED_BYTES=" +
                  std::to_string(run.unapplied_bytes));
  }
  if (run.checkpoint_without_sync) {
    env.push_back("FENCEPOST_TEST_CHECKPOINT_WITHOUT_SYNC=1");
  }
  const bool batches = !run.fs_values && !elsewhere;
  // s3://: half the keys, each read back with a boto3 process per cycle.
  Load load(run.s3_values
                ? std::vector<std::string>(kKeys.begin(), kKeys.begin() + 8)
                : kKeys,
            kHot, kThreads);
  if (elsewhere) {
    load.AcceptRelayed404OnDelete();
    load.ExpectHeldFences();
  }
  // Through this FUSE mount an open that races a rename of the same name
  // can fail with ENOENT (the high-level FUSE API finds files by path), which
  // a kernel file system never does: with the fs: backend's values on the
  // mount, a GET racing a PUT's rename would read a value as gone. There,
  // only fences are read.
  // Through http:// and s3://, values are the store's: only fences are
  // read.
  load.ReadAlong(kReaders, /*values=*/batches);
  // Two leases named like written keys: a grant raises the key's fence.
  LeaseLoad leases({"cut/a", "cut/e", "cut-lease"});
  BatchLoad batch_load;
  Ballast ballast;
  std::size_t life_began = 0;  // the journal's length at the server's start
  int switches = 0;
  Restarts restarts;
  std::size_t grants_added = 0;
  // s3://: restarts whose first PUT found the fences held (see below).
  std::size_t held_at_start = 0;
  std::mt19937 rng(std::random_device{}());
  std::vector<std::string> found;
  std::uint64_t dropped = 0;
  std::int64_t load_ns = 0;
  auto started = std::chrono::steady_clock::now();
  auto server = std::make_unique<ServerProcess>(data, args, env);
  int cycle = 0;
  for (; cycle < run.cycles && found.empty(); ++cycle) {
    const std::size_t before = load.history().size();
    const std::int64_t began = Now();
    const std::size_t acked_before = load.acknowledged();
    load.Start(server->data_port(), server->admin_port());
    leases.Start(server->admin_port());
    if (batches) batch_load.Start(server->data_port());
    if (run.segment_bytes != 0) ballast.Start(server->data_port());
    // The cut lands at a random moment after the cycle's first
    // acknowledgement, as in the crash loop: every write is synced through
    // the FUSE mount, and a restarted server's first answers can take
    // longer than a short pause on a loaded machine.
    load.AwaitAcknowledgedAbove(acked_before, std::chrono::seconds(20));
    // A switch in every life: a segment's worth of ballast acknowledged.
    if (run.segment_bytes != 0) {
      EXPECT_TRUE(ballast.AwaitAcknowledgedBytes(run.segment_bytes))
          << "cycle " << cycle << ": the ballast was not acknowledged";
    }
    // Through http:// and s3://, a start after a kill holds the fences for
    // the settle time (bumps go through): the cut lands once PUTs flow again.
    std::this_thread::sleep_for(std::chrono::milliseconds(
        100 + rng() % 400 + (elsewhere ? kSettleMs : 0)));
    // Still answering at the kill (see the crash loop).
    EXPECT_TRUE(load.AcknowledgesWithin(std::chrono::seconds(10)))
        << "cycle " << cycle << ": no write was acknowledged for 10 s while "
        << "the server lived";
    const auto killed = std::chrono::steady_clock::now();
    server->Kill();
    load.Stop();
    leases.Stop();
    batch_load.Stop();
    ballast.Stop();
    load_ns += Now() - began;
    for (const auto* lost : {&load.disconnects(), &leases.disconnects(),
                             &batch_load.disconnects()}) {
      for (const auto& line : DisconnectsWhileAlive(*lost, started, killed)) {
        ADD_FAILURE() << "cycle " << cycle << ": " << line;
      }
    }

    if (run.segment_bytes != 0) {
      const auto journal = fs.Journal();
      int seen = 0;
      for (auto& line : testing::SwitchesAheadOfTheirSync(
               journal, life_began, journal.size(), &seen)) {
        found.push_back(std::move(line));
      }
      switches += seen;
    }
    dropped += fs.Cut();  // the process is gone: now the power goes

    try {
      started = std::chrono::steady_clock::now();
      if (run.segment_bytes != 0) life_began = fs.Journal().size();
      server = std::make_unique<ServerProcess>(data, args, env);
    } catch (const std::exception& e) {
      found.push_back("cycle " + std::to_string(cycle) +
                      ": no restart after the cut: " + e.what() +
                      "\nfile system: " + fs.Log());
      return found;
    }
    if (run.s3_values) {
      // boto3 reads every object before the next load, so the hold is over
      // by then (the load sees no 503): a PUT to a key the checks leave
      // alone, right after the start, finds it.
      const auto r = testing::Fetch(
          server->data_port(), "PUT", "/held",
          {{"Fencing-Token", std::to_string(cycle + 1)}}, "probe");
      held_at_start +=
          r.status == 503 && r.body.find("fence-held") != std::string::npos;
    }
    found = leases.Recover(server->admin_port());
    const auto grants = leases.GrantsAsWrites(load.keys(), grants_added);
    grants_added = leases.grants().size();
    const auto state =
        run.s3_values ? ReadS3State(server->data_port(), server->admin_port(),
                                    *rgw, prefix, load.keys(), &found)
                      : ReadState(server->data_port(), server->admin_port(),
                                  load.keys(), run.http_values);
    for (auto& v :
         restarts.Check(load.history(), state, grants, load.reads())) {
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
            << (run.http_values ? " (http://)" : "")
            << (run.s3_values ? " (s3://)" : "")
            << (run.segment_bytes != 0
                    ? " (segments of " + std::to_string(run.segment_bytes) +
                          " bytes, " + std::to_string(switches) + " switches)"
                    : "")
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
    if (batches) {
      EXPECT_GT(load.reads().size() - fence_reads, 0u) << "no value was read";
      EXPECT_GT(batch_load.acknowledged(), 0u);
    }
    if (elsewhere) {
      // Every start after a kill held the fences for the settle time.
      EXPECT_GT(run.s3_values ? held_at_start : load.refused(), 0u);
    }
    if (run.segment_bytes != 0) {
      EXPECT_GT(switches, 0) << "the log never switched segments";
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

// The http:// backend, its upstream off the cut file system: a write is
// forwarded only once its fence is durable, so no value the upstream kept
// is above a fence a cut sent back.
TEST(PowerLossTest, HttpBackendWritesSurvivePowerCuts) {
  PowerCutRun run;
  run.http_values = true;
  run.cycles = Cycles(8);
  for (const auto& v : PowerCuts(run)) ADD_FAILURE() << v;
}

// The s3:// backend, its bucket in a real Ceph RGW off the cut file system
// (the process's shared cluster, started by this test only): the fence is
// durable before the PutObject, so after a cut no object, read back with
// boto3, holds a token above its key's fence, and no acknowledged write is
// lost. Four cycles on eight keys (a boto3 process reads each key after each
// cut). Seen failing with FENCEPOST_POWERCUT_LYING_DISK=log (the log's syncs
// succeed and sync nothing): objects above the fences the cut sent back, and
// fences below tokens they had shown. (A PutObject sent before its fence's
// sync, FENCEPOST_TEST_ANSWER_BEFORE_SYNC=1, goes unseen here, even with
// the log's syncs delayed: a sync the process began is answered before its
// kill is reaped, and the cut comes after.)
TEST(PowerLossTest, S3BackendWritesSurvivePowerCuts) {
  PowerCutRun run;
  run.s3_values = true;
  run.lying = LyingDisk();
  run.cycles = Cycles(4);
  for (const auto& v : PowerCuts(run)) ADD_FAILURE() << v;
}

// Small log segments (the test build's switch; Shards keeps them at least
// 2 MiB) and large values: the log switches segments in every cycle, a cut
// lands near switches, and the journal shows each switch after the sync of
// the segment left (recovery would read a gap otherwise).
TEST(PowerLossTest, AcknowledgedWritesSurvivePowerCutsAcrossSegmentSwitches) {
  PowerCutRun run;
  run.segment_bytes = 2u << 20;
  run.cycles = Cycles(8);
  for (const auto& v : PowerCuts(run)) ADD_FAILURE() << v;
}

// Checkpoints every few hundred writes and small log segments: cuts land
// while LMDB writes a checkpoint back and commits it, and the log's
// segments are reused (or grow) behind the checkpoints; nothing
// acknowledged may be lost, whichever state LMDB's files were cut in.
PowerCutRun AcrossCheckpoints() {
  PowerCutRun run;
  run.segment_bytes = 2u << 20;
  run.unapplied_bytes = 1u << 20;
  return run;
}

TEST(PowerLossTest, AcknowledgedWritesSurvivePowerCutsAcrossCheckpoints) {
  PowerCutRun run = AcrossCheckpoints();
  run.cycles = Cycles(8);
  for (const auto& v : PowerCuts(run)) ADD_FAILURE() << v;
}

// Its negative control, run by the test command: checkpoints committed
// without LMDB's syncs, while the log is reused as if they were durable,
// must be caught (a restart that finds the log's records gone, or lost
// writes).
TEST(PowerLossTest, ACheckpointThatDoesNotSyncIsCaught) {
  PowerCutRun run = AcrossCheckpoints();
  run.checkpoint_without_sync = true;
  run.cycles = 8;
  const auto found = PowerCuts(run);
  EXPECT_FALSE(found.empty())
      << "the power cuts did not see the checkpoints' syncs missing";
  if (!found.empty()) std::cout << "caught: " << found.front() << "\n";
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

// A failed log sync while groups overlap: sixteen writers keep the log busy,
// and the file system fails the 5th and every later sync of the log
// (fsync or fdatasync, a syscall or an io_uring operation alike) with EIO
// without syncing, so the failed groups' bytes stay unsynced on this mount.
// The process must stop; after the power cut nothing acknowledged may be
// missing (a group answered despite its failed sync would be).
TEST(PowerLossTest, AFailedLogSyncIsNeverAcknowledged) {
  if (const std::string why = PowercutFsUnsupported(); !why.empty()) {
    FAIL() << why;
  }
  TempDir dir;
  PowercutFs fs(dir.path());
  const std::string data = fs.mountpoint() + "/data";
  { ServerProcess first(data); }  // the segments' own syncs are not counted
  fs.FailSyncs("*/shard-0/wal-0", 5, "EIO");
  Load load(kKeys, kHot, 16);
  {
    ServerProcess server(data);
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
  EXPECT_NE(fs.Log().find("wal-0 failed with EIO (injected)"),
            std::string::npos)
      << fs.Log();
  fs.Cut();
  fs.Control("");
  ServerProcess restarted(data);
  Restarts restarts;
  for (const auto& v :
       restarts.Check(load.history(), ReadState(restarted, load.keys()))) {
    ADD_FAILURE() << v;
  }
  EXPECT_GT(load.AcknowledgedSince(0), 0u) << "the load ran";
}

}  // namespace
}  // namespace fencepost::reliability
