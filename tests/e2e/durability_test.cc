// The order of events behind an acknowledgement: no 2xx to a write leaves
// the process before a sync of the write-ahead log that holds its record
// has returned. The data directory is on powercut_fs.py, whose journal
// records, with CLOCK_REALTIME nanoseconds, every write and every
// fsync/fdatasync the disk was asked for, whatever issued it (a syscall or
// an io_uring operation such as IORING_OP_FSYNC); strace records, with the
// same clock, the answers the server sends (sendmsg) and the fs: backend's
// value writes (write), which are syscalls, and the http:// backend's
// requests to its upstream. One client first, then many clients on two
// shards, where each answer (or value write, or forward upstream) is tied
// to the write that put its record in a log segment and to a sync of that
// segment that began after it.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/http_client.h"
#include "tests/testing/powercut_fs.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

using testing::FsEvent;
using testing::HttpClient;
using testing::PowercutFs;
using testing::PowercutFsOptions;
using testing::PowercutFsUnsupported;
using testing::ServerProcess;
using testing::TempDir;

// Why the test cannot run here, or "".
std::string Unsupported() {
  if (std::system("strace -V >/dev/null 2>&1") != 0) {
    return "strace is not installed; scripts/deps.sh installs it";
  }
  return PowercutFsUnsupported();
}

// strace, its timestamps on powercut_fs.py's clock (CLOCK_REALTIME, ns),
// writing to `trace` and tracing `calls`, then `more` of its flags.
std::vector<std::string> Strace(const std::string& trace,
                                const std::string& calls,
                                const std::vector<std::string>& more) {
  std::vector<std::string> argv = {
      "strace", "-f",  "-qq", "--timestamps=unix,ns",
      "-o",     trace, "-e",  "trace=" + calls};
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

// A system call strace saw begin: when (its entry, before what the call
// does), its name, and its line.
struct Call {
  std::int64_t ns = 0;
  std::string name;
  std::string line;
};

// Every call begun in `trace` ("1234  1796384379.087467673 sendmsg(..."),
// in order; the "<... resumed>" halves are left out.
std::vector<Call> ReadTrace(const std::string& trace) {
  static const std::regex kBegin(
      R"(^[0-9]+ +([0-9]+)\.([0-9]{9}) ([a-z0-9_]+)\()");
  std::vector<Call> calls;
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, kBegin)) continue;
    Call call;
    call.ns = std::stoll(m[1]) * 1'000'000'000 + std::stoll(m[2]);
    call.name = m[3];
    call.line = std::move(line);
    calls.push_back(std::move(call));
  }
  return calls;
}

bool IsLogSegment(const std::string& path) {
  static const std::regex kSegment(R"(/wal-[0-9]+$)");
  return std::regex_search(path, kSegment);
}

// A sync of a log segment that returned 0: the journal's index of its
// fsync-begin, and when its fsync-end was logged (before the file system
// replied, so before the server could learn of it).
struct Sync {
  std::size_t began = 0;
  std::int64_t ended_ns = 0;
};

// The successful syncs of each log segment, by path. Syncs of one file do
// not overlap (the kernel holds the inode's lock through a FUSE fsync); if
// they did, pairing each end with the earliest open begin would only make
// the check stricter.
std::map<std::string, std::vector<Sync>> LogSyncs(
    const std::vector<FsEvent>& journal) {
  std::map<std::string, std::vector<Sync>> syncs;
  std::map<std::string, std::deque<std::size_t>> open;
  for (std::size_t i = 0; i < journal.size(); ++i) {
    const FsEvent& e = journal[i];
    if (!IsLogSegment(e.path)) continue;
    if (e.kind == FsEvent::Kind::kFsyncBegin) {
      open[e.path].push_back(i);
    } else if (e.kind == FsEvent::Kind::kFsyncEnd && !open[e.path].empty()) {
      const std::size_t began = open[e.path].front();
      open[e.path].pop_front();
      if (e.result == "0") syncs[e.path].push_back({began, e.ns});
    }
  }
  return syncs;
}

