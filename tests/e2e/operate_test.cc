// The operator's view, checked with the real tools: a live scrape passes
// `promtool check metrics` and carries the build, map and token-lag series.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::MetricValue;
using testing::ServerProcess;
using testing::TempDir;

TEST(OperateTest, LiveScrapePassesPromtoolAndCarriesTheNewSeries) {
  if (std::system("promtool --version >/dev/null 2>&1") != 0) {
    FAIL() << "promtool (Debian package prometheus) is not installed; "
              "scripts/deps.sh installs it";
  }
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto port = server.data_port();
  Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "from A");
  Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "34"}}, "from B");
  EXPECT_EQ(Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "stale")
                .status,
            409);
  const std::string scrape = Fetch(server.admin_port(), "GET", "/metrics").body;
  std::ofstream(dir / "scrape.txt") << scrape;
  const std::string command = "promtool check metrics < " +
                              (dir / "scrape.txt") + " > " +
                              (dir / "promtool.txt") + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << [&] {
    std::ifstream in(dir / "promtool.txt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();

  EXPECT_NE(scrape.find("fencepost_build_info{revision=\""), std::string::npos);
  EXPECT_GT(MetricValue(scrape, "fencepost_lmdb_map_used_bytes"), 0);
  EXPECT_GE(MetricValue(scrape, "fencepost_lmdb_map_size_bytes"),
            MetricValue(scrape, "fencepost_lmdb_map_used_bytes"));
  EXPECT_EQ(MetricValue(scrape, "fencepost_rejected_token_lag_count"), 1);
  EXPECT_EQ(MetricValue(scrape, "fencepost_rejected_token_lag_sum"), 1)
      << "34 - 33";
}

TEST(OperateTest, RejectionJournalKeepsWhatTheZombieTriedToWrite) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto port = server.data_port();
  Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "34"}}, "from B");
  EXPECT_EQ(Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "30"}}, "older")
                .status,
            409);
  EXPECT_EQ(
      Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "stale A")
          .status,
      409);
  auto journal = Fetch(server.admin_port(), "GET", "/v1/rejections?limit=1");
  EXPECT_EQ(journal.status, 200);
  EXPECT_EQ(journal.header("content-type"), "application/json");
  const std::string& body = journal.body;
  EXPECT_NE(body.find("\"key\":\"orders/1\",\"fence\":\"orders/1\","
                      "\"presented_token\":33,\"current_token\":34,"
                      "\"client\":\"127.0.0.1:"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("\"body_length\":7,\"body_sha256\":"
                      "\"7242c0b45ba7aa076d341b6ff1d4c6b1aa52a30b2984dc71311e79"
                      "a765ea0325\""),
            std::string::npos)
      << body;
  EXPECT_EQ(body.find("\"presented_token\":30"), std::string::npos)
      << "limit=1 gives the newest only";
  auto both = Fetch(server.admin_port(), "GET", "/v1/rejections").body;
  EXPECT_LT(both.find("\"presented_token\":33"),
            both.find("\"presented_token\":30"))
      << "newest first";
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/rejections?limit=0").status,
            400);
}

TEST(OperateTest, LogLevelChangesAtRuntime) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "admin-token\n";
  ServerProcess server(dir / "data", {"--auth-token-file", dir / "tokens"});
  const auto admin = server.admin_port();
  EXPECT_EQ(Fetch(admin, "GET", "/v1/log-level").body,
            "{\"level\":\"info\"}\n");
  EXPECT_EQ(Fetch(admin, "PUT", "/v1/log-level", {}, "debug").status, 401)
      << "an admin mutation needs the token";
  const testing::Headers auth = {{"Authorization", "Bearer admin-token"}};
  EXPECT_EQ(Fetch(admin, "PUT", "/v1/log-level", auth, "loud").status, 400);
  auto set = Fetch(admin, "PUT", "/v1/log-level", auth, "debug\n");
  EXPECT_EQ(set.status, 200);
  EXPECT_EQ(set.body, "{\"level\":\"debug\"}\n");
  EXPECT_EQ(Fetch(admin, "GET", "/v1/log-level").body,
            "{\"level\":\"debug\"}\n");
  EXPECT_NE(server.Log().find("log level set to debug"), std::string::npos);
}

TEST(OperateTest, JsonLogsHaveStableFieldsAndRejectionsAreRateLimited) {
  TempDir dir;
  ServerProcess server(dir / "data", {"--log-format", "json"});
  const auto port = server.data_port();
  Fetch(port, "PUT", "/k", {{"Fencing-Token", "10"}}, "new leader");
  testing::HttpClient zombie(port);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(
        zombie.Request("PUT", "/k", {{"Fencing-Token", "9"}}, "old").status,
        409);
  }
  // The first 5 rejections of each second are logged in full; the rest are
  // summed in "N more rejected" events, so nothing goes unaccounted. The
  // rejections may span two seconds: wait until every one is in the log.
  const std::string kFull = "\"event\":\"stale_write_rejected\"";
  const std::string kCount =
      "\"event\":\"stale_writes_suppressed\",\"fence\":\"k\",\"count\":";
  std::string log;
  int full = 0;
  std::uint64_t suppressed = 0;
  for (int i = 0; i < 50 && full + suppressed < 20; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server.Log();
    log.erase(log.rfind('\n') + 1);  // whole lines only: it is being written
    full = 0;
    for (auto at = log.find(kFull); at != std::string::npos;
         at = log.find(kFull, at + 1)) {
      ++full;
    }
    suppressed = 0;
    for (auto at = log.find(kCount); at != std::string::npos;
         at = log.find(kCount, at + 1)) {
      suppressed += std::stoull(log.substr(at + kCount.size()));
    }
  }
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
    EXPECT_EQ(line.rfind("{\"time\":\"", 0), 0u) << line;
    EXPECT_NE(line.find("\"level\":\""), std::string::npos) << line;
    if (line.find(kFull) != std::string::npos) {
      EXPECT_NE(line.find("\"key\":\"k\",\"fence\":\"k\","
                          "\"presented_token\":9,\"current_token\":10,"
                          "\"client\":\"127.0.0.1:"),
                std::string::npos)
          << line;
    }
  }
  EXPECT_GE(full, 5);
  EXPECT_GT(suppressed, 0u) << log;
  EXPECT_EQ(full + suppressed, 20u) << log;
  EXPECT_NE(log.find(" more rejected\",\"event\":\"stale_writes_suppressed\""),
            std::string::npos);
}

}  // namespace
}  // namespace fencepost
