// Watches across replicas (--fence-store etcd://, a real etcd on 127.0.0.1):
// a stream or a long poll on one replica sees the changes made through
// another, fed by etcd's own watch, each once and in order, and the
// replica's own changes once too (not again from its own answers).

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/event_stream.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::reliability {
namespace {

using testing::Fetch;
using testing::ServerProcess;
using testing::Shell;
using testing::ShellLine;
using testing::TempDir;
using testing::Watcher;

const std::string kScript = FENCEPOST_ETCD_SH;

std::vector<std::string> ReplicaArgs(const std::string& url) {
  return {"--fence-store", url + "/watch", "--backend", "etcd"};
}

// One etcd for a test, and its URL.
class ReplicaWatchTest : public ::testing::Test {
 protected:
  ReplicaWatchTest() : url_(ShellLine(kScript + " start " + dir_ / "etcd")) {}
  ~ReplicaWatchTest() override { Shell(kScript + " stop " + dir_ / "etcd"); }

  TempDir dir_;
  const std::string url_;
};

std::size_t Count(const std::vector<testing::Event>& events,
                  const std::string& type, const std::string& part) {
  std::size_t n = 0;
  for (const auto& e : events) {
    n += e.type == type && e.data.find(part) != std::string::npos;
  }
  return n;
}

TEST_F(ReplicaWatchTest, AWatchOnOneReplicaSeesEveryReplicasChangesOnce) {
  ASSERT_FALSE(url_.empty()) << "etcd did not start";
  ServerProcess a("", ReplicaArgs(url_));
  ServerProcess b("", ReplicaArgs(url_));
  Watcher watcher(b.admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // Through A: a write (its repeat at the same token is no event), a lease
  // granted, renewed and released, and a stale write (refused on A: A's
  // own event, not B's).
  ASSERT_EQ(
      Fetch(a.data_port(), "PUT", "/k", {{"Fencing-Token", "5"}}, "v").status,
      201);
  ASSERT_EQ(
      Fetch(a.data_port(), "PUT", "/k", {{"Fencing-Token", "5"}}, "w").status,
      200);
  const std::string lease = R"({"holder":"h","ttl_ms":60000})";
  ASSERT_EQ(Fetch(a.admin_port(), "PUT", "/v1/leases/l", {}, lease).status,
            200);
  ASSERT_EQ(Fetch(a.admin_port(), "PUT", "/v1/leases/l", {}, lease).status,
            200);
  ASSERT_EQ(Fetch(a.admin_port(), "DELETE", "/v1/leases/l",
                  {{"Fencing-Token", "1"}}, R"({"holder":"h"})")
                .status,
            204);
  ASSERT_EQ(
      Fetch(a.data_port(), "PUT", "/k", {{"Fencing-Token", "4"}}, "x").status,
      409);
  // Through B itself: a bump.
  ASSERT_EQ(
      Fetch(b.admin_port(), "PUT", "/v1/fences/k", {{"Fencing-Token", "9"}})
          .status,
      200);
  const std::vector<testing::Event> events = watcher.Events(6);
  // Anything more (a change told twice) would come within this.
  const std::vector<testing::Event> all = watcher.EventsFor(500);
  ASSERT_GE(events.size(), 6u) << watcher.raw();
  EXPECT_EQ(Count(all, "fence", "\"fence\":\"k\",\"token\":5"), 1u)
      << watcher.raw();
  EXPECT_EQ(Count(all, "fence", "\"fence\":\"k\",\"token\":9"), 1u)
      << "B's own bump once, not again from its own answer\n"
      << watcher.raw();
  EXPECT_EQ(Count(all, "fence", "\"fence\":\"l\",\"token\":1"), 1u)
      << watcher.raw();
  EXPECT_EQ(Count(all, "lease", "\"change\":\"granted\""), 1u) << watcher.raw();
  EXPECT_EQ(Count(all, "lease", "\"change\":\"renewed\""), 1u) << watcher.raw();
  EXPECT_EQ(Count(all, "lease", "\"change\":\"released\""), 1u)
      << watcher.raw();
  EXPECT_EQ(Count(all, "rejection", ""), 0u)
      << "a refusal is told by the replica that refused it\n"
      << watcher.raw();
  for (std::size_t i = 1; i < all.size(); ++i) {
    EXPECT_GT(all[i].id, all[i - 1].id);
  }
  // The order of one fence's changes: 5, then 9.
  std::size_t at5 = all.size(), at9 = all.size();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].data.find("\"fence\":\"k\",\"token\":5") != std::string::npos)
      at5 = i;
    if (all[i].data.find("\"fence\":\"k\",\"token\":9") != std::string::npos)
      at9 = i;
  }
  EXPECT_LT(at5, at9);

  // A long poll on B, answered by a bump through A.
  std::thread bump([&a] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Fetch(a.admin_port(), "PUT", "/v1/fences/k", {{"Fencing-Token", "12"}});
  });
  const auto polled =
      Fetch(b.admin_port(), "GET", "/v1/fences/k?wait_above=9&timeout_ms=8000");
  bump.join();
  EXPECT_EQ(polled.status, 200);
  EXPECT_NE(polled.body.find("\"token\":12"), std::string::npos) << polled.body;
  EXPECT_FALSE(polled.has("fencepost-watch")) << "woken, not timed out";
}

// A lease left to run out and granted to another holder through one
// replica: a stream on the other is told it expired, then the new grant,
// once each (the grant's record replaces the one that ran out).
TEST_F(ReplicaWatchTest, AnExpiryAndTheNextGrantAreToldOnEveryReplica) {
  ASSERT_FALSE(url_.empty()) << "etcd did not start";
  ServerProcess a("", ReplicaArgs(url_));
  ServerProcess b("", ReplicaArgs(url_));
  Watcher watcher(b.admin_port(), "/v1/watch?prefix=l");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(Fetch(a.admin_port(), "PUT", "/v1/leases/l", {},
                  R"({"holder":"h1","ttl_ms":1000})")
                .status,
            200);
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  const auto second = Fetch(a.admin_port(), "PUT", "/v1/leases/l", {},
                            R"({"holder":"h2","ttl_ms":60000})");
  ASSERT_EQ(second.status, 200) << second.body;
  watcher.Events(4);
  const std::vector<testing::Event> all = watcher.EventsFor(500);
  std::vector<std::string> changes;
  std::string last_lease;
  for (const auto& e : all) {
    if (e.type != "lease") continue;
    const auto at = e.data.find("\"change\":\"");
    changes.push_back(
        e.data.substr(at + 10, e.data.find('"', at + 10) - at - 10));
    last_lease = e.data;
  }
  EXPECT_EQ(changes,
            (std::vector<std::string>{"granted", "expired", "granted"}))
      << watcher.raw();
  EXPECT_NE(last_lease.find("\"holder\":\"h2\""), std::string::npos)
      << watcher.raw();
}

}  // namespace
}  // namespace fencepost::reliability
