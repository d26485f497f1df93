// The reliability harness: concurrent fenced writes to a few hot keys, with
// increasing and stale tokens, while the server is SIGKILLed at random
// moments and restarted; after every restart the whole history so far is
// checked against what the server holds (see history.h).
//
// Cycles: FENCEPOST_RELIABILITY_CYCLES (20 by default, as in the test
// command); the long run is
//   FENCEPOST_RELIABILITY_CYCLES=500 build-test/tests/reliability_test

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "tests/reliability/history.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::reliability {
namespace {

using testing::Fetch;
using testing::HttpClient;
using testing::ServerProcess;
using testing::TempDir;

constexpr int kThreads = 6;
// Three hot keys most writes go to, and a spread of others.
const std::vector<std::string> kKeys = [] {
  std::vector<std::string> keys = {"hot/a", "hot/b", "hot/c"};
  for (int i = 0; i < 24; ++i) keys.push_back("many/" + std::to_string(i));
  return keys;
}();

std::int64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int Cycles() {
  const char* text = std::getenv("FENCEPOST_RELIABILITY_CYCLES");
  return text ? std::max(1, std::atoi(text)) : 20;
}

std::optional<std::uint64_t> NumberAfter(const std::string& body,
                                         const std::string& field) {
  const auto at = body.find("\"" + field + "\":");
  if (at == std::string::npos) return std::nullopt;
  return std::stoull(body.substr(at + field.size() + 3));
}

std::map<std::string, KeyState> ReadState(const ServerProcess& server) {
  std::map<std::string, KeyState> state;
  for (const std::string& key : kKeys) {
    KeyState s;
    auto fence = Fetch(server.admin_port(), "GET", "/v1/fences/" + key);
    if (fence.status == 200) s.fence = NumberAfter(fence.body, "token").value();
    auto value = Fetch(server.data_port(), "GET", "/" + key);
    if (value.status == 200 && value.has("fencing-token")) {
      s.value = std::stoull(value.header("fencing-token"));
      s.body = value.body;
    }
    state[key] = s;
  }
  return state;
}

void CrashLoop(const std::vector<std::string>& args, const std::string& data) {
  const int cycles = Cycles();
  std::vector<Op> history;
  std::mutex mu;
  std::atomic<std::uint64_t> counter{100};
  std::mt19937 rng(std::random_device{}());
  auto server = std::make_unique<ServerProcess>(data, args);
  std::size_t acked = 0, violations = 0;
  std::map<std::string, std::uint64_t> floors;  // fences read back so far
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const std::size_t before = history.size();
    std::atomic<bool> stop = false;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t, seed = rng()] {
        std::mt19937 local(seed);
        try {
          HttpClient client(server->data_port());
          while (!stop) {
            Op op;
            op.key = local() % 2 ? kKeys[local() % 3]
                                 : kKeys[local() % kKeys.size()];
            const std::uint64_t fresh = counter++;
            op.token = local() % 5 == 0 ? fresh - 1 - local() % 30 : fresh;
            op.body = "value " + std::to_string(op.token) + " from " +
                      std::to_string(t);
            op.sent_ns = Now();
            std::size_t at;
            {
              std::lock_guard lock(mu);
              at = history.size();
              history.push_back(op);  // kUnknown until it is answered
            }
            auto r = client.Request(
                "PUT", "/" + op.key,
                {{"Fencing-Token", std::to_string(op.token)}}, op.body);
            std::lock_guard lock(mu);
            Op& done = history[at];
            done.acked_ns = Now();
            if (r.status / 100 == 2) {
              done.outcome = Op::Outcome::kAccepted;
            } else if (r.status == 409) {
              done.outcome = Op::Outcome::kRejected;
              done.current_token = NumberAfter(r.body, "current_token");
            } else {
              done.outcome = Op::Outcome::kError;
              done.status = r.status;
            }
          }
        } catch (const std::exception&) {
          // The server died under us: the write in flight stays unknown.
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + rng() % 270));
    server->Kill();
    stop = true;
    for (auto& thread : threads) thread.join();

    server = std::make_unique<ServerProcess>(data, args);
    const auto state = ReadState(*server);
    const auto found = Check(history, state, floors);
    violations += found.size();
    for (const auto& v : found) ADD_FAILURE() << "cycle " << cycle << ": " << v;
    if (!found.empty()) break;
    for (const auto& [key, s] : state)
      floors[key] = std::max(floors[key], s.fence);
    // Progress in every cycle, not only over the run.
    std::size_t acked_now = 0;
    for (std::size_t i = before; i < history.size(); ++i) {
      acked_now += history[i].outcome == Op::Outcome::kAccepted;
    }
    EXPECT_GT(acked_now, 0u) << "cycle " << cycle << " acknowledged nothing";
  }
  for (const Op& op : history) acked += op.outcome == Op::Outcome::kAccepted;
  std::cout << "reliability: " << cycles << " SIGKILL cycles, "
            << history.size() << " writes, " << acked << " acknowledged, "
            << violations << " violations\n";
  EXPECT_GT(acked, static_cast<std::size_t>(cycles)) << "the load ran";
}

TEST(CrashLoopTest, LmdbBackendNeverLosesAFence) {
  TempDir dir;
  CrashLoop({}, dir / "data");
}

TEST(CrashLoopTest, ShardedLmdbNeverLosesAFence) {
  TempDir dir;
  CrashLoop({"--lmdb-shards", "4"}, dir / "data");
}

TEST(CrashLoopTest, FsBackendNeverLosesAFence) {
  TempDir dir;
  CrashLoop({"--backend", "fs:" + (dir / "store")}, dir / "data");
}

}  // namespace
}  // namespace fencepost::reliability
