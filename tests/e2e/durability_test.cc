// The order of system calls behind an acknowledgement, watched with strace:
// no 2xx to a write leaves the process before the write-ahead log's sync
// that holds its record has returned. One client first, then many clients
// on two shards, where each answer is tied to the pwrite of its record and
// to a sync of that record's file that began after it.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::HttpClient;
using testing::ServerProcess;
using testing::TempDir;

TEST(DurabilityTest, EveryAcknowledgementFollowsItsLogSync) {
  if (std::system("strace -V >/dev/null 2>&1") != 0) {
    FAIL() << "strace is not installed; scripts/deps.sh installs it";
  }
  TempDir dir;
  const std::string trace = dir / "trace";
  constexpr int kWrites = 40;
  {
    ServerProcess server(dir / "data", {}, {},
                         {"strace", "-f", "-qq", "-y", "-s", "24", "-o", trace,
                          "-e", "trace=fdatasync,sendmsg"});
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
  // strace logs a syscall's end before anything it made possible: the
  // answer is sent only after the committer's sync returned and handed it
  // over. So, read in order, the n-th 2xx must come after the n-th
  // completed sync of a log segment.
  std::ifstream in(trace);
  std::map<std::string, bool> pending_log_sync;  // by thread id
  int syncs = 0, answers = 0, early = 0;
  auto succeeded = [](const std::string& line) {
    return line.size() >= 3 && line.compare(line.size() - 3, 3, "= 0") == 0;
  };
  for (std::string line; std::getline(in, line);) {
    const std::string pid = line.substr(0, line.find(' '));
    const bool log_file = line.find("/wal-") != std::string::npos;
    if (line.find("fdatasync(") != std::string::npos && log_file) {
      if (line.find("<unfinished ...>") != std::string::npos) {
        pending_log_sync[pid] = true;
      } else if (succeeded(line)) {
        ++syncs;
      }
    } else if (line.find("<... fdatasync resumed>") != std::string::npos &&
               pending_log_sync[pid]) {
      pending_log_sync[pid] = false;
      if (succeeded(line)) ++syncs;
    } else if (line.find("sendmsg(") != std::string::npos &&
               line.find("HTTP/1.1 20") != std::string::npos) {
      ++answers;
      if (syncs < answers) ++early;
    }
  }
  EXPECT_EQ(answers, kWrites) << "every answer was seen";
  EXPECT_GE(syncs, kWrites);
  EXPECT_EQ(early, 0) << "answers sent before their log sync returned";
}

// What the trace shows for one write: its record's pwrite, and its answer.
struct Traced {
  std::string file;          // the log segment its record went to
  std::size_t written = 0;   // the line where that pwrite returned
  std::size_t answered = 0;  // the line where its 2xx was sent
  bool seen_write = false;
  bool seen_answer = false;
};

// A finished fdatasync of a log segment: the lines where it began and
// returned.
struct Sync {
  std::size_t began = 0;
  std::size_t returned = 0;
};

// The bytes strace shows in a string argument, escapes undone (with -x, a
// string with any byte that is not ASCII is all \xNN).
std::string Unescape(const std::string& shown) {
  std::string bytes;
  for (std::size_t i = 0; i < shown.size(); ++i) {
    if (shown[i] != '\\' || i + 1 == shown.size()) {
      bytes += shown[i];
    } else if (shown[i + 1] == 'x' && i + 3 < shown.size()) {
      bytes +=
          static_cast<char>(std::stoi(shown.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      const char c = shown[++i];
      bytes += c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
    }
  }
  return bytes;
}

// Lines [from, to] of a trace, each cut to 160 characters.
std::string Excerpt(const std::vector<std::string>& lines, std::size_t from,
                    std::size_t to) {
  std::string text;
  for (std::size_t i = from; i <= to && i < lines.size(); ++i) {
    text += std::to_string(i) + ": " + lines[i].substr(0, 160) + "\n";
  }
  return text;
}

// What must follow the sync of a write's log record.
enum class After {
  kAnswer,      // its 2xx (sendmsg)
  kValueWrite,  // the fs: backend's write of its value into the store
};

// Many clients on two shards, each write to its own key "w<N>z" with token
// N and body "v<N>q"; the trace ties each write's record (its pwrite) to
// `after` (the answer carrying Fencing-Token N, or the write() of the body)
// and asks for a sync of the record's log segment that began after the
// record was written and returned before that. Returns the writes without
// one, each reported when `report` (the negative controls expect some).
//
// A negative control passes `slow_syncs`: strace delays every sync by 20 ms,
// so what the broken build sends ahead of its sync is sure to leave before
// the sync returns.
int WritesAheadOfTheirSync(After after, const std::vector<std::string>& args,
                           const std::vector<std::string>& env, bool report,
                           bool slow_syncs = false) {
  if (std::system("strace -V >/dev/null 2>&1") != 0) {
    ADD_FAILURE() << "strace is not installed; scripts/deps.sh installs it";
    return 0;
  }
  TempDir dir;
  const std::string trace = dir / "trace";
  constexpr int kClients = 8;
  constexpr int kWritesEach = 30;
  {
    // -x: bytes that are not printable appear as \xNN, so a key's
    // characters in a record are the key's own.
    std::vector<std::string> all = {"--lmdb-shards", "2"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<std::string> strace = {
        "strace", "-f", "-qq", "-y", "-x", "-s", "65536", "-o", trace, "-e",
        "trace=pwrite64,fdatasync,sendmsg,write"};
    if (slow_syncs) {
      strace.insert(strace.end(),
                    {"-e", "inject=fdatasync:delay_enter=20000"});
    }
    ServerProcess server(dir / "data", all, env, strace);
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
  }

  std::ifstream in(trace);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::regex key(R"(w([0-9]{1,6})z)");
  const std::regex token(R"(Fencing-Token: ([0-9]+)\\r\\n)");
  const std::regex value(R"(^[0-9]+ +write\([0-9]+<[^>]*>, "v([0-9]{1,6})q")");
  const std::regex file(R"(<([^<>]*/wal-[0-9]+)>)");
  std::map<int, Traced> writes;
  std::map<std::string, std::vector<Sync>> syncs;  // by segment
  // Calls split by another thread's: what each began, by thread id.
  struct Pending {
    std::string call;
    std::string file;
    std::string args;
    std::size_t began = 0;
  };
  std::map<std::string, Pending> pending;
  // "... = 57", "<... fdatasync resumed>)     = 0", not "= -1 EIO (...)".
  auto ends_ok = [](const std::string& line) {
    const auto eq = line.rfind(" = ");
    return eq != std::string::npos && line.compare(eq + 3, 1, "-") != 0;
  };
  // A call that returned at line `at`, begun at line `began`.
  auto finished = [&](const Pending& call, std::size_t at, bool ok) {
    if (!ok || call.file.empty()) return;
    if (call.call == "fdatasync") {
      syncs[call.file].push_back({call.began, at});
    } else if (call.call == "pwrite64") {
      const std::string bytes = Unescape(call.args);
      for (std::sregex_iterator m(bytes.begin(), bytes.end(), key), e; m != e;
           ++m) {
        Traced& w = writes[std::stoi((*m)[1])];
        w.file = call.file;
        w.written = at;
        w.seen_write = true;
      }
    }
  };
  for (std::size_t at = 0; at < lines.size(); ++at) {
    const std::string& line = lines[at];
    const std::string pid = line.substr(0, line.find(' '));
    if (const auto resumed = line.find("<... "); resumed != std::string::npos) {
      auto it = pending.find(pid);
      if (it == pending.end()) continue;
      finished(it->second, at, ends_ok(line));
      pending.erase(it);
      continue;
    }
    const auto paren = line.find('(');
    if (paren == std::string::npos) continue;
    Pending call;
    // strace pads the thread id: "2806  pwrite64(...".
    const auto name = line.find_first_not_of(' ', pid.size());
    call.call = line.substr(name, paren - name);
    // The buffer argument: from the first quote to the last.
    const auto open = line.find('"');
    const auto close = line.rfind('"');
    if (open != std::string::npos && close > open) {
      call.args = line.substr(open + 1, close - open - 1);
    }
    call.began = at;
    std::smatch m;
    if (std::regex_search(line, m, file)) call.file = m[1];
    if (call.call == "sendmsg" || call.call == "write") {
      // The answer (the value) leaves during the call: its first line
      // counts.
      const bool found =
          after == After::kAnswer
              ? call.call == "sendmsg" &&
                    line.find("HTTP/1.1 20") != std::string::npos &&
                    std::regex_search(line, m, token)
              : std::regex_search(line, m, value);
      if (found) {
        Traced& w = writes[std::stoi(m[1])];
        w.answered = at;
        w.seen_answer = true;
      }
      continue;
    }
    if (line.find("<unfinished ...>") != std::string::npos) {
      pending[pid] = std::move(call);
    } else {
      finished(call, at, ends_ok(line));
    }
  }

  int answered = 0, early = 0;
  std::set<std::string> files;
  for (const auto& [n, w] : writes) {
    if (!w.seen_answer) continue;
    ++answered;
    if (!w.seen_write) {
      ADD_FAILURE() << "no record of token " << n << " was written:\n"
                    << Excerpt(lines, 0, w.answered);
      return 0;
    }
    files.insert(w.file);
    bool synced = false;
    for (const Sync& s : syncs[w.file]) {
      synced |= s.began > w.written && s.returned < w.answered;
    }
    if (!synced) {
      ++early;
      if (!report) continue;
      ADD_FAILURE() << "token " << n << " was answered (or its value written) on line " << w.answered
                    << " with no sync of " << w.file
                    << " begun after its record was written on line "
                    << w.written << " and returned before:\n"
                    << Excerpt(lines, w.written, w.answered);
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
                                   {"--backend", "fs:" + (store / "store")},
                                   {}, true),
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

TEST(DurabilityTest, AValueWrittenBeforeItsFencesSyncIsCaught) {
  TempDir store;
  EXPECT_GT(WritesAheadOfTheirSync(After::kValueWrite,
                                   {"--backend", "fs:" + (store / "store")},
                                   {"FENCEPOST_TEST_ANSWER_BEFORE_SYNC=1"},
                                   false, true),
            0);
}

}  // namespace
}  // namespace fencepost
