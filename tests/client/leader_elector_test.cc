// LeaderElector against the real binary: election, renewal while the work
// blocks, and the stop signal on a takeover (seen by the watch of the
// fence) or a silent server.

#include "client/leader_elector.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "client/documents.h"
#include "tests/client/helpers.h"
#include "tests/testing/bounds.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::client {
namespace {

using fencepost::testing::ServerProcess;
using fencepost::testing::TempDir;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// What the callbacks saw, for the test thread.
struct Journal {
  std::mutex mu;
  std::vector<std::uint64_t> elected;
  std::vector<std::pair<std::uint64_t, std::string>> lost;
  std::vector<Clock::time_point> stop_seen;  // when each term's stop fired

  std::size_t elections() {
    std::lock_guard lock(mu);
    return elected.size();
  }
  std::size_t losses() {
    std::lock_guard lock(mu);
    return lost.size();
  }
};

// An elector whose work waits for the stop signal, then notes the time.
struct Candidate {
  Journal journal;
  LeaderElector elector;
  std::thread runner;

  explicit Candidate(LeaderElector::Options options)
      : elector(
            std::move(options),
            [this](std::uint64_t token, const StopSignal& stop) {
              {
                std::lock_guard lock(journal.mu);
                journal.elected.push_back(token);
              }
              stop.wait();
              std::lock_guard lock(journal.mu);
              journal.stop_seen.push_back(Clock::now());
            },
            [this](std::uint64_t token, const std::string& reason) {
              std::lock_guard lock(journal.mu);
              journal.lost.emplace_back(token, reason);
            }) {}
  void Start() {
    runner = std::thread([this] { elector.Run(); });
  }
  ~Candidate() {
    elector.Stop();
    if (runner.joinable()) runner.join();
  }
};

LeaderElector::Options ElectorOptions(const ServerProcess& server,
                                      const std::string& holder,
                                      milliseconds ttl) {
  LeaderElector::Options options;
  options.client = testing::AdminOptions(server);
  options.name = "leader/election";
  options.holder = holder;
  options.ttl = ttl;
  return options;
}

std::optional<Lease> CurrentLease(Client& admin) {
  const Result result = admin.GetLease("leader/election");
  if (!result.ok() || result.response.status != 200) return std::nullopt;
  return ParseLease(result.response.body);
}

TEST(LeaderElectorTest, RefusesBadOptions) {
  const auto noop = [](std::uint64_t, const StopSignal&) {};
  LeaderElector::Options options;
  options.client.url = "http://127.0.0.1:1";
  options.name = "";
  EXPECT_THROW(LeaderElector(options, noop), std::invalid_argument);
  options.name = "n";
  options.client.url = "nope";
  EXPECT_THROW(LeaderElector(options, noop), std::invalid_argument);
  options.client.url = "http://127.0.0.1:1";
  options.ttl = milliseconds(100);
  options.safety_margin = milliseconds(100);
  EXPECT_THROW(LeaderElector(options, noop), std::invalid_argument);
}

TEST(LeaderElectorTest, HolderDefaultsToHostPidAndRandom) {
  LeaderElector::Options options;
  options.client.url = "http://127.0.0.1:1";
  options.name = "n";
  LeaderElector a(options, [](std::uint64_t, const StopSignal&) {});
  LeaderElector b(options, [](std::uint64_t, const StopSignal&) {});
  EXPECT_NE(a.holder().find("-" + std::to_string(getpid()) + "-"),
            std::string::npos)
      << a.holder();
  EXPECT_NE(a.holder(), b.holder());
}

TEST(LeaderElectorTest, StopBeforeRunMakesRunReturnAtOnce) {
  LeaderElector::Options options;
  options.client.url = "http://127.0.0.1:1";
  options.name = "n";
  LeaderElector elector(options, [](std::uint64_t, const StopSignal&) {
    ADD_FAILURE() << "never elected";
  });
  elector.Stop();
  elector.Run();
}

TEST(LeaderElectorTest, IsElectedRunsTheWorkAndReleasesOnStop) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  Candidate candidate(ElectorOptions(server, "one", milliseconds(1000)));
  candidate.Start();
  ASSERT_TRUE(
      testing::Eventually([&] { return candidate.journal.elections() == 1; }));
  const auto lease = CurrentLease(admin);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->holder, "one");
  EXPECT_EQ(lease->token, candidate.journal.elected[0]);

  candidate.elector.Stop();  // returns once Run() is done
  EXPECT_EQ(candidate.journal.losses(), 1u);
  EXPECT_EQ(candidate.journal.lost[0].first, lease->token);
  EXPECT_EQ(candidate.journal.lost[0].second, "stopped");
  const auto after = CurrentLease(admin);
  ASSERT_TRUE(after);
  EXPECT_FALSE(after->holder) << "released on Stop()";
}

