// Replicas of fencepost sharing their fences in a real 3-member etcd cluster
// (Debian's etcd-server, started by tests/coordination/etcd_cluster.sh on
// free ports of 127.0.0.1): a write accepted by one replica fences the
// others, the history checker finds nothing while replicas and etcd members
// are killed, a lost quorum answers 503 and acknowledges nothing, and a
// lease is one lease on every replica, also while they are killed.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/reliability/history.h"
#include "tests/reliability/load.h"
#include "tests/testing/bounds.h"
#include "tests/testing/event_stream.h"
#include "tests/testing/exposition.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost::reliability {
namespace {

using std::chrono::milliseconds;
using testing::Fetch;
using testing::ServerProcess;
using testing::Shell;
using testing::ShellLine;

const std::string kScript = FENCEPOST_ETCD_CLUSTER_SH;

// A 3-member etcd cluster for one test.
class EtcdCluster {
 public:
  EtcdCluster() {
    char pattern[] = "/tmp/fencepost-etcd-cluster-XXXXXX";
    dir_ = mkdtemp(pattern);
    endpoints_ = ShellLine(kScript + " start " + dir_ + "/etcd");
  }
  ~EtcdCluster() {
    Shell(kScript + " stop " + dir_ + "/etcd");
    Shell("rm -rf " + dir_);
  }
  // HOST:PORT,HOST:PORT,HOST:PORT; empty when the cluster did not start.
  const std::string& endpoints() const { return endpoints_; }
  void StopMember(int i, bool kill = false) {
    Shell(kScript + " stop-member " + dir_ + "/etcd " + std::to_string(i) +
          (kill ? " kill" : ""));
  }
  void StartMember(int i) {
    Shell(kScript + " start-member " + dir_ + "/etcd " + std::to_string(i));
  }

 private:
  std::string dir_;
  std::string endpoints_;
};

// One replica: fences and values in etcd under `prefix`.
std::unique_ptr<ServerProcess> Replica(const std::string& endpoints,
                                       const std::string& prefix) {
  return std::make_unique<ServerProcess>(
      "", std::vector<std::string>{
              "--fence-store", "etcd://" + endpoints + "/" + prefix,
              "--backend", "etcd", "--fence-store-timeout", "1"});
}

// One replica in front of a legacy store at http://127.0.0.1:PORT.
std::unique_ptr<ServerProcess> HttpReplica(const std::string& endpoints,
                                           const std::string& prefix,
                                           std::uint16_t upstream,
                                           std::vector<std::string> more = {}) {
  std::vector<std::string> args = {
      "--fence-store",
      "etcd://" + endpoints + "/" + prefix,
      "--backend",
      "http://127.0.0.1:" + std::to_string(upstream),
      "--forward-token",
      "--fence-store-timeout",
      "1"};
  args.insert(args.end(), more.begin(), more.end());
  return std::make_unique<ServerProcess>("", args);
}

std::string Token(std::uint64_t t) { return std::to_string(t); }

class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(etcd_.endpoints().empty()) << "etcd did not start";
  }

  struct Kills {
    int replicas = 0, members = 0;
    // Each replica killed: its port (port_of) and when the kill began.
    std::vector<std::pair<std::uint16_t, std::chrono::steady_clock::time_point>>
        killed;
  };
  // Every 1.5 s while `go_on()`, in turn: kills a random one of `replicas`
  // with SIGKILL and starts another under `prefix` in its place, or kills
  // an etcd member and starts it again 700 ms later. `ports` (guarded by
  // `mu`) holds `port_of` of each live replica, for the clients to pick.
  Kills KillInTurn(std::vector<std::unique_ptr<ServerProcess>>& replicas,
                   const std::string& prefix, std::mutex& mu,
                   std::vector<std::uint16_t>& ports,
                   std::uint16_t (ServerProcess::*port_of)() const,
                   const std::function<bool()>& go_on) {
    std::mt19937 random(std::random_device{}());
    Kills kills;
    for (int round = 0; go_on(); ++round) {
      std::this_thread::sleep_for(milliseconds(1500));
      if (round % 2 == 0) {
        const std::size_t victim = random() % replicas.size();
        {
          std::lock_guard lock(mu);
          std::erase(ports, ((*replicas[victim]).*port_of)());
        }
        kills.killed.emplace_back(((*replicas[victim]).*port_of)(),
                                  std::chrono::steady_clock::now());
        replicas[victim]->Kill();
        replicas[victim] = Replica(etcd_.endpoints(), prefix);
        std::lock_guard lock(mu);
        ports.push_back(((*replicas[victim]).*port_of)());
        ++kills.replicas;
      } else {
        const int member = 1 + static_cast<int>(random() % 3);
        etcd_.StopMember(member, true);
        std::this_thread::sleep_for(milliseconds(700));
        etcd_.StartMember(member);
        ++kills.members;
      }
    }
    return kills;
  }

  EtcdCluster etcd_;
};

