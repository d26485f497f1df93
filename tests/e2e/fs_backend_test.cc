// --backend fs:DIR end to end: the real binary, files on disk.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/testing/event_stream.h"
#include "tests/testing/http_client.h"
#include "tests/testing/long_poll.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

namespace fs = std::filesystem;
using testing::Fetch;
using testing::HttpClient;
using testing::MetricValue;
using testing::ServerProcess;
using testing::TempDir;

std::uint64_t FenceToken(std::uint16_t admin, const std::string& key) {
  auto fence = Fetch(admin, "GET", "/v1/fences/" + key);
  if (fence.status != 200) return 0;
  return std::stoull(fence.body.substr(fence.body.find("\"token\":") + 8));
}

class FsBackendTest : public ::testing::Test {
 protected:
  FsBackendTest() {
    fs::create_directories(outside_);
    std::ofstream(outside_ / "secret") << "outside";
  }
  std::vector<std::string> Args(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--backend", "fs:" + store_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  void ExpectOutsideUntouched() {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(outside_)) {
      names.push_back(entry.path().filename());
    }
    EXPECT_EQ(names, std::vector<std::string>{"secret"});
    EXPECT_EQ(testing::ReadFile(outside_ / "secret"), "outside");
    std::vector<std::string> top;
    for (const auto& entry : fs::directory_iterator(dir_.path())) {
      top.push_back(entry.path().filename());
    }
    std::sort(top.begin(), top.end());
    EXPECT_EQ(top, (std::vector<std::string>{"data", "outside", "store"}));
  }

  TempDir dir_;
  fs::path store_ = fs::path(dir_.path()) / "store";
  fs::path outside_ = fs::path(dir_.path()) / "outside";
  std::string data_ = dir_ / "data";
};

TEST_F(FsBackendTest, SeedStoryLandsInFiles) {
  ServerProcess server(data_, Args());
  const auto port = server.data_port();
  EXPECT_EQ(Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "from A")
                .status,
            201);
  EXPECT_EQ(Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "34"}}, "from B")
                .status,
            200);
  auto stale =
      Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "stale A");
  EXPECT_EQ(stale.status, 409);
  EXPECT_NE(stale.body.find("\"current_token\":34"), std::string::npos);
  EXPECT_EQ(testing::ReadFile(store_ / "orders" / "1"), "from B");

  auto get = Fetch(port, "GET", "/orders/1");
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "from B");
  EXPECT_EQ(get.header("fencing-token"), "34");
  auto head = Fetch(port, "HEAD", "/orders/1");
  EXPECT_EQ(head.header("content-length"), "6");

  EXPECT_EQ(
      Fetch(port, "DELETE", "/orders/1", {{"Fencing-Token", "35"}}).status,
      204);
  EXPECT_FALSE(fs::exists(store_ / "orders" / "1"));
  EXPECT_EQ(Fetch(port, "GET", "/orders/1").status, 404);
  EXPECT_EQ(FenceToken(server.admin_port(), "orders/1"), 35u);
  EXPECT_EQ(Fetch(port, "POST", "/orders/1", {{"Fencing-Token", "36"}}).status,
            405);
}

TEST_F(FsBackendTest, TraversalCorpusNeverLeavesTheDirectory) {
  fs::create_directories(store_);
  fs::create_directory_symlink(outside_, store_ / "link");
  fs::create_symlink(outside_ / "secret", store_ / "leaf");
  ServerProcess server(data_, Args());
  const std::vector<std::string> targets = {
      "/../outside/x",
      "/%2e%2e/outside/x",
      "/a/../../outside/x",
      "/%2E%2E%2Foutside",
      "/a/%2e%2e/%2e%2e/x",
      "/.%2e/x",
      "//outside/x",
      "/a%00b",
      "/%00",
      "/link/x",
      "/link/secret",
      "/leaf",
      "/link/..%2f..%2fx",
      "/./x",
      "/a/./b",
  };
  for (const std::string& target : targets) {
    for (const char* method : {"PUT", "GET", "DELETE"}) {
      HttpClient client(server.data_port());
      auto r = client.Raw(std::string(method) + " " + target +
                          " HTTP/1.1\r\nHost: t\r\nFencing-Token: 7\r\n"
                          "Content-Length: 4\r\n\r\nevil");
      EXPECT_EQ(r.status, 400) << method << " " << target;
    }
  }
  ExpectOutsideUntouched();
  EXPECT_TRUE(fs::is_symlink(store_ / "leaf"));
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/fences").body,
            "{\"fences\":[],\"next\":null}\n")
      << "a refused write changes no fence";
}