TEST(LeaderElectorTest, RenewsWhileTheWorkBlocksLongerThanTheTtl) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  std::atomic<bool> stopped_early{false};
  std::atomic<std::uint64_t> token{0};
  std::atomic<bool> done{false};
  LeaderElector elector(ElectorOptions(server, "busy", milliseconds(1000)),
                        [&](std::uint64_t t, const StopSignal& stop) {
                          token = t;
                          // Busy for more than three TTLs without looking at
                          // the signal.
                          std::this_thread::sleep_for(milliseconds(3500));
                          stopped_early = stop.stopped();
                          done = true;
                          stop.wait();
                        });
  std::thread runner([&] { elector.Run(); });
  ASSERT_TRUE(testing::Eventually([&] { return token != 0; }));
  // Meanwhile nobody else gets the lease.
  while (!done) {
    const Result other =
        admin.AcquireLease("leader/election", "other", milliseconds(300));
    EXPECT_EQ(other.response.status, 409);
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_FALSE(stopped_early);
  const auto lease = CurrentLease(admin);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->holder, "busy");
  EXPECT_EQ(lease->token, token.load());
  elector.Stop();
  runner.join();
}

TEST(LeaderElectorTest, ATakeoverStopsTheWorkAtOnceAndItCampaignsAgain) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  // A long TTL: only the refusal can stop the work in time.
  Candidate candidate(ElectorOptions(server, "first", milliseconds(3000)));
  candidate.Start();
  ASSERT_TRUE(
      testing::Eventually([&] { return candidate.journal.elections() == 1; }));
  const std::uint64_t first = candidate.journal.elected[0];

  // Another process takes over: the lease is released behind the elector's
  // back and granted to "second".
  ASSERT_EQ(
      admin.ReleaseLease("leader/election", "first", first).response.status,
      204);
  const Result taken =
      admin.AcquireLease("leader/election", "second", milliseconds(3000));
  ASSERT_EQ(taken.response.status, 200);
  const auto second = ParseLease(taken.response.body);
  ASSERT_TRUE(second);

  // The grant raised the fence above the elector's token: its watch of the
  // fence sees it (before the next renewal, which would be refused with
  // another reason) and the work stops.
  ASSERT_TRUE(
      testing::Eventually([&] { return candidate.journal.losses() == 1; },
                          fencepost::testing::kNoHang));
  {
    std::lock_guard lock(candidate.journal.mu);
    EXPECT_EQ(candidate.journal.lost[0].first, first);
    EXPECT_NE(candidate.journal.lost[0].second.find("went above token " +
                                                    std::to_string(first)),
              std::string::npos)
        << candidate.journal.lost[0].second;
  }

  // Once "second" lets go, the elector is elected again, with a new token.
  ASSERT_EQ(admin.ReleaseLease("leader/election", "second", second->token)
                .response.status,
            204);
  ASSERT_TRUE(
      testing::Eventually([&] { return candidate.journal.elections() == 2; }));
  EXPECT_GT(candidate.journal.elected[1], second->token);
}