TEST_F(ReplicasTest, AWriteAcceptedByOneReplicaFencesTheOthers) {
  auto a = Replica(etcd_.endpoints(), "fences-others");
  auto b = Replica(etcd_.endpoints(), "fences-others");
  auto c = Replica(etcd_.endpoints(), "fences-others");
  // The seed story across replicas: A writes through a, B is elected and
  // writes through b, A wakes up and writes through c.
  EXPECT_EQ(Fetch(a->data_port(), "PUT", "/orders/7",
                  {{"Fencing-Token", Token(33)}}, "from A")
                .status,
            201);
  EXPECT_EQ(Fetch(b->data_port(), "PUT", "/orders/7",
                  {{"Fencing-Token", Token(34)}}, "from B")
                .status,
            200);
  auto stale = Fetch(c->data_port(), "PUT", "/orders/7",
                     {{"Fencing-Token", Token(33)}}, "A again");
  EXPECT_EQ(stale.status, 409);
  EXPECT_NE(stale.body.find("\"current_token\":34"), std::string::npos)
      << stale.body;
  // a saw the fence at 33 and must not decide from that.
  EXPECT_EQ(Fetch(a->data_port(), "PUT", "/orders/7",
                  {{"Fencing-Token", Token(33)}}, "A once more")
                .status,
            409);
  for (const auto* r : {a.get(), b.get(), c.get()}) {
    auto value = Fetch(r->data_port(), "GET", "/orders/7");
    EXPECT_EQ(value.status, 200);
    EXPECT_EQ(value.body, "from B");
    EXPECT_EQ(value.header("fencing-token"), "34");
    auto fence = Fetch(r->admin_port(), "GET", "/v1/fences/orders/7");
    EXPECT_NE(fence.body.find("\"token\":34"), std::string::npos);
    EXPECT_EQ(fence.header("fencepost-consistency"), "linearizable");
  }
  // A bump on one replica fences writes on another; a delete is fenced too.
  EXPECT_EQ(Fetch(b->admin_port(), "PUT", "/v1/fences/orders/7",
                  {{"Fencing-Token", Token(40)}})
                .status,
            200);
  EXPECT_EQ(Fetch(c->data_port(), "DELETE", "/orders/7",
                  {{"Fencing-Token", Token(39)}})
                .status,
            409);
  EXPECT_EQ(Fetch(c->data_port(), "DELETE", "/orders/7",
                  {{"Fencing-Token", Token(40)}})
                .status,
            204);
  EXPECT_EQ(Fetch(a->data_port(), "GET", "/orders/7").status, 404);
  // A batch is one etcd transaction: all of it, or none of it.
  auto batch = Fetch(a->data_port(), "POST", "/", {{"Fencing-Token", "50"}},
                     "{\"ops\":[{\"op\":\"put\",\"key\":\"pair/a\","
                     "\"value\":\"MQ==\"},{\"op\":\"put\",\"key\":"
                     "\"pair/b\",\"value\":\"MQ==\"}]}");
  EXPECT_EQ(batch.status, 200) << batch.body;
  EXPECT_EQ(Fetch(b->admin_port(), "PUT", "/v1/fences/pair/b",
                  {{"Fencing-Token", "60"}})
                .status,
            200);
  auto half = Fetch(c->data_port(), "POST", "/", {{"Fencing-Token", "55"}},
                    "{\"ops\":[{\"op\":\"put\",\"key\":\"pair/a\","
                    "\"value\":\"Mg==\"},{\"op\":\"put\",\"key\":"
                    "\"pair/b\",\"value\":\"Mg==\"}]}");
  EXPECT_EQ(half.status, 409) << half.body;
  EXPECT_EQ(Fetch(b->data_port(), "GET", "/pair/a").body, "1")
      << "nothing of a refused batch is applied";
  EXPECT_EQ(Fetch(b->data_port(), "GET", "/pair/b").body, "1");
  auto metrics = Fetch(a->admin_port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("fencepost_etcd_request_duration_seconds_count{op="
                         "\"txn\"}"),
            std::string::npos);
}

std::string LeaseBody(const std::string& holder, int ttl_ms) {
  return "{\"holder\":\"" + holder + "\",\"ttl_ms\":" + std::to_string(ttl_ms) +
         "}";
}

double SumOver(const std::vector<const ServerProcess*>& replicas,
               const std::string& series) {
  double sum = 0;
  for (const ServerProcess* r : replicas) {
    sum += testing::MetricValue(Fetch(r->admin_port(), "GET", "/metrics").body,
                                series);
  }
  return sum;
}

