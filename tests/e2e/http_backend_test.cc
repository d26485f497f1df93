// --backend http://: the real binary in front of a real nginx WebDAV store,
// and in front of a fake store that can stall a write past the timeout.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::FakeUpstream;
using testing::Fetch;
using testing::HttpClient;
using testing::MetricValue;
using testing::NginxProcess;
using testing::ServerProcess;
using testing::TempDir;

std::string Backend(std::uint16_t port, const std::string& base = "") {
  return "http://127.0.0.1:" + std::to_string(port) + base;
}

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(HttpBackendTest, SeedStoryThroughNginxWebDav) {
  TempDir dir;
  NginxProcess nginx(dir / "root", dir / "nginx");
  ServerProcess server(dir / "data", {"--backend", Backend(nginx.port())});
  const auto port = server.data_port();
  auto a = Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "from A");
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(a.header("fencing-token"), "33");
  auto b = Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "34"}}, "from B");
  EXPECT_EQ(b.status / 100, 2);
  EXPECT_EQ(b.header("fencing-token"), "34");
  auto stale =
      Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "stale A");
  EXPECT_EQ(stale.status, 409);

  // The stale write never reached nginx; B's value is what nginx holds.
  EXPECT_EQ(testing::ReadFile(fs::path(dir / "root") / "orders" / "1"),
            "from B");
  EXPECT_EQ(Count(nginx.AccessLog(), "\"PUT /orders/1 "), 2);
  auto get = Fetch(port, "GET", "/orders/1");
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "from B");
  EXPECT_EQ(get.header("server").rfind("nginx", 0), 0u) << "passed through";

  EXPECT_EQ(
      Fetch(port, "DELETE", "/orders/1", {{"Fencing-Token", "35"}}).status,
      204);
  EXPECT_FALSE(fs::exists(fs::path(dir / "root") / "orders" / "1"));
  EXPECT_EQ(Fetch(port, "GET", "/orders/1").status, 404);
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/readyz").status, 200);
}

TEST(HttpBackendTest, ForwardsThePathUnderBaseWithoutHopByHopFields) {
  TempDir dir;
  FakeUpstream upstream;
  {
    ServerProcess server(dir / "data",
                         {"--backend", Backend(upstream.port(), "/base/")});
    HttpClient client(server.data_port());
    auto r = client.Request("PUT", "/a/b%20c?x=1",
                            {{"Fencing-Token", "5"},
                             {"Connection", "keep-alive, X-Hop"},
                             {"X-Hop", "1"},
                             {"Keep-Alive", "timeout=5"},
                             {"X-End", "2"}},
                            "v");
    EXPECT_EQ(r.status, 201);
    ASSERT_EQ(upstream.Requests().size(), 1u);
    const auto seen = upstream.Requests().back();
    EXPECT_EQ(seen.target, "/base/a/b%20c?x=1") << "forwarded unchanged";
    EXPECT_EQ(seen.headers.count("x-hop"), 0u);
    EXPECT_EQ(seen.headers.count("keep-alive"), 0u);
    EXPECT_EQ(seen.headers.count("fencing-token"), 0u);
    EXPECT_EQ(seen.headers.at("x-end"), "2");
    EXPECT_EQ(seen.headers.at("host"),
              "127.0.0.1:" + std::to_string(upstream.port()));
    EXPECT_EQ(upstream.Value("/base/a/b%20c?x=1"), "v");
    auto get = client.Request("GET", "/a/b%20c?x=1");
    EXPECT_EQ(get.body, "v");
    // POST and PATCH are fenced like PUT.
    EXPECT_EQ(
        client.Request("POST", "/a/p", {{"Fencing-Token", "4"}}, "p").status,
        201);
    EXPECT_EQ(
        client.Request("PATCH", "/a/p", {{"Fencing-Token", "3"}}, "q").status,
        409);
    EXPECT_EQ(upstream.Value("/base/a/p"), "p");
  }
  ServerProcess forwarding(
      dir / "data2",
      {"--backend", Backend(upstream.port()), "--forward-token"});
  Fetch(forwarding.data_port(), "PUT", "/t", {{"Fencing-Token", "9"}}, "v");
  EXPECT_EQ(upstream.Requests().back().headers.at("fencing-token"), "9");
}