TEST(DurabilityTest, EveryAcknowledgementFollowsItsLogSync) {
  if (const std::string why = Unsupported(); !why.empty()) FAIL() << why;
  TempDir dir;
  PowercutFsOptions options;
  options.journal = true;
  PowercutFs fs(dir / "fs", options);
  const std::string trace = dir / "trace";
  constexpr int kWrites = 40;
  {
    ServerProcess server(fs.mountpoint() + "/data", {}, {},
                         Strace(trace, "sendmsg", {"-s", "24"}));
    HttpClient client(server.data_port());
    for (int token = 1; token <= kWrites; ++token) {
      // One client, one write at a time: each is its own group and sync.
      ASSERT_EQ(client.Request("PUT", "/k" + std::to_string(token % 3),
                               {{"Fencing-Token", std::to_string(token)}}, "v")
                        .status /
                    100,
                2);
    }
  }
  // The n-th 2xx must be sent after the n-th successful sync of a log
  // segment had returned.
  std::vector<std::int64_t> synced;
  for (const auto& [path, syncs] : LogSyncs(fs.Journal())) {
    for (const Sync& s : syncs) synced.push_back(s.ended_ns);
  }
  std::sort(synced.begin(), synced.end());
  int answers = 0, early = 0;
  for (const Call& call : ReadTrace(trace)) {
    if (call.name != "sendmsg" ||
        call.line.find("HTTP/1.1 20") == std::string::npos) {
      continue;
    }
    ++answers;
    const auto before = std::lower_bound(synced.begin(), synced.end(), call.ns);
    if (before - synced.begin() < answers) ++early;
  }
  EXPECT_EQ(answers, kWrites) << "every answer was seen";
  EXPECT_GE(synced.size(), static_cast<std::size_t>(kWrites));
  EXPECT_EQ(early, 0) << "answers sent before their log sync returned";
}

// Where a write's record reached the disk: the log segment, and the
// journal's index of the last write that put bytes of the record's key
// there.
struct Logged {
  std::string file;
  std::size_t written = 0;
};

// The records of the keys "w<N>z" in the log segments the journal names,
// by N: each segment is read back whole through the mount, every key found
// in it is tied to the journal's last write covering its bytes.
std::map<int, Logged> LoggedKeys(const PowercutFs& fs,
                                 const std::vector<FsEvent>& journal) {
  std::map<std::string, std::vector<std::size_t>> writes;  // by segment
  for (std::size_t i = 0; i < journal.size(); ++i) {
    if (journal[i].kind == FsEvent::Kind::kWrite &&
        IsLogSegment(journal[i].path)) {
      writes[journal[i].path].push_back(i);
    }
  }
  std::map<int, Logged> logged;
  for (const auto& [path, indexes] : writes) {
    const std::string bytes = testing::ReadFile(fs.mountpoint() + path);
    auto digit = [&](std::size_t at) {
      return at < bytes.size() && bytes[at] >= '0' && bytes[at] <= '9';
    };
    for (std::size_t at = bytes.find('w'); at != std::string::npos;
         at = bytes.find('w', at + 1)) {
      std::size_t end = at + 1;
      while (digit(end) && end - at <= 6) ++end;
      if (end == at + 1 || end >= bytes.size() || bytes[end] != 'z') continue;
      ++end;
      for (auto i = indexes.rbegin(); i != indexes.rend(); ++i) {
        const FsEvent& w = journal[*i];
        if (w.offset < end && w.offset + w.length > at) {
          Logged& l = logged[std::stoi(bytes.substr(at + 1, end - at - 2))];
          l.written = std::max(l.written, *i);
          l.file = path;
          break;
        }
      }
    }
  }
  return logged;
}

// The journal's first lines about `file` from index `from` on, with a mark
// where `at_ns` falls among them.
std::string Excerpt(const std::vector<FsEvent>& journal,
                    const std::string& file, std::size_t from,
                    std::int64_t at_ns) {
  static const char* const kKinds[] = {"write", "fsync-begin", "fsync-end"};
  std::string text;
  bool marked = false;
  int shown = 0;
  for (std::size_t i = from; i < journal.size() && shown < 8; ++i) {
    const FsEvent& e = journal[i];
    if (e.path != file) continue;
    if (!marked && e.ns > at_ns) {
      text += "   (answered, or written, at " + std::to_string(at_ns) + ")\n";
      marked = true;
    }
    ++shown;
    text +=
        std::to_string(i) + ": " + std::to_string(e.ns) + " " +
        kKinds[static_cast<int>(e.kind)] +
        (e.kind == FsEvent::Kind::kWrite
             ? " " + std::to_string(e.offset) + " " + std::to_string(e.length)
             : " " + e.result) +
        "\n";
  }
  return text;
}

