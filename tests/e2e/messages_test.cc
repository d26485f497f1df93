// What the server says, to clients and in its log: the method an oversized
// request is counted under, the level names, the start-up line's fields,
// the access log and the lease events.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/testing/event_stream.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::HttpClient;
using testing::MetricValue;
using testing::ServerProcess;
using testing::TempDir;

// Waits (at most 10 s) until the server's log holds `text`; returns the log.
std::string LogWith(const ServerProcess& server, const std::string& text) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string log = server.Log();
  while (log.find(text) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log = server.Log();
  }
  return log;
}

std::string Port(std::uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

TEST(MessagesTest, AnOversizedPutIsCountedWithItsMethod) {
  TempDir dir;
  ServerProcess server(dir.path(), {"--max-body", "16"});
  HttpClient client(server.data_port());
  auto r = client.Raw(
      "PUT /k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Content-Length: 100\r\n\r\n");
  EXPECT_EQ(r.status, 413);
  const std::string m = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(m,
                        "fencepost_http_requests_total{code=\"413\",method="
                        "\"PUT\",port=\"data\"}"),
            1)
      << m;
  EXPECT_EQ(MetricValue(m,
                        "fencepost_http_requests_total{code=\"413\",method="
                        "\"OTHER\",port=\"data\"}"),
            -1);
}

TEST(MessagesTest, LogLinesSpellWarnAsTheFlagDoes) {
  TempDir dir;
  ServerProcess server(dir.path());
  auto set = Fetch(server.admin_port(), "PUT", "/v1/log-level", {}, "warn");
  EXPECT_EQ(set.status, 200);
  EXPECT_EQ(set.body, "{\"level\":\"warn\"}\n");
  const std::string log = LogWith(server, "log level set to warn");
  EXPECT_NE(log.find("Z warn log level set to warn"), std::string::npos) << log;
  EXPECT_EQ(log.find(" warning "), std::string::npos) << log;
}

// One rule for a level's name: the flag's and the endpoint's are the same
// seven words, spdlog's own "warning" and "err" refused by both.
TEST(MessagesTest, TheLogLevelFlagAndEndpointTakeTheSameNames) {
  TempDir dir;
  ServerProcess server(dir.path());
  for (const char* name : {"warning", "err", "WARN", "information", ""}) {
    const auto set =
        Fetch(server.admin_port(), "PUT", "/v1/log-level", {}, name);
    EXPECT_EQ(set.status, 400) << name << ": " << set.body;
    EXPECT_NE(set.body.find("trace, debug, info, warn, error, critical or off"),
              std::string::npos)
        << set.body;
    const auto flag = testing::RunFencepost(
        {"serve", "--log-level", name, "--data-dir", dir / "unused"});
    EXPECT_EQ(flag.exit_status, 2) << name << ": " << flag.output;
    EXPECT_NE(
        flag.output.find("trace, debug, info, warn, error, critical or off"),
        std::string::npos)
        << flag.output;
  }
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/log-level").body,
            "{\"level\":\"info\"}\n")
      << "a refused name changed the level";
  for (const char* name :
       {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    const auto set =
        Fetch(server.admin_port(), "PUT", "/v1/log-level", {}, name);
    EXPECT_EQ(set.status, 200) << name;
    EXPECT_EQ(set.body, std::string("{\"level\":\"") + name + "\"}\n");
  }
}

// A page's limit: the 400 says what is taken, a number above the most is
// clamped rather than refused.
TEST(MessagesTest, TheLimitErrorSaysWhatIsTaken) {
  TempDir dir;
  ServerProcess server(dir.path());
  for (const char* path : {"/v1/fences", "/v1/leases", "/v1/rejections"}) {
    const auto zero =
        Fetch(server.admin_port(), "GET", std::string(path) + "?limit=0");
    EXPECT_EQ(zero.status, 400) << path;
    EXPECT_NE(zero.body.find("at least 1 (one above 1000 is taken as 1000)"),
              std::string::npos)
        << zero.body;
    EXPECT_EQ(
        Fetch(server.admin_port(), "GET", std::string(path) + "?limit=5000")
            .status,
        200)
        << path;
  }
}

TEST(MessagesTest, TheJsonStartUpLineCarriesTheBoundAddresses) {
  TempDir dir;
  ServerProcess server(dir.path(), {"--log-format", "json"});
  const std::string log = server.Log();
  EXPECT_NE(log.find("\"event\":\"started\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"data\":\"" + Port(server.data_port()) + "\""),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("\"admin\":\"" + Port(server.admin_port()) + "\""),
            std::string::npos)
      << log;
}

