// --max-leases with --fence-store etcd://: real fencepost replicas in front
// of a real single-member etcd (Debian's etcd-server, started by
// tests/coordination/etcd.sh on free ports of 127.0.0.1), over HTTP. The
// limit is decided in the transaction that grants: a grant compares that
// no hold was created since it counted them, so it holds under concurrent
// grants, through one replica or several.

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/exposition.h"
#include "tests/testing/http_client.h"
#include "tests/testing/lease_rounds.h"
#include "tests/testing/server_process.h"
#include "tests/testing/suite_etcd.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::reliability {
namespace {

using testing::Fetch;
using testing::ServerProcess;

// One etcd for the suite (testing::SuiteEtcd).
class EtcdLeaseLimitTest : public testing::SuiteEtcd {
 protected:
  // A replica keeping its fences and leases in etcd under `prefix`.
  static std::unique_ptr<ServerProcess> Replica(const std::string& prefix,
                                                const std::string& max_leases) {
    return std::make_unique<ServerProcess>(
        "", std::vector<std::string>{"--fence-store", url_ + "/" + prefix,
                                     "--backend", "etcd", "--max-leases",
                                     max_leases});
  }
};

// With room for one lease, 16 grants of distinct leases sent at once give
// exactly one lease, in each of 10 rounds. Seen failing with the grant's
// count and compare left out: up to 16 were granted each round.
TEST_F(EtcdLeaseLimitTest, ConcurrentGrantsNeverPassTheLeaseLimit) {
  auto replica = Replica("one", "1");
  testing::ExpectOneGrantPerRound({replica->admin_port()}, "r");
}

// The same through two replicas sharing the leases: the limit is etcd's
// count, whichever replica grants.
TEST_F(EtcdLeaseLimitTest, ConcurrentGrantsThroughTwoReplicasNeverPassIt) {
  auto a = Replica("two", "1");
  auto b = Replica("two", "1");
  testing::ExpectOneGrantPerRound({a->admin_port(), b->admin_port()}, "r");
}

// Only grants count: at the limit a renewal is granted and an acquire of a
// live lease is 409 as ever; a released lease frees its room at once, and
// the refused grant left nothing.
TEST_F(EtcdLeaseLimitTest, OnlyGrantsCountAndAReleaseFreesTheRoom) {
  auto replica = Replica("only-grants", "1");
  const auto port = replica->admin_port();
  const auto acquire = [&](const std::string& name, const std::string& who) {
    return Fetch(port, "PUT", "/v1/leases/" + name, {},
                 R"({"holder":")" + who + R"(","ttl_ms":60000})");
  };
  auto a = acquire("a", "h");
  ASSERT_EQ(a.status, 200) << a.body;
  auto over = acquire("b", "h");
  EXPECT_EQ(over.status, 507) << over.body;
  EXPECT_NE(over.body.find("urn:fencepost:problem:too-many-leases"),
            std::string::npos)
      << over.body;
  EXPECT_EQ(Fetch(port, "GET", "/v1/leases/b").status, 404);
  EXPECT_EQ(acquire("a", "h").status, 200) << "a renewal at the limit";
  EXPECT_EQ(acquire("a", "other").status, 409);
  ASSERT_EQ(
      Fetch(port, "DELETE", "/v1/leases/a",
            {{"Fencing-Token", a.header("fencing-token")}}, R"({"holder":"h"})")
          .status,
      204);
  EXPECT_EQ(acquire("b", "h").status, 200) << "a released lease is free room";
}

// Far below the limit, 64 grants of distinct leases sent at once through
// one replica are all granted, in each of 3 rounds. Each compares that no
// hold was created since it counted them, so grants in flight together
// fail each other's compare; the replica then takes them one at a time.
// Seen failing without that: after 16 failed compares a grant was answered
// 503 overloaded.
TEST_F(EtcdLeaseLimitTest, ConcurrentGrantsFarBelowTheLimitAreAllGranted) {
  auto replica = Replica("crowd", "100000");
  const auto port = replica->admin_port();
  constexpr int kGrants = 64;
  for (int round = 0; round < 3; ++round) {
    std::vector<int> statuses(kGrants);
    std::vector<std::thread> threads;
    for (int i = 0; i < kGrants; ++i) {
      threads.emplace_back([&statuses, port, round, i] {
        const std::string name =
            "g" + std::to_string(round) + "-" + std::to_string(i);
        statuses[i] = Fetch(port, "PUT", "/v1/leases/" + name, {},
                            R"({"holder":"h","ttl_ms":60000})")
                          .status;
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < kGrants; ++i) {
      EXPECT_EQ(statuses[i], 200) << "round " << round << ", grant " << i;
    }
  }
}

// With room for 8 leases, 32 grants of distinct leases sent at once give
// exactly 8 leases, in each of 3 rounds (each round's released after it).
// Those that race go on in the grant lane, whose groups count each grant
// after those before it. Seen failing with a group's grants each counted
// against the read alone: up to 31 were granted.
TEST_F(EtcdLeaseLimitTest, ConcurrentGrantsFillTheRoomExactly) {
  auto replica = Replica("room", "8");
  const auto port = replica->admin_port();
  constexpr int kGrants = 32;
  for (int round = 0; round < 3; ++round) {
    std::vector<testing::HttpResponse> answers(kGrants);
    std::vector<std::thread> threads;
    const auto name = [round](int i) {
      return "/v1/leases/r" + std::to_string(round) + "-" + std::to_string(i);
    };
    for (int i = 0; i < kGrants; ++i) {
      threads.emplace_back([&answers, &name, port, i] {
        answers[i] =
            Fetch(port, "PUT", name(i), {}, R"({"holder":"h","ttl_ms":60000})");
      });
    }
    for (std::thread& t : threads) t.join();
    int granted = 0;
    for (int i = 0; i < kGrants; ++i) {
      if (answers[i].status == 200) {
        ++granted;
        EXPECT_EQ(Fetch(port, "DELETE", name(i),
                        {{"Fencing-Token", answers[i].header("fencing-token")}},
                        R"({"holder":"h"})")
                      .status,
                  204);
      } else {
        EXPECT_EQ(answers[i].status, 507) << answers[i].body;
      }
    }
    EXPECT_EQ(granted, 8) << "round " << round;
  }
}

// 64 grants sent at once through one replica: those that race for the
// count go on in the grant lane, which reads, decides and applies them a
// group at a time, each grant counted after those before it in its group:
// fewer transactions (reads included) than two per grant. Seen failing with
// a lane of one grant at a time: 207 transactions (89 with groups).
TEST_F(EtcdLeaseLimitTest, RacingGrantsShareTheLanesTransactions) {
  auto replica = Replica("lane", "100000");
  const auto port = replica->admin_port();
  const auto transactions = [port] {
    return testing::MetricValue(
        Fetch(port, "GET", "/metrics").body,
        "fencepost_etcd_request_duration_seconds_count{op=\"txn\"}");
  };
  const double before = transactions();
  constexpr int kGrants = 64;
  std::vector<int> statuses(kGrants);
  std::vector<std::thread> threads;
  for (int i = 0; i < kGrants; ++i) {
    threads.emplace_back([&statuses, port, i] {
      statuses[i] = Fetch(port, "PUT", "/v1/leases/g" + std::to_string(i), {},
                          R"({"holder":"h","ttl_ms":60000})")
                        .status;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kGrants; ++i) EXPECT_EQ(statuses[i], 200) << i;
  const double used = transactions() - before;
  std::printf("%d grants: %.0f transactions\n", kGrants, used);
  EXPECT_LT(used, 2 * kGrants);
}

}  // namespace
}  // namespace fencepost::reliability