// What must follow the sync of a write's log record.
enum class After {
  kAnswer,      // its 2xx (sendmsg)
  kValueWrite,  // the fs: backend's write of its value into the store
  kForward,     // the http:// backend's PUT to its upstream
};

// When each write's `after` began (strace's entry), by token: the answer
// carrying Fencing-Token N, the write() of the body "v<N>q", or the first
// send of the request line "PUT /w<N>z HTTP/1.1" to the upstream.
std::map<int, std::int64_t> Followers(After after, const std::string& trace) {
  const std::regex token(R"(Fencing-Token: ([0-9]+)\\r\\n)");
  const std::regex value(R"(^write\([0-9]+<[^>]*>, "v([0-9]{1,6})q")");
  // One buffer, or (sendmsg) the method, target and version in iovecs.
  const std::regex forward(
      R"("PUT(?:", iov_len=[0-9]+\}, \{iov_base=")? /w([0-9]{1,6})z)"
      R"((?:", iov_len=[0-9]+\}, \{iov_base=")? HTTP/1\.1\\r\\n)");
  std::map<int, std::int64_t> at;
  for (const Call& call : ReadTrace(trace)) {
    std::smatch m;
    const std::string from_name = call.line.substr(call.line.find(call.name));
    bool found = false;
    switch (after) {
      case After::kAnswer:
        found = call.name == "sendmsg" &&
                call.line.find("HTTP/1.1 20") != std::string::npos &&
                std::regex_search(call.line, m, token);
        break;
      case After::kValueWrite:
        found = call.name == "write" && std::regex_search(from_name, m, value);
        break;
      case After::kForward:
        found = std::regex_search(from_name, m, forward);
        break;
    }
    if (found) at.emplace(std::stoi(m[1]), call.ns);
  }
  return at;
}

// Many clients on two shards, each write to its own key "w<N>z" with token
// N and body "v<N>q"; the journal and the trace tie each write's record
// (the write that put it in a log segment) to `after` and ask for a sync of
// the record's log segment that began after the record was written and
// returned before that. Returns the writes without one, each reported when
// `report` (the negative controls expect some).
//
// A negative control passes `slow_syncs`: the file system delays every sync
// of the log by 20 ms, so what the broken build sends ahead of its sync is
// sure to leave before the sync returns. With `without_io_uring` the server
// runs where io_uring is forbidden (tests/testing/without_io_uring.cc), and
// must say it syncs on its event loop instead.
int WritesAheadOfTheirSync(After after, const std::vector<std::string>& args,
                           const std::vector<std::string>& env, bool report,
                           bool slow_syncs = false,
                           bool without_io_uring = false) {
  if (const std::string why = Unsupported(); !why.empty()) {
    ADD_FAILURE() << why;
    return 0;
  }
  TempDir dir;
  PowercutFsOptions options;
  options.journal = true;
  PowercutFs fs(dir / "fs", options);
  if (slow_syncs) fs.Control("delay */wal-* 20\n");
  const std::string trace = dir / "trace";
  constexpr int kClients = 8;
  constexpr int kWritesEach = 30;
  {
    std::vector<std::string> all = {"--lmdb-shards", "2"};
    all.insert(all.end(), args.begin(), args.end());
    // -x: bytes that are not printable appear as \xNN; -y names a write's
    // file.
    std::vector<std::string> wrapper = Strace(
        trace, "sendmsg,sendto,write,writev", {"-y", "-x", "-s", "65536"});
    if (without_io_uring) wrapper.push_back(FENCEPOST_WITHOUT_IO_URING);
    ServerProcess server(fs.mountpoint() + "/data", all, env, wrapper);
    std::atomic<int> next{1};
    std::vector<std::thread> clients;
    std::atomic<int> failed{0};
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&] {
        HttpClient client(server.data_port());
        for (int i = 0; i < kWritesEach; ++i) {
          // One key per write, named by its token: "w<N>z" is found in the
          // record, and Fencing-Token: N in the answer.
          const int token = next++;
          const auto r =
              client.Request("PUT", "/w" + std::to_string(token) + "z",
                             {{"Fencing-Token", std::to_string(token)}},
                             "v" + std::to_string(token) + "q");
          if (r.status / 100 != 2) ++failed;
        }
      });
    }
    for (auto& c : clients) c.join();
    EXPECT_EQ(failed, 0);
    if (without_io_uring) {
      EXPECT_NE(server.Log().find("io_uring is not available"),
                std::string::npos)
          << server.Log();
    }
  }

  const std::vector<FsEvent> journal = fs.Journal();
  const auto syncs = LogSyncs(journal);
  const auto logged = LoggedKeys(fs, journal);
  int answered = 0, early = 0;
  std::set<std::string> files;
  for (const auto& [n, followed_at] : Followers(after, trace)) {
    ++answered;
    const auto record = logged.find(n);
    if (record == logged.end()) {
      ADD_FAILURE() << "no record of token " << n << " reached the log";
      return 0;
    }
    const Logged& l = record->second;
    files.insert(l.file);
    bool synced = false;
    if (const auto it = syncs.find(l.file); it != syncs.end()) {
      for (const Sync& s : it->second) {
        synced |= s.began > l.written && s.ended_ns < followed_at;
      }
    }
    if (!synced) {
      ++early;
      if (!report) continue;
      ADD_FAILURE() << "token " << n
                    << " was answered (or its value written) at " << followed_at
                    << " with no sync of " << l.file
                    << " begun after its record was written (journal line "
                    << l.written << ") and returned before; the journal:\n"
                    << Excerpt(journal, l.file, l.written, followed_at);
    }
  }
  EXPECT_EQ(answered, kClients * kWritesEach) << "every write was seen";
  EXPECT_GE(files.size(), 2u) << "records went to both shards' logs";
  return early;
}