// The delayed-write hazard: the upstream stalls write A past the timeout and
// applies it later. With the hold, B cannot be acknowledged until A has had
// its chance to land, so B is what the store keeps.
TEST(HttpBackendTest, UnknownOutcomeHoldsTheFenceUntilTheStallSettles) {
  TempDir dir;
  FakeUpstream upstream(1000ms);
  ServerProcess server(dir / "data",
                       {"--backend", Backend(upstream.port()),
                        "--upstream-timeout", "0.3", "--upstream-settle", "2"});
  const auto port = server.data_port();
  auto a = Fetch(port, "PUT", "/k", {{"Fencing-Token", "10"}}, "stall:A");
  EXPECT_EQ(a.status, 504);
  EXPECT_NE(a.body.find("upstream-outcome-unknown"), std::string::npos);

  auto held = Fetch(port, "PUT", "/k", {{"Fencing-Token", "11"}}, "B");
  EXPECT_EQ(held.status, 503);
  EXPECT_FALSE(held.header("retry-after").empty());
  EXPECT_EQ(Fetch(port, "PUT", "/k", {{"Fencing-Token", "9"}}, "old").status,
            409)
      << "a stale token still gets 409 first";
  EXPECT_EQ(Fetch(server.admin_port(), "PUT", "/v1/fences/k",
                  {{"Fencing-Token", "10"}})
                    .status /
                100,
            2)
      << "bumps are not held";

  int status = 0;
  for (int i = 0; i < 100 && status / 100 != 2; ++i) {
    std::this_thread::sleep_for(100ms);
    status = Fetch(port, "PUT", "/k", {{"Fencing-Token", "11"}}, "B").status;
  }
  ASSERT_EQ(status / 100, 2);
  EXPECT_EQ(upstream.stalled_applied(), 1) << "A landed before B was allowed";
  EXPECT_EQ(upstream.Value("/k"), "B");
  auto metrics = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "fencepost_upstream_outcome_unknown_total"),
            1);
}

// The same story with the hold switched off (a test-only switch): B is
// acknowledged at once and then overwritten by the late A. This is the
// failure the hold exists for, so the test above is known to bite.
TEST(HttpBackendTest, WithoutTheHoldALateWriteOverwritesANewerOne) {
  TempDir dir;
  FakeUpstream upstream(1000ms);
  ServerProcess server(dir / "data",
                       {"--backend", Backend(upstream.port()),
                        "--upstream-timeout", "0.3", "--upstream-settle", "2"},
                       {"FENCEPOST_TEST_DISABLE_UPSTREAM_GATE=1"});
  const auto port = server.data_port();
  EXPECT_EQ(
      Fetch(port, "PUT", "/k", {{"Fencing-Token", "10"}}, "stall:A").status,
      504);
  EXPECT_EQ(
      Fetch(port, "PUT", "/k", {{"Fencing-Token", "11"}}, "B").status / 100, 2);
  for (int i = 0; i < 50 && upstream.stalled_applied() == 0; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(upstream.Value("/k"), "stall:A")
      << "without the hold, the acknowledged B is lost";
}

TEST(HttpBackendTest, UpstreamDownIs502AndNotReady) {
  TempDir dir;
  const std::uint16_t port = testing::FreePort();
  ServerProcess server(dir / "data",
                       {"--backend", Backend(port), "--upstream-timeout", "1"});
  auto put =
      Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(put.status, 502);
  EXPECT_NE(put.body.find("upstream-failed"), std::string::npos);
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/k").status, 502);
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/readyz").status, 503);

  FakeUpstream upstream(1000ms, port);
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/readyz").status, 200);
  EXPECT_EQ(
      Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", "2"}}, "v")
          .status,
      201);
}

TEST(HttpBackendTest, ObserveModeForwardsWhatEnforceWouldReject) {
  TempDir dir;
  FakeUpstream upstream;
  ServerProcess server(dir / "data", {"--backend", Backend(upstream.port()),
                                      "--mode", "observe"});
  const auto port = server.data_port();
  EXPECT_EQ(Fetch(port, "PUT", "/k", {{"Fencing-Token", "10"}}, "new").status,
            201);
  auto stale = Fetch(port, "PUT", "/k", {{"Fencing-Token", "5"}}, "old");
  EXPECT_EQ(stale.status / 100, 2);
  EXPECT_EQ(stale.header("fencing-token"), "10");
  EXPECT_EQ(upstream.Value("/k"), "old");
  auto metrics = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "fencepost_writes_would_reject_total"), 1);
}

}  // namespace
}  // namespace fencepost