TEST(MessagesTest, TheAccessLogIsOffByDefault) {
  TempDir dir;
  ServerProcess server(dir.path());
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/k").status, 404);
  // The 404 of a second connection is answered after the first's log line
  // would have been written.
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/k").status, 404);
  EXPECT_EQ(server.Log().find("event=access"), std::string::npos)
      << server.Log();
}

TEST(MessagesTest, TheAccessLogHasOneLinePerRequestWithItsTargetEscaped) {
  TempDir dir;
  ServerProcess server(dir.path(), {"--access-log"});
  // The access log is not filtered by the level.
  ASSERT_EQ(
      Fetch(server.admin_port(), "PUT", "/v1/log-level", {}, "error").status,
      200);
  EXPECT_EQ(Fetch(server.data_port(), "PUT", "/orders/1",
                  {{"Fencing-Token", "3"}}, "hello")
                .status,
            201);
  HttpClient client(server.data_port());
  EXPECT_EQ(client.Raw("GET /a\"b\xff HTTP/1.1\r\nHost: x\r\n\r\n").status,
            400);
  const std::string log = LogWith(server, "status=400");
  EXPECT_NE(log.find("info access event=access port=data client=127.0.0.1:"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(" method=PUT target=/orders/1 status=201 bytes=0 "
                     "duration_ms="),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(" method=GET target=\"/a\\\"b\\xff\" status=400 bytes="),
            std::string::npos)
      << log;
}

TEST(MessagesTest, TheAccessLogIsJsonWithTheLogAndSetByItsEnvVar) {
  TempDir dir;
  ServerProcess server(dir.path(), {"--log-format", "json"},
                       {"FENCEPOST_ACCESS_LOG=true"});
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/livez").status, 200);
  const std::string log = LogWith(server, "\"event\":\"access\"");
  EXPECT_NE(log.find("\"msg\":\"access\",\"event\":\"access\",\"port\":"
                     "\"admin\",\"client\":\"127.0.0.1:"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("\"method\":\"GET\",\"target\":\"/livez\",\"status\":"
                     "200,\"bytes\":3,\"duration_ms\":"),
            std::string::npos)
      << log;
}

// The store notices a lease that ran out on its own: with nobody asking
// (no renewal, no read, no scrape), its loss is logged and counted once.
TEST(MessagesTest, ALeaseThatRunsOutIsNoticedWithoutAnyRequest) {
  TempDir dir;
  ServerProcess server(dir.path(), {"--log-format", "json"});
  ASSERT_EQ(Fetch(server.admin_port(), "PUT", "/v1/leases/jobs/quiet", {},
                  "{\"holder\":\"A\",\"ttl_ms\":100}")
                .status,
            200);
  const std::string log = LogWith(server, "\"event\":\"lease_lost\"");
  ASSERT_NE(log.find("\"event\":\"lease_lost\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"lease\":\"jobs/quiet\""), std::string::npos) << log;
  const std::string m = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(m, "fencepost_lease_expirations_total"), 1) << m;
  EXPECT_EQ(MetricValue(m, "fencepost_leases_held"), 0) << m;
}

// The leader side's production checklist: each grant, loss and release is a
// log line with the holder, the token, the generation (the lease's
// transitions), when it expires and why.
TEST(MessagesTest, LeaseGrantsLossesAndReleasesAreLogged) {
  TempDir dir;
  ServerProcess server(dir.path(), {"--log-format", "json"});
  const auto acquire = [&](const std::string& holder, int ttl_ms) {
    return Fetch(server.admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                 "{\"holder\":\"" + holder +
                     "\",\"ttl_ms\":" + std::to_string(ttl_ms) + "}");
  };
  ASSERT_EQ(acquire("A", 100).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto b = acquire("B", 5000);
  ASSERT_EQ(b.status, 200);
  EXPECT_EQ(b.header("fencing-token"), "2");
  EXPECT_EQ(Fetch(server.admin_port(), "DELETE", "/v1/leases/jobs/leader",
                  {{"Fencing-Token", "2"}}, "{\"holder\":\"B\"}")
                .status,
            204);
  const std::string log = LogWith(server, "\"event\":\"lease_released\"");
  // One line per event, in order.
  const auto line_of = [&](const std::string& event,
                           const std::string& holder) {
    const std::string tag = "\"event\":\"" + event + "\"";
    for (std::size_t at = log.find(tag); at != std::string::npos;
         at = log.find(tag, at + 1)) {
      const std::size_t begin = log.rfind('\n', at) + 1;
      const std::string line = log.substr(begin, log.find('\n', at) - begin);
      if (line.find("\"holder\":\"" + holder + "\"") != std::string::npos) {
        return line;
      }
    }
    return std::string();
  };
  const std::string first = line_of("lease_granted", "A");
  EXPECT_NE(first.find("\"lease\":\"jobs/leader\""), std::string::npos) << log;
  EXPECT_NE(first.find("\"token\":1,\"generation\":0,\"ttl_ms\":100,"
                       "\"expires_at\":\""),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("\"reason\":\"first grant\""), std::string::npos);
  const std::string lost = line_of("lease_lost", "A");
  EXPECT_NE(lost.find("\"level\":\"warn\""), std::string::npos) << lost;
  EXPECT_NE(lost.find("\"token\":1,\"generation\":0,\"ttl_ms\":100,"
                      "\"expires_at\":\""),
            std::string::npos)
      << lost;
  EXPECT_NE(lost.find("\"reason\":\"no renewal within ttl_ms; it ran out\""),
            std::string::npos);
  const std::string second = line_of("lease_granted", "B");
  EXPECT_NE(second.find("\"token\":2,\"generation\":1,\"ttl_ms\":5000,"),
            std::string::npos)
      << second;
  EXPECT_NE(second.find("\"previous_holder\":\"A\",\"reason\":\"the previous "
                        "holder's lease ran out\""),
            std::string::npos)
      << second;
  const std::string released = line_of("lease_released", "B");
  EXPECT_NE(released.find("\"token\":2,\"generation\":1,\"reason\":\"released "
                          "by its holder\""),
            std::string::npos)
      << released;
  EXPECT_LT(log.find(first), log.find(lost));
  EXPECT_LT(log.find(lost), log.find(second));
  const std::string m = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(m, "fencepost_lease_expirations_total"), 1) << m;
  EXPECT_EQ(MetricValue(m, "fencepost_lease_grants_total"), 2);
  EXPECT_EQ(MetricValue(m, "fencepost_lease_releases_total"), 1);
}

// A bump refused for a stale token is told as a refused write is: a
// `rejection` event for watchers, the rejection journal, the count and
// the log line.
TEST(MessagesTest, AStaleBumpIsToldAsARejection) {
  TempDir dir;
  ServerProcess server(dir.path(), {"--log-format", "json"});
  const auto admin = server.admin_port();
  const auto bump = [&](const std::string& name, int token) {
    return Fetch(admin, "PUT", "/v1/fences/" + name,
                 {{"Fencing-Token", std::to_string(token)}})
        .status;
  };
  testing::Watcher watcher(admin, "/v1/watch?prefix=p/");
  // The stream is open once a raise of a marker fence comes through it.
  bool open = false;
  for (int token = 1; token <= 100 && !open; ++token) {
    ASSERT_EQ(bump("p/marker", token), token == 1 ? 201 : 200);
    open = !watcher.EventsFor(100).empty();
  }
  ASSERT_TRUE(open) << watcher.raw();
  const std::size_t before = watcher.EventsFor(0).size();
  ASSERT_EQ(bump("p/a", 9), 201);
  ASSERT_EQ(bump("p/a", 4), 409);
  const std::vector<testing::Event> events = watcher.Events(before + 2);
  ASSERT_EQ(events.size(), before + 2) << watcher.raw();
  EXPECT_EQ(events.back().type, "rejection");
  EXPECT_NE(events.back().data.find(
                "\"key\":\"p/a\",\"fence\":\"p/a\",\"presented_token\":4,"
                "\"current_token\":9,\"method\":\"PUT\""),
            std::string::npos)
      << events.back().data;

  EXPECT_NE(Fetch(admin, "GET", "/v1/rejections")
                .body.find("\"presented_token\":4,\"current_token\":9"),
            std::string::npos);
  const std::string m = Fetch(admin, "GET", "/metrics").body;
  EXPECT_EQ(
      MetricValue(m, "fencepost_writes_rejected_total{reason=\"stale_token\"}"),
      1);
  EXPECT_NE(LogWith(server, "stale_bump_rejected").find("stale_bump_rejected"),
            std::string::npos);
}

}  // namespace
}  // namespace fencepost