TEST_F(ReplicasTest, ALeaseIsOneLeaseOnEveryReplica) {
  auto a = Replica(etcd_.endpoints(), "leases");
  auto b = Replica(etcd_.endpoints(), "leases");
  auto c = Replica(etcd_.endpoints(), "leases");
  const std::vector<const ServerProcess*> all = {a.get(), b.get(), c.get()};
  // The fence is at 10 (through b): the grant through a starts above it.
  ASSERT_EQ(Fetch(b->admin_port(), "PUT", "/v1/fences/jobs/leader",
                  {{"Fencing-Token", "10"}})
                .status,
            201);
  auto granted = Fetch(a->admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                       LeaseBody("A", 1000));
  ASSERT_EQ(granted.status, 200) << granted.body;
  EXPECT_EQ(granted.header("fencing-token"), "11");
  EXPECT_NE(granted.body.find("\"holder\":\"A\""), std::string::npos);
  // Another holder is refused on every replica, and told who holds it.
  for (const ServerProcess* r : {b.get(), c.get()}) {
    auto held = Fetch(r->admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                      LeaseBody("B", 1000));
    EXPECT_EQ(held.status, 409) << held.body;
    EXPECT_NE(held.body.find("lease-held"), std::string::npos);
    EXPECT_NE(held.body.find("\"holder\":\"A\""), std::string::npos);
  }
  // A renews through c: the same token. Every replica reads the lease.
  auto renewed = Fetch(c->admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                       LeaseBody("A", 1000));
  EXPECT_EQ(renewed.status, 200) << renewed.body;
  EXPECT_EQ(renewed.header("fencing-token"), "11");
  for (const ServerProcess* r : all) {
    auto doc = Fetch(r->admin_port(), "GET", "/v1/leases/jobs/leader");
    EXPECT_EQ(doc.status, 200);
    EXPECT_NE(doc.body.find("\"holder\":\"A\",\"token\":11"), std::string::npos)
        << doc.body;
  }
  auto listed = Fetch(b->admin_port(), "GET", "/v1/leases?prefix=jobs/");
  EXPECT_NE(listed.body.find("\"name\":\"jobs/leader\",\"holder\":\"A\""),
            std::string::npos)
      << listed.body;
  EXPECT_EQ(Fetch(a->data_port(), "PUT", "/jobs/leader",
                  {{"Fencing-Token", "11"}}, "from A")
                .status,
            201);
  // A stops renewing. Its lease runs out in etcd (a TTL of 1 s, checked
  // by etcd's leader every 500 ms); each replica sees it free.
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(8000);
  std::string doc;
  do {
    std::this_thread::sleep_for(milliseconds(100));
    doc = Fetch(b->admin_port(), "GET", "/v1/leases/jobs/leader").body;
  } while (doc.find("\"holder\":null") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline);
  ASSERT_NE(doc.find("\"holder\":null"), std::string::npos) << doc;
  for (int i = 0; i < 3; ++i) {  // read again: noticed once, counted once
    Fetch(all[i]->admin_port(), "GET", "/v1/leases/jobs/leader");
    Fetch(all[i]->admin_port(), "GET", "/v1/leases");
  }
  EXPECT_EQ(SumOver(all, "fencepost_lease_expirations_total"), 1);
  // B is granted through c, with the next token: at once, A's writes are
  // refused on every replica, and A can no longer release or renew.
  auto next = Fetch(c->admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                    LeaseBody("B", 1000));
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.header("fencing-token"), "12");
  EXPECT_NE(next.body.find("\"transitions\":1"), std::string::npos);
  for (const ServerProcess* r : all) {
    EXPECT_EQ(Fetch(r->data_port(), "PUT", "/jobs/leader",
                    {{"Fencing-Token", "11"}}, "A again")
                  .status,
              409);
  }
  EXPECT_EQ(Fetch(a->admin_port(), "DELETE", "/v1/leases/jobs/leader",
                  {{"Fencing-Token", "11"}}, "{\"holder\":\"A\"}")
                .status,
            409);
  EXPECT_EQ(Fetch(a->admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                  LeaseBody("A", 1000))
                .status,
            409);
  // B releases through a: free at once on every replica; the fence stays.
  EXPECT_EQ(Fetch(a->admin_port(), "DELETE", "/v1/leases/jobs/leader",
                  {{"Fencing-Token", "12"}}, "{\"holder\":\"B\"}")
                .status,
            204);
  EXPECT_NE(Fetch(b->admin_port(), "GET", "/v1/leases/jobs/leader")
                .body.find("\"holder\":null"),
            std::string::npos);
  auto again = Fetch(b->admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                     LeaseBody("A", 1000));
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.header("fencing-token"), "13");
  EXPECT_EQ(SumOver(all, "fencepost_lease_grants_total"), 3);
  EXPECT_EQ(SumOver(all, "fencepost_lease_renewals_total"), 1);
  EXPECT_EQ(SumOver(all, "fencepost_lease_releases_total"), 1);
  // A bad body changes nothing.
  EXPECT_EQ(Fetch(c->admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                  "{\"holder\":\"\",\"ttl_ms\":1000}")
                .status,
            400);
  EXPECT_EQ(Fetch(b->admin_port(), "GET", "/v1/leases/nobody").status, 404);
}

// A renewal never keeps a token below its fence, whichever replica raised
// it; and a replica whose --fence-scope settings give a lease another fence
// than the one it was granted under refuses it rather than grant it twice.
TEST_F(ReplicasTest, LeasesFollowTheirFenceAcrossReplicas) {
  auto a = Replica(etcd_.endpoints(), "lease-fences");
  auto b = Replica(etcd_.endpoints(), "lease-fences");
  auto granted = Fetch(a->admin_port(), "PUT", "/v1/leases/locks/x", {},
                       LeaseBody("A", 60000));
  ASSERT_EQ(granted.status, 200) << granted.body;
  EXPECT_EQ(granted.header("fencing-token"), "1");
  ASSERT_EQ(Fetch(b->admin_port(), "PUT", "/v1/fences/locks/x",
                  {{"Fencing-Token", "5"}})
                .status,
            200);
  // A renews: its token 1 is fenced, so this is a grant of 6.
  auto renewed = Fetch(b->admin_port(), "PUT", "/v1/leases/locks/x", {},
                       LeaseBody("A", 60000));
  EXPECT_EQ(renewed.status, 200) << renewed.body;
  EXPECT_EQ(renewed.header("fencing-token"), "6");
  EXPECT_EQ(Fetch(a->admin_port(), "PUT", "/v1/leases/locks/x", {},
                  LeaseBody("B", 60000))
                .status,
            409);

  // c scopes locks/ as one fence: the lease locks/x, granted under the
  // fence locks/x, is refused there (500), never granted to another.
  auto c = std::make_unique<ServerProcess>(
      "", std::vector<std::string>{
              "--fence-store", "etcd://" + etcd_.endpoints() + "/lease-fences",
              "--backend", "etcd", "--fence-scope", "locks/"});
  auto other = Fetch(c->admin_port(), "PUT", "/v1/leases/locks/x", {},
                     LeaseBody("B", 60000));
  EXPECT_EQ(other.status, 500) << other.body;
  EXPECT_NE(other.body.find("--fence-scope"), std::string::npos) << other.body;
  EXPECT_EQ(Fetch(c->admin_port(), "GET", "/v1/leases/locks/x").status, 500);
  auto doc = Fetch(a->admin_port(), "GET", "/v1/leases/locks/x").body;
  EXPECT_NE(doc.find("\"holder\":\"A\",\"token\":6"), std::string::npos) << doc;
}

