// Flags end to end: --idle-timeout closes idle connections and only those;
// --lmdb-shards spreads fences over environments and keeps them across a
// restart.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::HttpClient;
using testing::ServerProcess;
using testing::TempDir;
using namespace std::chrono_literals;

TEST(IdleTimeoutTest, AnIdleConnectionIsClosedAfterTheTimeout) {
  TempDir dir;
  ServerProcess server(dir / "data", {"--idle-timeout", "2"});
  HttpClient idle(server.data_port());
  ASSERT_EQ(idle.Request("GET", "/k").status, 404);
  // Idle for a quarter of the timeout, the connection still serves.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(idle.Request("GET", "/k").status, 404)
      << "closed well before the timeout";
  EXPECT_TRUE(idle.ClosedByPeer(15)) << "an idle connection was kept open";
  HttpClient never_asked(server.data_port());
  EXPECT_TRUE(never_asked.ClosedByPeer(15))
      << "a connection that never sent a byte is idle too";
}

// A connection in use outlives the idle timeout: one that keeps sending
// requests closer together than the timeout, and one whose request is being
// answered for longer than it (a write the upstream holds 3 s).
TEST(IdleTimeoutTest, ABusyConnectionIsNotClosed) {
  TempDir dir;
  testing::FakeUpstream upstream(3000ms);
  ServerProcess server(
      dir / "data",
      {"--idle-timeout", "1", "--upstream-timeout", "20", "--backend",
       "http://127.0.0.1:" + std::to_string(upstream.port())});
  HttpClient chatty(server.data_port());
  HttpClient waiting(server.data_port());
  waiting.Send(
      "PUT /slow HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Content-Length: 7\r\n\r\nstall:s");
  const auto until = std::chrono::steady_clock::now() + 3s;
  int served = 0;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(
        chatty.Request("PUT", "/chat",
                       {{"Fencing-Token", std::to_string(served + 1)}}, "c")
                .status /
            100,
        2)
        << "after " << served << " requests";
    ++served;
    std::this_thread::sleep_for(250ms);
  }
  const auto answer = waiting.ReadResponse();
  EXPECT_EQ(answer.status, 201) << "the request being answered was cut off";
  EXPECT_EQ(upstream.Value("/slow"), "stall:s");
  EXPECT_TRUE(waiting.ClosedByPeer(15)) << "idle again, it is closed";
}

// mdb_stat's entry count of the fences database in `env_dir`; -1 on error.
long FenceEntries(const std::string& env_dir) {
  const std::string command = "mdb_stat -s fences " + env_dir + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  long entries = -1;
  char line[256];
  while (fgets(line, sizeof line, pipe) != nullptr) {
    std::sscanf(line, " Entries: %ld", &entries);
  }
  return pclose(pipe) == 0 ? entries : -1;
}

TEST(LmdbShardsTest, ManyKeysAcrossShardsSurviveARestartWithTheirFences) {
  TempDir dir;
  constexpr int kKeys = 64, kShards = 4;
  auto token_of = [](int i) { return std::to_string(100 + i); };
  {
    ServerProcess server(dir / "data",
                         {"--lmdb-shards", std::to_string(kShards)});
    HttpClient client(server.data_port());
    for (int i = 0; i < kKeys; ++i) {
      ASSERT_EQ(client
                    .Request("PUT", "/s/" + std::to_string(i),
                             {{"Fencing-Token", token_of(i)}},
                             "value " + std::to_string(i))
                    .status,
                201)
          << i;
    }
    server.Signal(SIGTERM);
    ASSERT_EQ(server.Wait(), 0);
  }
  long total = 0;
  for (int s = 0; s < kShards; ++s) {
    const std::string env = dir / ("data/shard-" + std::to_string(s));
    const long entries = FenceEntries(env);
    EXPECT_GT(entries, 0) << env << " holds no fence";
    total += entries;
  }
  EXPECT_EQ(total, kKeys) << "each fence in exactly one shard";
  EXPECT_FALSE(std::filesystem::exists(dir / "data/shard-4"));

  // The directory's own count wins over the flag of a later start.
  ServerProcess again(dir / "data", {"--lmdb-shards", "1"});
  HttpClient client(again.data_port());
  HttpClient admin(again.admin_port());
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "s/" + std::to_string(i);
    auto value = client.Request("GET", "/" + key);
    EXPECT_EQ(value.status, 200) << key;
    EXPECT_EQ(value.body, "value " + std::to_string(i)) << key;
    EXPECT_EQ(value.header("fencing-token"), token_of(i)) << key;
    auto fence = admin.Request("GET", "/v1/fences/" + key);
    EXPECT_NE(fence.body.find("\"token\":" + token_of(i) + ","),
              std::string::npos)
        << fence.body;
    EXPECT_EQ(
        client.Request("PUT", "/" + key, {{"Fencing-Token", "99"}}, "stale")
            .status,
        409)
        << key << ": its own fence, not another key's";
  }
}

}  // namespace
}  // namespace fencepost