TEST_F(FsBackendTest, CollisionsAndLongSegmentsChangeNothing) {
  ServerProcess server(data_, Args());
  const auto port = server.data_port();
  ASSERT_EQ(Fetch(port, "PUT", "/x", {{"Fencing-Token", "1"}}, "file").status,
            201);
  auto collide = Fetch(port, "PUT", "/x/y", {{"Fencing-Token", "5"}}, "under");
  EXPECT_EQ(collide.status, 409);
  EXPECT_NE(collide.body.find("urn:fencepost:problem:key-collision"),
            std::string::npos);
  EXPECT_EQ(FenceToken(server.admin_port(), "x/y"), 0u) << "fence untouched";
  EXPECT_EQ(Fetch(port, "GET", "/x/y").status, 404);
  EXPECT_EQ(Fetch(port, "DELETE", "/x/y", {{"Fencing-Token", "6"}}).status,
            204);
  EXPECT_EQ(testing::ReadFile(store_ / "x"), "file");

  auto long_segment = Fetch(port, "PUT", "/" + std::string(256, 'a'),
                            {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(long_segment.status, 400);
  EXPECT_NE(long_segment.body.find("bad-key"), std::string::npos);
  auto metrics = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(
      MetricValue(metrics,
                  "fencepost_backend_errors_total{backend=\"fs\",code=\"\"}"),
      0)
      << "a refused key is the client's error, not the backend's";
  EXPECT_EQ(
      metrics.find("fencepost_backend_errors_total{backend=\"fs\",code=\"",
                   metrics.find("fencepost_backend_errors_total{") + 1),
      std::string::npos)
      << "no code of backend error at all";
}

TEST_F(FsBackendTest, ObserveModeStoresWhatEnforceWouldRejectAndCounts) {
  ServerProcess server(data_, Args({"--mode", "observe"}));
  const auto port = server.data_port();
  ASSERT_EQ(Fetch(port, "PUT", "/k", {{"Fencing-Token", "10"}}, "new").status,
            201);
  auto stale = Fetch(port, "PUT", "/k", {{"Fencing-Token", "5"}}, "old leader");
  EXPECT_EQ(stale.status, 200);
  EXPECT_EQ(stale.header("fencing-token"), "10") << "the fence's token";
  EXPECT_EQ(testing::ReadFile(store_ / "k"), "old leader");
  auto missing = Fetch(port, "PUT", "/k", {}, "no token");
  EXPECT_EQ(missing.status, 200);
  EXPECT_EQ(testing::ReadFile(store_ / "k"), "no token");
  EXPECT_EQ(FenceToken(server.admin_port(), "k"), 10u) << "never lowered";
  auto metrics = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "fencepost_writes_would_reject_total"), 2);
}

// SIGKILL while 64 KiB values are being replaced: every file left is one
// whole value, never lower than the last acknowledged write of its key, and
// never above its fence (the fence is durable first).
TEST_F(FsBackendTest, SigkillDuringWritesLeavesOnlyWholeFiles) {
  constexpr int kThreads = 4;
  constexpr std::size_t kSize = 64 * 1024;
  auto body_of = [](std::uint64_t token) {
    return std::string(kSize, static_cast<char>('a' + token % 26));
  };
  std::map<std::string, std::uint64_t> acked;
  std::mutex mu;
  std::atomic<std::uint64_t> next{1};
  {
    ServerProcess server(data_, Args());
    std::atomic<bool> stop = false;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          HttpClient client(server.data_port());
          const std::string key = "crash/" + std::to_string(t);
          while (!stop) {
            const std::uint64_t token = next++;
            auto r = client.Request("PUT", "/" + key,
                                    {{"Fencing-Token", std::to_string(token)}},
                                    body_of(token));
            if (r.status / 100 == 2) {
              std::lock_guard lock(mu);
              acked[key] = std::max(acked[key], token);
            }
          }
        } catch (const std::exception&) {
          // The server died: the write in flight was never acknowledged.
        }
      });
    }
    // Killed once every writer has had a write acknowledged and several
    // more have been sent (so some are in flight), not after a guessed while.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (bool ready = false;
         !ready && std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::lock_guard lock(mu);
      ready = acked.size() == static_cast<std::size_t>(kThreads) &&
              next > 4 * kThreads;
    }
    server.Kill();
    stop = true;
    for (auto& thread : threads) thread.join();
  }
  ASSERT_EQ(acked.size(), static_cast<std::size_t>(kThreads));
  ServerProcess restarted(data_, Args());
  for (const auto& [key, token] : acked) {
    const std::string content = testing::ReadFile(store_ / key);
    char text[32] = {};
    ASSERT_GT(::getxattr((store_ / key).c_str(), "user.fencepost.token", text,
                         sizeof text - 1),
              0)
        << key;
    const std::uint64_t on_disk = std::stoull(text);
    EXPECT_EQ(content, body_of(on_disk)) << key << ": not one whole value";
    EXPECT_GE(on_disk, token) << key << ": an acknowledged write was lost";
    EXPECT_LE(on_disk, FenceToken(restarted.admin_port(), key))
        << key << ": a value landed above its fence";
  }
}