TEST(DurabilityTest, UnderManyClientsEachAnswerFollowsTheSyncOfItsRecord) {
  EXPECT_EQ(WritesAheadOfTheirSync(After::kAnswer, {}, {}, true), 0);
}

// The fs: backend writes a value only once its fence is durable: a crash
// after the value reached the store cannot leave a fence below it.
TEST(DurabilityTest, TheFsBackendWritesEachValueAfterItsFencesSync) {
  TempDir store;
  EXPECT_EQ(WritesAheadOfTheirSync(After::kValueWrite,
                                   {"--backend", "fs:" + (store / "store")}, {},
                                   true),
            0);
}

// In a container that forbids io_uring (Docker's default seccomp profile),
// the server syncs the log on its event loop, and the order holds. (The
// checker is the one the negative controls below prove; a switch that
// answers early cannot show here, since the thread that would send the
// answer is inside the sync until it returns.)
TEST(DurabilityTest, WithoutIoUringEachAnswerStillFollowsItsSync) {
  EXPECT_EQ(WritesAheadOfTheirSync(After::kAnswer, {}, {}, true, false, true),
            0);
}

// The negative controls: the test build's switch that answers before the
// log's sync (fencepost_test_switches only) must be seen, or the checks
// above prove nothing.
TEST(DurabilityTest, AnAnswerBeforeItsSyncIsCaught) {
  EXPECT_GT(WritesAheadOfTheirSync(After::kAnswer, {},
                                   {"FENCEPOST_TEST_ANSWER_BEFORE_SYNC=1"},
                                   false, true),
            0);
}

// The http:// backend forwards a write upstream only once its fence's
// record is durable: a power cut after the forward cannot leave the
// upstream's value above a fence that went back.
TEST(DurabilityTest, TheHttpBackendForwardsEachWriteAfterItsFencesSync) {
  testing::FakeUpstream upstream;
  EXPECT_EQ(
      WritesAheadOfTheirSync(
          After::kForward,
          {"--backend", "http://127.0.0.1:" + std::to_string(upstream.port())},
          {}, true),
      0);
}

TEST(DurabilityTest, AForwardBeforeItsFencesSyncIsCaught) {
  testing::FakeUpstream upstream;
  EXPECT_GT(
      WritesAheadOfTheirSync(
          After::kForward,
          {"--backend", "http://127.0.0.1:" + std::to_string(upstream.port())},
          {"FENCEPOST_TEST_ANSWER_BEFORE_SYNC=1"}, false, true),
      0);
}

TEST(DurabilityTest, AValueWrittenBeforeItsFencesSyncIsCaught) {
  TempDir store;
  EXPECT_GT(WritesAheadOfTheirSync(
                After::kValueWrite, {"--backend", "fs:" + (store / "store")},
                {"FENCEPOST_TEST_ANSWER_BEFORE_SYNC=1"}, false, true),
            0);
}

}  // namespace
}  // namespace fencepost