// Candidates race for one lease through three replicas: one holder per
// round, the others told who it is, and tokens that only go up.
TEST_F(ReplicasTest, CandidatesRacingThroughThreeReplicasGetOneHolder) {
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(Replica(etcd_.endpoints(), "race"));
  }
  std::uint64_t last_token = 0;
  for (int round = 0; round < 5; ++round) {
    constexpr int kCandidates = 6;
    std::vector<testing::HttpResponse> answers(kCandidates);
    std::vector<std::thread> threads;
    for (int i = 0; i < kCandidates; ++i) {
      threads.emplace_back([&, i] {
        answers[i] =
            Fetch(replicas[i % 3]->admin_port(), "PUT", "/v1/leases/race", {},
                  LeaseBody("c" + std::to_string(i), 5000));
      });
    }
    for (auto& t : threads) t.join();
    int winner = -1;
    for (int i = 0; i < kCandidates; ++i) {
      if (answers[i].status == 200) {
        EXPECT_EQ(winner, -1) << "two holders in round " << round;
        winner = i;
      } else {
        EXPECT_EQ(answers[i].status, 409) << answers[i].body;
      }
    }
    ASSERT_NE(winner, -1) << "no holder in round " << round;
    const std::string holder = "c" + std::to_string(winner);
    for (int i = 0; i < kCandidates; ++i) {
      if (i != winner) {
        EXPECT_NE(answers[i].body.find("\"holder\":\"" + holder + "\""),
                  std::string::npos)
            << answers[i].body;
      }
    }
    const std::uint64_t token =
        std::stoull(answers[winner].header("fencing-token"));
    EXPECT_GT(token, last_token);
    last_token = token;
    EXPECT_EQ(Fetch(replicas[(winner + 1) % 3]->admin_port(), "DELETE",
                    "/v1/leases/race", {{"Fencing-Token", Token(token)}},
                    "{\"holder\":\"" + holder + "\"}")
                  .status,
              204);
  }
}

TEST_F(ReplicasTest, ConcurrentWritesToOneFenceThroughThreeReplicas) {
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(Replica(etcd_.endpoints(), "one-fence"));
  }
  // Each thread writes rising tokens through its own replica; the highest
  // accepted token must be the fence, and no token below an acknowledged
  // one may be accepted after it (the checker).
  Load load({"hot"}, 0, 6);
  load.Start([&replicas, n = std::make_shared<std::atomic<int>>(0)] {
    return replicas[(*n)++ % 3]->data_port();
  });
  // Behaviour, not speed: at least 3 s and 100 acknowledged writes (the
  // cap only bounds a load that stalls; 79 in 3 s in a loaded root).
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(3000));
  while (load.acknowledged() <= 100u &&
         std::chrono::steady_clock::now() - start < 6 * testing::kNoHang) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  load.Stop();
  const auto state = ReadState(replicas[1]->data_port(),
                               replicas[1]->admin_port(), load.keys());
  const auto violations = Check(load.history(), state, {}, Rejections::kMayLag);
  EXPECT_TRUE(violations.empty()) << violations.front();
  EXPECT_GT(load.acknowledged(), 100u) << "the load stalled";
  auto metrics = Fetch(replicas[0]->admin_port(), "GET", "/metrics").body;
  EXPECT_GT(testing::MetricValue(
                metrics, "fencepost_etcd_txn_retries_total{cause=\"fence\"}"),
            0)
      << "three replicas on one fence must have met a failed compare";
}

// Each replica's cache of fences follows etcd's watch: a fence another
// replica moved is known here before the next write, whose transaction
// then compares the fence's latest revision and is not retried.
TEST_F(ReplicasTest, AFenceAnotherReplicaMovedIsKnownFromTheWatch) {
  auto a = Replica(etcd_.endpoints(), "watched-cache");
  auto b = Replica(etcd_.endpoints(), "watched-cache");
  testing::Watcher watch(a->admin_port(), "/v1/watch?prefix=w/");
  ASSERT_TRUE(watch.Opened());
  std::size_t raises = 0;
  for (int token = 1; token <= 9; token += 2) {
    // a writes (and caches the fence as its transaction left it), b raises
    // it, and a's watch reports the raise.
    ASSERT_EQ(Fetch(a->data_port(), "PUT", "/w/k",
                    {{"Fencing-Token", Token(token)}}, "a")
                  .status,
              token == 1 ? 201 : 200);
    ASSERT_EQ(Fetch(b->data_port(), "PUT", "/w/k",
                    {{"Fencing-Token", Token(token + 1)}}, "b")
                  .status,
              200);
    raises += 2;
    ASSERT_EQ(watch.Events(raises).size(), raises) << "a's watch is behind";
  }
  const std::string metrics = Fetch(a->admin_port(), "GET", "/metrics").body;
  for (const char* cause : {"fence", "value", "turn", "lease", "lease-limit"}) {
    EXPECT_EQ(testing::MetricValue(metrics,
                                   "fencepost_etcd_txn_retries_total{cause=\"" +
                                       std::string(cause) + "\"}"),
              0)
        << cause << ": a decided on a fence it had cached before b moved it";
  }
  EXPECT_EQ(Fetch(b->data_port(), "GET", "/w/k").header("fencing-token"), "10");
}

