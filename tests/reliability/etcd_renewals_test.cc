// Lease renewals with --fence-store etcd://: real fencepost replicas in front
// of a real single-member etcd (Debian's etcd-server, started by
// tests/coordination/etcd.sh on free ports of 127.0.0.1), over HTTP. A
// replica that knows a lease renews it in one transaction, with others, and
// keeps its etcd lease alive beside it; what another replica changed in
// between is found by the transaction's compare and decided again.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/exposition.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/suite_etcd.h"

namespace fencepost::reliability {
namespace {

using testing::Fetch;
using testing::ServerProcess;

// One etcd for the suite (testing::SuiteEtcd).
class EtcdRenewalsTest : public testing::SuiteEtcd {
 protected:
  // A replica keeping its fences and leases in etcd under `prefix`.
  static std::unique_ptr<ServerProcess> Replica(const std::string& prefix) {
    return std::make_unique<ServerProcess>(
        "", std::vector<std::string>{"--fence-store", url_ + "/" + prefix,
                                     "--backend", "etcd"});
  }

  static testing::HttpResponse Acquire(const ServerProcess& replica,
                                       const std::string& name,
                                       const std::string& holder) {
    return Fetch(replica.admin_port(), "PUT", "/v1/leases/" + name, {},
                 R"({"holder":")" + holder + R"(","ttl_ms":60000})");
  }

  // A series of the replica's /metrics.
  static double Metric(const ServerProcess& replica,
                       const std::string& series) {
    return testing::MetricValue(
        Fetch(replica.admin_port(), "GET", "/metrics").body, series);
  }
  static double Transactions(const ServerProcess& replica) {
    return Metric(replica,
                  "fencepost_etcd_request_duration_seconds_count{op=\"txn\"}");
  }
};

// After the grant, each renewal through the replica that granted is one
// transaction (and the keep-alive of its etcd lease, another kind of
// request), not a read and then a transaction. Seen failing with renewals
// settled as every other lease operation: 20 transactions for 10 renewals.
TEST_F(EtcdRenewalsTest, ARenewalOfAKnownLeaseIsOneTransaction) {
  auto a = Replica("one-trip");
  auto granted = Acquire(*a, "jobs/leader", "A");
  ASSERT_EQ(granted.status, 200) << granted.body;
  const std::string token = granted.header("fencing-token");
  const double before = Transactions(*a);
  for (int i = 0; i < 10; ++i) {
    auto renewed = Acquire(*a, "jobs/leader", "A");
    ASSERT_EQ(renewed.status, 200) << renewed.body;
    EXPECT_EQ(renewed.header("fencing-token"), token);
  }
  EXPECT_EQ(Transactions(*a) - before, 10);
  EXPECT_EQ(Metric(*a, "fencepost_lease_renewals_total"), 10);
}

// A replica decides a renewal on the lease as it last knew it; when another
// replica changed it since, the transaction's compare fails and the
// renewal is decided again on what it read: a fence raised above the token
// makes it a grant above the fence, and a lease released and granted to
// another holder refuses it. Seen failing with the group's compares left
// out: the renewal kept token 1 under a fence at 5.
TEST_F(EtcdRenewalsTest, WhatAnotherReplicaChangedIsDecidedAgain) {
  auto a = Replica("stale");
  auto b = Replica("stale");
  ASSERT_EQ(Acquire(*a, "locks/x", "A").status, 200);
  auto renewed = Acquire(*a, "locks/x", "A");  // a knows the lease
  ASSERT_EQ(renewed.status, 200) << renewed.body;
  EXPECT_EQ(renewed.header("fencing-token"), "1");

  ASSERT_EQ(Fetch(b->admin_port(), "PUT", "/v1/fences/locks/x",
                  {{"Fencing-Token", "5"}})
                .status,
            200);
  auto above = Acquire(*a, "locks/x", "A");
  ASSERT_EQ(above.status, 200) << above.body;
  EXPECT_EQ(above.header("fencing-token"), "6") << above.body;
  EXPECT_GE(Metric(*a, "fencepost_etcd_txn_retries_total{cause=\"fence\"}"), 1);

  ASSERT_EQ(Fetch(b->admin_port(), "DELETE", "/v1/leases/locks/x",
                  {{"Fencing-Token", "6"}}, R"({"holder":"A"})")
                .status,
            204);
  auto other = Acquire(*b, "locks/x", "B");
  ASSERT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(other.header("fencing-token"), "7");
  auto refused = Acquire(*a, "locks/x", "A");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("\"holder\":\"B\""), std::string::npos)
      << refused.body;
  EXPECT_GE(Metric(*a, "fencepost_etcd_txn_retries_total{cause=\"lease\"}"), 1);
  auto doc = Fetch(b->admin_port(), "GET", "/v1/leases/locks/x").body;
  EXPECT_NE(doc.find("\"holder\":\"B\",\"token\":7"), std::string::npos) << doc;
}

// Renewals of 64 leases sent at once are each renewed, in fewer
// transactions than renewals: they share them, each within etcd's 128
// operations a transaction. Seen failing with a group of one renewal (64
// transactions), and with groups of up to 64 (503s: etcd refused a
// transaction of more than 128 compares).
TEST_F(EtcdRenewalsTest, ConcurrentRenewalsShareTransactions) {
  auto a = Replica("crowd");
  constexpr int kLeases = 64;
  std::vector<std::string> tokens(kLeases);
  for (int i = 0; i < kLeases; ++i) {
    auto granted = Acquire(*a, "l" + std::to_string(i), "h");
    ASSERT_EQ(granted.status, 200) << granted.body;
    tokens[i] = granted.header("fencing-token");
  }
  const double before = Transactions(*a);
  std::vector<testing::HttpResponse> renewed(kLeases);
  std::vector<std::thread> threads;
  for (int i = 0; i < kLeases; ++i) {
    threads.emplace_back([&renewed, &a, i] {
      renewed[i] = Acquire(*a, "l" + std::to_string(i), "h");
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kLeases; ++i) {
    EXPECT_EQ(renewed[i].status, 200) << renewed[i].body;
    EXPECT_EQ(renewed[i].header("fencing-token"), tokens[i]);
  }
  const double transactions = Transactions(*a) - before;
  EXPECT_LT(transactions, kLeases);
  EXPECT_EQ(Metric(*a, "fencepost_lease_renewals_total"), kLeases);
}

}  // namespace
}  // namespace fencepost::reliability