// A file another program rewrites in place, the same size, and whose
// modification time it then restores (touch -d): its tag changes all the
// same (the change time moved), so a compare-and-set from the old tag is
// 412 and never overwrites the other program's write.
TEST_F(FsBackendTest, ARewriteInPlaceThatRestoresTheMtimeChangesTheTag) {
  ServerProcess server(data_, Args());
  const auto port = server.data_port();
  auto put = Fetch(port, "PUT", "/doc", {{"Fencing-Token", "1"}}, "aaaa");
  ASSERT_EQ(put.status, 201);
  const std::string tag = put.header("etag");
  ASSERT_EQ(Fetch(port, "GET", "/doc").header("etag"), tag);
  const fs::path path = store_ / "doc";
  struct stat before;
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  // Past the clock tick the kernel keeps file times to.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(path, std::ios::in | std::ios::out) << "bbbb";  // in place
  char when[64];
  std::snprintf(when, sizeof when, "@%lld.%09ld",
                static_cast<long long>(before.st_mtim.tv_sec),
                before.st_mtim.tv_nsec);
  ASSERT_EQ(
      std::system(
          ("touch -m -d " + std::string(when) + " " + path.string()).c_str()),
      0);
  struct stat after;
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, before.st_ino);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

  EXPECT_NE(Fetch(port, "GET", "/doc").header("etag"), tag);
  auto cas = Fetch(port, "PUT", "/doc",
                   {{"Fencing-Token", "1"}, {"If-Match", tag}}, "cccc");
  EXPECT_EQ(cas.status, 412) << cas.body;
  EXPECT_EQ(testing::ReadFile(path), "bbbb") << "the other program's write";
}

// A fence raised is an event, whatever becomes of the value: the file's
// write failing after the fence commit (EIO on its fsync, injected with
// strace on the one file-system worker's 3rd fsync) is 500, and watchers
// and a long poll are told of the raise at once.
TEST_F(FsBackendTest, AFenceRaisedIsToldAlsoWhenTheFileWriteFails) {
  if (std::system("strace -V >/dev/null 2>&1") != 0) {
    FAIL() << "strace is not installed; scripts/deps.sh installs it";
  }
  { ServerProcess first(data_, Args()); }
  ServerProcess server(data_, Args(), {"FENCEPOST_TEST_FS_THREADS=1"},
                       {"strace", "-f", "-qq", "-o", "/dev/null", "-e",
                        "trace=fsync", "-e", "inject=fsync:error=EIO:when=3"});
  const auto port = server.data_port(), admin = server.admin_port();
  ASSERT_EQ(Fetch(port, "PUT", "/w", {{"Fencing-Token", "1"}}, "old").status,
            201);  // fsync 1 (the file) and 2 (its directory)
  testing::Watcher watcher(admin, "/v1/watch");
  testing::LongPoll poll(admin, "w", 1, 2);  // the watcher and the poll
  auto failed = Fetch(port, "PUT", "/w", {{"Fencing-Token", "2"}}, "new");
  EXPECT_EQ(failed.status, 500) << failed.body;
  EXPECT_EQ(Fetch(port, "GET", "/w").body, "old");
  const testing::HttpResponse polled = poll.Answer();
  EXPECT_EQ(polled.status, 200) << "the raise woke no long poll";
  EXPECT_FALSE(polled.has("fencepost-watch"));
  EXPECT_NE(polled.body.find("\"token\":2"), std::string::npos) << polled.body;
  const std::vector<testing::Event> events = watcher.Events(1);
  ASSERT_EQ(events.size(), 1u) << watcher.raw();
  EXPECT_EQ(events[0].type, "fence");
  EXPECT_NE(events[0].data.find("\"token\":2"), std::string::npos)
      << events[0].data;
}

}  // namespace
}  // namespace fencepost
