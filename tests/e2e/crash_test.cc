// SIGKILL in the middle of concurrent writes: nothing acknowledged is lost.

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::HttpClient;
using testing::ServerProcess;
using testing::TempDir;

TEST(CrashTest, NoAcknowledgedWriteLostAfterSigkill) {
  TempDir dir;
  constexpr int kThreads = 6, kCycles = 3;
  // Per key: the highest token acknowledged, and its body.
  std::map<std::string, std::pair<std::uint64_t, std::string>> acked;
  std::uint64_t next_token = 1;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    ServerProcess server(dir / "d");
    std::mutex mu;
    std::atomic<bool> stop = false;
    std::vector<std::thread> threads;
    std::atomic<std::uint64_t> token{next_token};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          HttpClient client(server.data_port());
          for (int i = 0; !stop; ++i) {
            const std::string key = "crash/" + std::to_string(t % 3);
            const std::uint64_t tok = token++;
            const std::string body = std::to_string(tok);
            auto r = client.Request("PUT", "/" + key, {{"Fencing-Token", body}},
                                    body);
            if (r.status / 100 == 2) {
              std::lock_guard lock(mu);
              auto& best = acked[key];
              if (tok >= best.first) best = {tok, body};
            }
          }
        } catch (const std::exception&) {
          // The server died under us: the write in flight was never acked.
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + 150 * cycle));
    server.Kill();
    stop = true;
    for (auto& t : threads) t.join();
    next_token = token;

    ServerProcess restarted(dir / "d");
    for (const auto& [key, best] : acked) {
      auto fence = Fetch(restarted.admin_port(), "GET", "/v1/fences/" + key);
      ASSERT_EQ(fence.status, 200) << key;
      const auto at = fence.body.find("\"token\":");
      const std::uint64_t token_on_disk =
          std::stoull(fence.body.substr(at + 8));
      EXPECT_GE(token_on_disk, best.first)
          << key << ": fence lower than an acknowledged token";
      auto value = Fetch(restarted.data_port(), "GET", "/" + key);
      EXPECT_GE(std::stoull(value.body), best.first)
          << key << ": acknowledged value lost";
      EXPECT_EQ(value.header("fencing-token"), value.body);
    }
  }
  EXPECT_EQ(acked.size(), 3u);
}

}  // namespace
}  // namespace fencepost