// The network between the elector and the server stops carrying bytes:
// the work must be stopped before the server could grant the lease to
// another holder.
TEST(LeaderElectorTest, StopsBeforeTheServerCouldExpireTheLease) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  testing::Relay relay(server.admin_port());
  LeaderElector::Options options =
      ElectorOptions(server, "partitioned", milliseconds(1000));
  options.client.url = "http://127.0.0.1:" + std::to_string(relay.port());
  options.client.timeout = milliseconds(500);  // Stop() waits less
  Candidate candidate(options);
  candidate.Start();
  ASSERT_TRUE(
      testing::Eventually([&] { return candidate.journal.elections() == 1; }));
  std::this_thread::sleep_for(milliseconds(500));  // a renewal or so

  relay.Freeze();
  // Bytes relayed before the freeze are handled by now; no renewal reaches
  // the server from here on, so its expiry is this GET's answer.
  std::this_thread::sleep_for(milliseconds(100));
  const auto asked = Clock::now();
  const auto lease = CurrentLease(admin);
  ASSERT_TRUE(lease);
  ASSERT_EQ(lease->holder, "partitioned");
  const auto server_expiry = asked + milliseconds(lease->expires_in_ms);

  ASSERT_TRUE(testing::Eventually(
      [&] { return candidate.journal.losses() == 1; }, milliseconds(5000)));
  std::lock_guard lock(candidate.journal.mu);
  const auto stop_at = candidate.journal.stop_seen[0];
  EXPECT_LT(stop_at, server_expiry)
      << "stopped " << (stop_at - server_expiry) / milliseconds(1)
      << " ms after the server could have expired the lease";
  EXPECT_NE(candidate.journal.lost[0].second.find("no renewal"),
            std::string::npos)
      << candidate.journal.lost[0].second;
}

// The server stops (SIGSTOP, as a stalled VM would): every renewal it
// handled was sent before the pause, so the work stops within the TTL less
// the margin of it.
TEST(LeaderElectorTest, StopsWithinTheTtlWhenTheServerIsPaused) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const milliseconds ttl(1000);
  LeaderElector::Options options = ElectorOptions(server, "paused", ttl);
  options.client.timeout = milliseconds(500);  // Stop() waits less
  Candidate candidate(options);
  candidate.Start();
  ASSERT_TRUE(
      testing::Eventually([&] { return candidate.journal.elections() == 1; }));
  std::this_thread::sleep_for(milliseconds(400));
  const auto paused = Clock::now();
  server.Signal(SIGSTOP);
  const bool lost = testing::Eventually(
      [&] { return candidate.journal.losses() == 1; }, milliseconds(5000));
  server.Signal(SIGCONT);
  ASSERT_TRUE(lost);
  std::lock_guard lock(candidate.journal.mu);
  EXPECT_LT(candidate.journal.stop_seen[0] - paused, ttl - milliseconds(50));
}

TEST(LeaderElectorTest, StopsWithinTheTtlWhenTheServerDies) {
  TempDir dir;
  auto server = std::make_unique<ServerProcess>(dir / "data");
  const milliseconds ttl(1000);
  Candidate candidate(ElectorOptions(*server, "orphan", ttl));
  candidate.Start();
  ASSERT_TRUE(
      testing::Eventually([&] { return candidate.journal.elections() == 1; }));
  const auto killed = Clock::now();
  server->Kill();
  ASSERT_TRUE(testing::Eventually(
      [&] { return candidate.journal.losses() == 1; }, milliseconds(5000)));
  std::lock_guard lock(candidate.journal.mu);
  EXPECT_LT(candidate.journal.stop_seen[0] - killed, ttl);
}

TEST(LeaderElectorTest, WaitsWhileAnotherHoldsTheLeaseAndStopsFromAnyThread) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  ASSERT_EQ(
      admin.AcquireLease("leader/election", "incumbent", milliseconds(60000))
          .response.status,
      200);
  Candidate candidate(ElectorOptions(server, "hopeful", milliseconds(600)));
  candidate.Start();
  std::this_thread::sleep_for(milliseconds(800));
  EXPECT_EQ(candidate.journal.elections(), 0u);
  const auto asked = Clock::now();
  std::thread([&] { candidate.elector.Stop(); }).join();
  EXPECT_LT(Clock::now() - asked, fencepost::testing::kNoHang);
  candidate.runner.join();
  EXPECT_EQ(candidate.journal.losses(), 0u);
}

}  // namespace
}  // namespace fencepost::client
