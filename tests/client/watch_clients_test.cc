// The holders that watch their lease's fence (LeaseKeeper with fencepost's
// own leases: `fencepost lease run` and LeaderElector) stop as soon as the
// fence goes above their token, well before their next renewal: with a
// 30 s TTL a renewal comes every 10 s, and the client's own clock would
// give the lease up only after 27 s. Without the watch, both tests below
// wait for that renewal and fail their 5 s bound.

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "client/client.h"
#include "client/documents.h"
#include "client/leader_elector.h"
#include "tests/client/helpers.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::client {
namespace {

using fencepost::testing::ServerProcess;
using fencepost::testing::TempDir;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kWellBeforeARenewal{5000};

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
  // Let its watch's first long poll reach the server.
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_EQ(admin.Bump("jobs/w", held->token + 1).response.status, 200);
  const auto bumped = Clock::now();
  EXPECT_EQ(run.Wait(milliseconds(15000)), 75) << run.Output();
  EXPECT_LT(Clock::now() - bumped, kWellBeforeARenewal) << run.Output();
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
  Clock::time_point stopped{};
  LeaderElector elector(
      options,
      [&](std::uint64_t token, const StopSignal& stop) {
        {
          std::lock_guard lock(mu);
          if (elected == 0) elected = token;
        }
        stop.wait();
        std::lock_guard lock(mu);
        if (stopped == Clock::time_point{}) stopped = Clock::now();
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
  std::this_thread::sleep_for(milliseconds(300));
  std::uint64_t token = 0;
  {
    std::lock_guard lock(mu);
    token = elected;
  }
  ASSERT_EQ(admin.Bump("leader/w", token + 1).response.status, 200);
  const auto bumped = Clock::now();
  const bool stopped_soon = testing::Eventually([&] {
    std::lock_guard lock(mu);
    return stopped != Clock::time_point{};
  });
  elector.Stop();
  runner.join();
  ASSERT_TRUE(stopped_soon);
  std::lock_guard lock(mu);
  EXPECT_LT(stopped - bumped, kWellBeforeARenewal);
  EXPECT_NE(lost_reason.find("went above token " + std::to_string(token)),
            std::string::npos)
      << lost_reason;
}

}  // namespace
}  // namespace fencepost::client