// 2 of 3 etcd members stopped: writes get 503 and nothing is acknowledged;
// /readyz says not ready. Members back: writes resume, fencepost never
// restarted.
TEST_F(ReplicasTest, QuorumLossIs503AndWritesResumeWhenItIsBack) {
  auto a = Replica(etcd_.endpoints(), "quorum");
  auto b = Replica(etcd_.endpoints(), "quorum");
  ASSERT_EQ(Fetch(a->data_port(), "PUT", "/k", {{"Fencing-Token", "1"}}, "one")
                .status,
            201);
  etcd_.StopMember(2);
  etcd_.StopMember(3);
  for (int i = 0; i < 3; ++i) {
    auto r = Fetch(b->data_port(), "PUT", "/k",
                   {{"Fencing-Token", Token(10 + i)}}, "lost");
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_NE(r.body.find("urn:fencepost:problem:fence-store-unavailable"),
              std::string::npos);
    EXPECT_EQ(r.header("retry-after"), "1");
  }
  // Leases too: no grant without quorum.
  auto lease = Fetch(a->admin_port(), "PUT", "/v1/leases/k", {},
                     "{\"holder\":\"x\",\"ttl_ms\":1000}");
  EXPECT_EQ(lease.status, 503) << lease.body;
  EXPECT_EQ(Fetch(a->admin_port(), "GET", "/v1/leases/k").status, 503);
  EXPECT_EQ(Fetch(a->admin_port(), "GET", "/readyz").status, 503);
  EXPECT_EQ(Fetch(a->admin_port(), "GET", "/livez").status, 200);

  etcd_.StartMember(2);
  etcd_.StartMember(3);
  int status = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    status =
        Fetch(b->data_port(), "PUT", "/k", {{"Fencing-Token", "20"}}, "twenty")
            .status;
    if (status == 200) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(status, 200);
  // Ready again too (a restarted member may still be catching up: readiness
  // follows within moments, never needing a restart of fencepost).
  int ready = 0;
  for (int i = 0; i < 100 && ready != 200; ++i) {
    ready = Fetch(a->admin_port(), "GET", "/readyz").status;
    if (ready != 200) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(ready, 200);
  EXPECT_EQ(Fetch(a->data_port(), "GET", "/k").body, "twenty");
  // A lost-quorum write may land later (etcd may still apply it), but it
  // can never be above the fence: 20 is the highest token sent.
  auto fence = Fetch(a->admin_port(), "GET", "/v1/fences/k");
  EXPECT_NE(fence.body.find("\"token\":20"), std::string::npos) << fence.body;
}

// The legacy-guard ordering across replicas: writes to one fence through two
// replicas, from concurrent clients; the store must see them in token order
// (two replicas never forward under one fence at once), and keep the value
// of the highest acknowledged write.
TEST_F(ReplicasTest, HttpBackendBehindTwoReplicasSeesWritesInTokenOrder) {
  testing::FakeUpstream upstream;
  auto a = HttpReplica(etcd_.endpoints(), "http-order", upstream.port());
  auto b = HttpReplica(etcd_.endpoints(), "http-order", upstream.port());
  std::atomic<std::uint64_t> counter{1};
  std::mutex mu;
  std::uint64_t highest = 0;
  int held = 0, rejected = 0;
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 60; ++i) {
        const auto& replica = (i + t) % 2 == 0 ? a : b;
        const std::uint64_t token = counter++;
        // The store takes 0-15 ms to apply each: forwards that overlapped
        // would land out of order.
        auto r = Fetch(replica->data_port(), "PUT", "/k",
                       {{"Fencing-Token", Token(token)}},
                       "jitter: body " + Token(token));
        std::lock_guard lock(mu);
        if (r.status / 100 == 2) {
          highest = std::max(highest, token);
        } else if (r.status == 409) {
          ++rejected;
        } else {
          EXPECT_EQ(r.status, 503) << r.body;
          EXPECT_NE(r.body.find("fence-held"), std::string::npos) << r.body;
          ++held;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  std::uint64_t last = 0;
  int puts = 0;
  for (const auto& seen : upstream.Applied()) {
    ++puts;
    const std::uint64_t token = std::stoull(seen.headers.at("fencing-token"));
    EXPECT_GE(token, last) << "the store applied token " << token << " after "
                           << last;
    last = std::max(last, token);
  }
  EXPECT_GT(puts, 20);
  EXPECT_EQ(upstream.Value("/k"), "jitter: body " + Token(highest));
  std::printf("http:// behind 2 replicas: %d forwarded, %d rejected, %d held\n",
              puts, rejected, held);
}

// The outcome-unknown gate across replicas: the store stalls a write that
// replica a forwarded past its timeout and applies it later. Replica b must
// not forward a newer write to that fence until the stalled one has had
// --upstream-settle to land, or the acknowledged newer write would be lost.
TEST_F(ReplicasTest, AnUnknownOutcomeOnOneReplicaHoldsTheFenceOnTheOther) {
  testing::FakeUpstream upstream(milliseconds(1000));
  const std::vector<std::string> timing = {"--upstream-timeout", "0.3",
                                           "--upstream-settle", "2"};
  auto a = HttpReplica(etcd_.endpoints(), "http-gate", upstream.port(), timing);
  auto b = HttpReplica(etcd_.endpoints(), "http-gate", upstream.port(), timing);
  EXPECT_EQ(
      Fetch(a->data_port(), "PUT", "/k", {{"Fencing-Token", "10"}}, "stall:A")
          .status,
      504);
  auto held =
      Fetch(b->data_port(), "PUT", "/k", {{"Fencing-Token", "11"}}, "B");
  EXPECT_EQ(held.status, 503) << held.body;
  EXPECT_NE(held.body.find("fence-held"), std::string::npos);
  EXPECT_FALSE(held.header("retry-after").empty());
  EXPECT_EQ(Fetch(b->data_port(), "PUT", "/k", {{"Fencing-Token", "9"}}, "old")
                .status,
            409)
      << "a stale token still gets 409 first";
  int status = 503;
  for (int i = 0; i < 1000 && status == 503; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    status = Fetch(b->data_port(), "PUT", "/k", {{"Fencing-Token", "11"}}, "B")
                 .status;
  }
  ASSERT_EQ(status / 100, 2);
  EXPECT_EQ(upstream.stalled_applied(), 1) << "A landed before B was allowed";
  EXPECT_EQ(upstream.Value("/k"), "B");
}

// A replica killed mid-forward cannot end its turn: the other replicas wait
// until its etcd lease runs out (503 fence-held meanwhile), then go on.
TEST_F(ReplicasTest, AReplicaKilledMidForwardHoldsTheFenceUntilItsLeaseEnds) {
  testing::FakeUpstream upstream(milliseconds(1500));
  const std::vector<std::string> timing = {"--upstream-timeout", "1",
                                           "--upstream-settle", "1"};
  auto a = HttpReplica(etcd_.endpoints(), "http-kill", upstream.port(), timing);
  auto b = HttpReplica(etcd_.endpoints(), "http-kill", upstream.port(), timing);
  std::thread stalled([&] {
    try {
      Fetch(a->data_port(), "PUT", "/k", {{"Fencing-Token", "10"}}, "stall:A");
    } catch (const std::exception&) {
      // a dies before it answers
    }
  });
  std::this_thread::sleep_for(milliseconds(300));
  a->Kill();
  stalled.join();
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(
      Fetch(b->data_port(), "PUT", "/k", {{"Fencing-Token", "11"}}, "B").status,
      503);
  int status = 503;
  while (status == 503 &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(milliseconds(100));
    status = Fetch(b->data_port(), "PUT", "/k", {{"Fencing-Token", "11"}}, "B")
                 .status;
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed)
          .count();
  ASSERT_EQ(status / 100, 2);
  EXPECT_EQ(upstream.stalled_applied(), 1) << "A landed before B was allowed";
  EXPECT_EQ(upstream.Value("/k"), "B");
  // The lease lives at least as long as a forward and its hold (2 s here).
  EXPECT_GT(waited, 1.5);
  std::printf("a killed replica held its fence for %.1f s\n", waited);
}

// fs: on storage the replicas share: writes to one fence through two
// replicas land in token order, so the file holds the highest acknowledged
// write, and a stale write through the other replica never touches it.
TEST_F(ReplicasTest, FsBackendOnSharedStorageBehindTwoReplicas) {
  testing::TempDir dir;
  const std::string store = dir / "store";
  std::vector<std::string> args = {"--fence-store",
                                   "etcd://" + etcd_.endpoints() + "/fs",
                                   "--backend", "fs:" + store};
  ServerProcess a("", args), b("", args);
  std::atomic<std::uint64_t> counter{1};
  std::atomic<std::uint64_t> highest{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const std::uint64_t token = counter++;
        const auto port = (i + t) % 2 ? a.data_port() : b.data_port();
        auto r = Fetch(port, "PUT", "/shared/k",
                       {{"Fencing-Token", Token(token)}}, "v" + Token(token));
        if (r.status / 100 == 2) {
          std::uint64_t seen = highest;
          while (seen < token && !highest.compare_exchange_weak(seen, token)) {
          }
        } else if (r.status != 409) {
          EXPECT_EQ(r.status, 503) << r.body;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(testing::ReadFile(store + "/shared/k"), "v" + Token(highest));
  EXPECT_EQ(Fetch(a.data_port(), "PUT", "/shared/k",
                  {{"Fencing-Token", Token(highest - 1)}}, "stale")
                .status,
            409);
  EXPECT_EQ(Fetch(b.data_port(), "GET", "/shared/k").body,
            "v" + Token(highest));
}

// The reliability harness's checks across replicas: writers spread over 3
// replicas while replicas and etcd members are killed with SIGKILL (one at a
// time) and restarted.
TEST_F(ReplicasTest, HistoryHoldsWhileReplicasAndEtcdMembersAreKilled) {
  // Behaviour, not speed: at least this many rounds of kills and this many
  // acknowledged writes (the cap only bounds a load that stalls, well
  // inside ctest's 300 s for the whole test with its etcd cluster).
  constexpr int kRounds = 8;
  constexpr std::size_t kWanted = 2000;
  const auto cap = std::chrono::seconds(150);
  std::mutex mu;
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  std::vector<std::uint16_t> ports;  // data ports of the live replicas
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(Replica(etcd_.endpoints(), "history"));
    ports.push_back(replicas.back()->data_port());
  }
  std::vector<std::string> keys;
  for (int i = 0; i < 48; ++i) keys.push_back("h/" + std::to_string(i));
  Load load(keys, 6, 12);
  load.CountUnavailableAsUnknown();
  load.Start([&mu, &ports,
              state = std::make_shared<std::mt19937>(std::random_device{}())] {
    std::lock_guard lock(mu);
    return ports[(*state)() % ports.size()];
  });

  const auto start = std::chrono::steady_clock::now();
  int rounds = 0;
  const Kills kills = KillInTurn(
      replicas, "history", mu, ports, &ServerProcess::data_port, [&] {
        return (rounds++ < kRounds || load.acknowledged() < kWanted) &&
               std::chrono::steady_clock::now() - start < cap;
      });
  std::this_thread::sleep_for(milliseconds(1500));  // the last member rejoins
  load.Stop();

  std::size_t accepted = 0, rejected = 0, unknown = 0;
  for (const Op& op : load.history()) {
    accepted += op.outcome == Op::Outcome::kAccepted;
    rejected += op.outcome == Op::Outcome::kRejected;
    unknown += op.outcome == Op::Outcome::kUnknown;
  }
  const auto state =
      ReadState(replicas[0]->data_port(), replicas[0]->admin_port(), keys);
  const auto violations = Check(load.history(), state, {}, Rejections::kMayLag);
  EXPECT_TRUE(violations.empty())
      << violations.size() << " violations, the first: " << violations.front();
  // Every replica reads the same state.
  for (int i = 1; i < 3; ++i) {
    const auto other =
        ReadState(replicas[i]->data_port(), replicas[i]->admin_port(), keys);
    for (const auto& [key, s] : state) {
      EXPECT_EQ(other.at(key).fence, s.fence) << key;
      EXPECT_EQ(other.at(key).body, s.body) << key;
    }
  }
  EXPECT_GE(accepted, kWanted)
      << "the load stalled: " << accepted << " writes acknowledged in "
      << cap.count() << " s";
  // A write without an answer (not a 503) is one in flight at a replica's
  // kill: its connection ended after that replica's kill began, and it was
  // sent at most kNoHang before (longer would be a replica that stopped
  // answering and was killed by chance). Any other lost connection is a
  // replica that failed by itself.
  for (const Disconnect& d : load.disconnects()) {
    bool explained = false;
    for (const auto& [port, at] : kills.killed) {
      if (port != d.port || d.at_ns < SteadyNs(at)) continue;
      explained = !d.op || load.history()[*d.op].sent_ns >
                               SteadyNs(at - testing::kNoHang);
      if (explained) break;
    }
    EXPECT_TRUE(explained) << "a connection to replica port " << d.port
                           << " ended with no kill to explain it: " << d.what;
  }
  std::printf(
      "replicas: %zu writes (%zu accepted, %zu rejected, %zu unknown), %d "
      "replica kills, %d etcd member kills, %zu violations\n",
      load.history().size(), accepted, rejected, unknown, kills.replicas,
      kills.members, violations.size());
}

// Candidates campaign for one lease, renew it and release it through
// random replicas while replicas and etcd members are killed. A 200 is a
// promise to its holder: it holds the lease (that term, that token) from
// then until ttl_ms after the request was sent, or until it sends a
// release. No other term may be granted (answered 200) before an earlier
// term's promise ends, and a term granted after another was answered has a
// higher token. Answers lost to the kills (no answer, 503) promise nothing.
TEST_F(ReplicasTest, LeasesHoldWhileReplicasAndEtcdMembersAreKilled) {
  constexpr std::int64_t kTtlMs = 1000;
  const auto duration = std::chrono::seconds(20);
  std::mutex mu;
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  std::vector<std::uint16_t> ports;  // admin ports of the live replicas
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(Replica(etcd_.endpoints(), "lease-chaos"));
    ports.push_back(replicas.back()->admin_port());
  }
  const auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  // A term: one holder's run of 200s with one token.
  struct Term {
    int holder = 0;
    std::uint64_t token = 0;
    std::int64_t first_sent = 0, first_acked = 0;
    std::int64_t promise_end = 0;  // last 200's send + ttl, or the release
  };
  std::vector<Term> terms;
  std::atomic<bool> stop = false;
  std::atomic<int> answered = 0, denied = 0, lost = 0;
  const auto request = [&](const std::string& method,
                           const testing::Headers& headers,
                           const std::string& body, int* status) {
    std::uint16_t port = 0;
    {
      std::lock_guard lock(mu);
      port = ports[std::random_device{}() % ports.size()];
    }
    try {
      auto r = Fetch(port, method, "/v1/leases/chaos", headers, body);
      *status = r.status;
      return r;
    } catch (const std::exception&) {
      *status = 0;  // a killed replica
      return testing::HttpResponse{};
    }
  };
  std::vector<std::thread> candidates;
  for (int c = 0; c < 4; ++c) {
    candidates.emplace_back([&, c] {
      std::mt19937 random(static_cast<std::uint32_t>(c) * 7919u + 1u);
      const std::string holder = "c" + std::to_string(c);
      constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
      std::size_t term = kNone;  // its index in terms while it holds
      while (!stop) {
        const std::int64_t sent = now_ns();
        int status = 0;
        auto r = request("PUT", {}, LeaseBody(holder, kTtlMs), &status);
        const std::int64_t acked = now_ns();
        if (status == 200) {
          ++answered;
          const std::uint64_t token = std::stoull(r.header("fencing-token"));
          std::lock_guard lock(mu);
          if (term == kNone || terms[term].token != token) {
            terms.push_back({c, token, sent, acked, 0});
            term = terms.size() - 1;
          }
          terms[term].promise_end = sent + kTtlMs * 1000000;
        } else {
          (status == 409 ? denied : lost)++;
        }
        const auto choice = random() % 8;
        if (term != kNone && status == 200 && choice == 0) {
          // Release: the promise ends when the release is sent.
          std::uint64_t token = 0;
          {
            std::lock_guard lock(mu);
            terms[term].promise_end =
                std::min(terms[term].promise_end, now_ns());
            token = terms[term].token;
          }
          int released = 0;
          request("DELETE", {{"Fencing-Token", Token(token)}},
                  "{\"holder\":\"" + holder + "\"}", &released);
          term = kNone;
        } else if (term != kNone && status == 200 && choice == 1) {
          term = kNone;  // stops renewing: the lease runs out
          std::this_thread::sleep_for(milliseconds(1500));
        }
        std::this_thread::sleep_for(milliseconds(100 + random() % 150));
      }
    });
  }

  const auto start = std::chrono::steady_clock::now();
  const Kills kills = KillInTurn(
      replicas, "lease-chaos", mu, ports, &ServerProcess::admin_port,
      [&] { return std::chrono::steady_clock::now() - start < duration; });
  stop = true;
  for (auto& t : candidates) t.join();

  std::vector<std::string> violations;
  for (const Term& a : terms) {
    for (const Term& b : terms) {
      if (a.token >= b.token) continue;
      if (b.first_acked < a.promise_end) {
        violations.push_back(
            "c" + std::to_string(b.holder) + " was granted token " +
            Token(b.token) + " " +
            std::to_string((a.promise_end - b.first_acked) / 1000000) +
            " ms before the term of c" + std::to_string(a.holder) +
            " with token " + Token(a.token) + " could end");
      }
      if (a.first_sent > b.first_acked) {
        violations.push_back("token " + Token(b.token) +
                             " was answered before token " + Token(a.token) +
                             " was asked for");
      }
    }
  }
  EXPECT_TRUE(violations.empty())
      << violations.size() << " violations, the first: " << violations.front();
  std::set<int> holders;
  for (const Term& t : terms) holders.insert(t.holder);
  EXPECT_GE(terms.size(), 10u) << "too few terms to say anything";
  EXPECT_GE(holders.size(), 2u);
  std::printf(
      "leases: %zu terms of %zu holders, %d answers, %d denied, %d lost; %d "
      "replica kills, %d etcd member kills, %zu violations\n",
      terms.size(), holders.size(), answered.load(), denied.load(), lost.load(),
      kills.replicas, kills.members, violations.size());
}

// etcds://: fences in an etcd that serves TLS only and asks for client
// certificates. The replica verifies etcd's certificate against
// --fence-store-ca and presents --fence-store-cert; without a client
// certificate, or trusting another CA, or in plain HTTP, nothing is
// acknowledged.
TEST(EtcdTlsTest, FencesThroughAnEtcdThatServesOnlyVerifiedTls) {
  testing::TempDir dir;
  const std::string certs = dir / "certs";
  std::filesystem::create_directories(certs);
  const auto run = [](const std::string& command) {
    ASSERT_EQ(std::system((command + " >/dev/null 2>&1").c_str()), 0)
        << command;
  };
  const std::string ec =
      "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const std::string ca : {"ca", "other-ca"}) {
    run("openssl req -x509 " + ec + " -keyout " + certs + "/" + ca +
        ".key -out " + certs + "/" + ca + ".pem -days 1 -subj /CN=" + ca);
  }
  // clientAuth too: etcd's JSON gateway dials etcd's own gRPC port with the
  // server certificate as its client certificate.
  std::ofstream(certs + "/server.ext")
      << "subjectAltName=IP:127.0.0.1\n"
         "extendedKeyUsage=serverAuth,clientAuth\n";
  std::ofstream(certs + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  for (const std::string name : {"server", "client"}) {
    run("openssl req " + ec + " -keyout " + certs + "/" + name + ".key -out " +
        certs + "/" + name + ".csr -subj /CN=" + name);
    run("openssl x509 -req -in " + certs + "/" + name + ".csr -CA " + certs +
        "/ca.pem -CAkey " + certs + "/ca.key -CAcreateserial -days 1 -out " +
        certs + "/" + name + ".pem -extfile " + certs + "/" + name + ".ext");
  }
  const std::string script = FENCEPOST_ETCD_SH;
  const std::string url = ShellLine("ETCD_TLS_DIR=" + certs + " " + script +
                                    " start " + std::string(dir / "etcd"));
  struct Stop {
    std::string command;
    ~Stop() { Shell(command); }
  } stop{script + " stop " + std::string(dir / "etcd")};
  ASSERT_EQ(url.rfind("etcds://127.0.0.1:", 0), 0u) << "etcd did not start";

  const auto replica = [&](const std::string& store,
                           std::vector<std::string> tls) {
    std::vector<std::string> args = {
        "--fence-store", store + "/tls",          "--backend",
        "etcd",          "--fence-store-timeout", "1"};
    args.insert(args.end(), tls.begin(), tls.end());
    return std::make_unique<ServerProcess>("", args);
  };
  auto good = replica(
      url, {"--fence-store-ca", certs + "/ca.pem", "--fence-store-cert",
            certs + "/client.pem", "--fence-store-key", certs + "/client.key"});
  EXPECT_EQ(
      Fetch(good->data_port(), "PUT", "/k", {{"Fencing-Token", "5"}}, "five")
          .status,
      201);
  EXPECT_EQ(
      Fetch(good->data_port(), "PUT", "/k", {{"Fencing-Token", "4"}}, "four")
          .status,
      409);
  EXPECT_EQ(Fetch(good->data_port(), "GET", "/k").body, "five");
  EXPECT_EQ(Fetch(good->admin_port(), "GET", "/readyz").status, 200);

  // A replica that cannot reach etcd over verified TLS does not start: its
  // first read (the scopes' check) fails, exit 1, saying why.
  const std::string plain = "etcd://" + url.substr(8);
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {url, {"--fence-store-ca", certs + "/ca.pem"}},
      {url,
       {"--fence-store-ca", certs + "/other-ca.pem", "--fence-store-cert",
        certs + "/client.pem", "--fence-store-key", certs + "/client.key"}},
      {plain, {}}};
  for (const auto& [store, tls] : bad) {
    std::vector<std::string> args = {"serve",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--admin-listen",
                                     "127.0.0.1:0",
                                     "--fence-store",
                                     store + "/tls",
                                     "--backend",
                                     "etcd",
                                     "--fence-store-timeout",
                                     "1"};
    args.insert(args.end(), tls.begin(), tls.end());
    const testing::RunResult refused = testing::RunFencepost(args);
    EXPECT_EQ(refused.exit_status, 1) << refused.output;
    EXPECT_NE(refused.output.find("cannot check the fence scopes"),
              std::string::npos)
        << refused.output;
  }
  EXPECT_EQ(Fetch(good->data_port(), "GET", "/k").body, "five")
      << "nothing was written without verified TLS";
}

}  // namespace
}  // namespace fencepost::reliability
