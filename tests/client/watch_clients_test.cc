// The holders that watch their lease's fence (LeaseKeeper with fencepost's
// own leases: `fencepost lease run` and LeaderElector) stop as soon as the
// fence goes above their token, well before their next renewal: with a
// 30 s TTL a renewal comes every 10 s, and the client's own clock would
// give the lease up only after 27 s. Only the watch gives the reason
// "the fence ... went above token N" (a refused renewal gives another), so
// the tests check the reason, not how fast it came.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "client/client.h"
#include "client/documents.h"
#include "client/leader_elector.h"
#include "tests/client/helpers.h"
#include "tests/testing/bounds.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost::client {
namespace {

using fencepost::testing::ServerProcess;
using fencepost::testing::TempDir;
using std::chrono::milliseconds;

TEST(FenceWatchTest, LeaseRunIsStoppedByABumpLongBeforeItsNextRenewal) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  testing::CommandProcess run(
      {"lease", "run", "jobs/w", "--holder", "runner", "--ttl", "30s",
       "--admin", testing::AdminUrl(server), "--", "sleep", "600"});
  std::optional<Lease> held;
  ASSERT_TRUE(testing::Eventually([&] {
    held = ParseLease(admin.GetLease("jobs/w").response.body);
    return held && held->holder == "runner";
  })) << run.Output();
  // (Its watch asks for the fence above its token: a bump before the watch's
  // first long poll reaches the server is seen as well.)
  ASSERT_EQ(admin.Bump("jobs/w", held->token + 1).response.status, 200);
  EXPECT_EQ(run.Wait(fencepost::testing::kNoHang), 75) << run.Output();
  EXPECT_NE(
      run.Output().find("went above token " + std::to_string(held->token)),
      std::string::npos)
      << run.Output();
}

TEST(FenceWatchTest, TheElectorIsStoppedByABumpLongBeforeItsNextRenewal) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  LeaderElector::Options options;
  options.client = testing::AdminOptions(server);
  options.name = "leader/w";
  options.holder = "one";
  options.ttl = milliseconds(30000);
  std::mutex mu;
  std::uint64_t elected = 0;
  std::string lost_reason;
  bool stopped = false;
  LeaderElector elector(
      options,
      [&](std::uint64_t token, const StopSignal& stop) {
        {
          std::lock_guard lock(mu);
          if (elected == 0) elected = token;
        }
        stop.wait();
        std::lock_guard lock(mu);
        stopped = true;
      },
      [&](std::uint64_t, const std::string& reason) {
        std::lock_guard lock(mu);
        if (lost_reason.empty()) lost_reason = reason;
      });
  std::thread runner([&] { elector.Run(); });
  ASSERT_TRUE(testing::Eventually([&] {
    std::lock_guard lock(mu);
    return elected != 0;
  }));
  std::uint64_t token = 0;
  {
    std::lock_guard lock(mu);
    token = elected;
  }
  ASSERT_EQ(admin.Bump("leader/w", token + 1).response.status, 200);
  const bool stopped_by_itself = testing::Eventually(
      [&] {
        std::lock_guard lock(mu);
        return stopped;
      },
      fencepost::testing::kNoHang);
  elector.Stop();
  runner.join();
  ASSERT_TRUE(stopped_by_itself);
  std::lock_guard lock(mu);
  EXPECT_NE(lost_reason.find("went above token " + std::to_string(token)),
            std::string::npos)
      << lost_reason;
}

// The server's count of watchers (event streams and long polls), from
// /metrics; -1 when it does not answer.
int Watchers(Client& admin) {
  const Result r = admin.Send("GET", "/metrics");
  if (!r.ok() || r.response.status != 200) return -1;
  const std::string& body = r.response.body;
  const std::string name = "\nfencepost_watchers ";
  const auto at = body.find(name);
  return at == std::string::npos ? -1
                                 : std::stoi(body.substr(at + name.size()));
}

// `fencepost watch p/` prints the events under its prefix, one JSON object
// a line, and after the server restarts (on the same admin port) it comes
// back by itself: a reset (the server no longer holds what came after its
// last id), then the new events. Each step waits for what it needs: the
// stream open on the server (its watchers gauge) before the first changes,
// the reset (the new stream open) before the next.
TEST(WatchCommandTest, PrintsItsPrefixsEventsAndComesBackAfterARestart) {
  TempDir dir;
  const std::string admin_url =
      "http://127.0.0.1:" + std::to_string(fencepost::testing::FreePort());
  const std::vector<std::string> serve = {
      "serve",          "--listen",          "127.0.0.1:0",
      "--admin-listen", admin_url.substr(7), "--data-dir",
      dir / "data"};
  Client::Options options;
  options.url = admin_url;
  Client admin(options);
  const auto ready = [&] {
    return testing::Eventually(
        [&] {
          const Result r = admin.Send("GET", "/readyz");
          return r.ok() && r.response.status == 200;
        },
        fencepost::testing::kNoHang);
  };
  auto server = std::make_unique<testing::CommandProcess>(serve);
  ASSERT_TRUE(ready());
  testing::CommandProcess watch({"watch", "p/", "--admin", admin_url});
  ASSERT_TRUE(testing::Eventually([&] { return Watchers(admin) == 1; },
                                  fencepost::testing::kNoHang))
      << watch.Output();
  ASSERT_EQ(admin.Bump("p/a", 5).response.status, 201);
  ASSERT_EQ(admin.Bump("q/b", 6).response.status, 201);
  ASSERT_TRUE(testing::Eventually([&] {
    return watch.Output().find("\"token\":5") != std::string::npos;
  })) << watch.Output();
  EXPECT_EQ(watch.Output().rfind("{\"event\":\"fence\",\"id\":", 0), 0u)
      << watch.Output();
  EXPECT_EQ(watch.Output().find("q/b"), std::string::npos);

  server->Signal(SIGTERM);
  EXPECT_EQ(server->Wait(), 0);
  server = std::make_unique<testing::CommandProcess>(serve);
  ASSERT_TRUE(ready()) << server->Output();
  // Its reconnects back off up to 5 s apart while the server is down.
  ASSERT_TRUE(testing::Eventually(
      [&] {
        return watch.Output().find("\"event\":\"reset\"") != std::string::npos;
      },
      std::chrono::seconds(5) + fencepost::testing::kNoHang))
      << watch.Output();
  ASSERT_EQ(admin.Bump("p/a", 7).response.status, 200);
  ASSERT_TRUE(testing::Eventually([&] {
    return watch.Output().find("\"token\":7") != std::string::npos;
  })) << watch.Output();
  watch.Signal(SIGTERM);
  EXPECT_EQ(watch.Wait(), 0) << watch.Output();
}

TEST(WatchCommandTest, AnUnreachableServerExitsThree) {
  EXPECT_EQ(fencepost::testing::RunFencepost(
                {"watch", "--admin", "http://127.0.0.1:1"})
                .exit_status,
            3);
}

}  // namespace
}  // namespace fencepost::client
