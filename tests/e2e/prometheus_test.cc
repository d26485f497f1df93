// A real Prometheus (Debian's) on loopback scrapes a fencepost this test
// started, with deploy/prometheus's rules loaded: the stale-leader story
// makes FencepostStaleWritesRejected fire, and every expression of the
// Grafana dashboard evaluates and names only series a live scrape has.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

using namespace std::chrono_literals;
using testing::Fetch;
using testing::ServerProcess;
using testing::TempDir;

std::string UrlEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Every "expr" of the dashboard, JSON string escapes undone.
std::vector<std::string> DashboardExpressions() {
  std::ifstream in(std::string(FENCEPOST_SOURCE_DIR) +
                   "/deploy/grafana/fencepost-dashboard.json");
  std::stringstream s;
  s << in.rdbuf();
  const std::string json = s.str();
  std::vector<std::string> out;
  const std::regex expr("\"expr\": \"((?:[^\"\\\\]|\\\\.)*)\"");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), expr);
       it != std::sregex_iterator(); ++it) {
    std::string e = (*it)[1];
    std::string plain;
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (e[i] == '\\' && i + 1 < e.size()) ++i;
      plain += e[i];
    }
    out.push_back(std::regex_replace(plain, std::regex("\\$instance"), ".*"));
  }
  return out;
}

bool Poll(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (done()) return true;
    } catch (const std::exception&) {
      // Not up yet.
    }
    std::this_thread::sleep_for(250ms);
  }
  return false;
}

TEST(PrometheusTest, StaleWriteAlertFiresAndTheDashboardEvaluates) {
  if (std::system("prometheus --version >/dev/null 2>&1") != 0) {
    FAIL()
        << "Debian's prometheus is not installed; scripts/deps.sh installs it";
  }
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::uint16_t port = testing::FreePort();
  std::ofstream(dir / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "rule_files:\n  - " << FENCEPOST_SOURCE_DIR
      << "/deploy/prometheus/fencepost-rules.yml\n"
      << "scrape_configs:\n  - job_name: fencepost\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << server.admin_port() << "']\n";
  testing::ChildProcess prometheus(
      {"prometheus", "--config.file=" + (dir / "prometheus.yml"),
       "--storage.tsdb.path=" + (dir / "tsdb"),
       "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      dir / "prometheus.log");
  auto api = [port](const std::string& target) {
    return Fetch(port, "GET", target).body;
  };
  ASSERT_TRUE(Poll(
      [&] {
        return api("/api/v1/query?query=" + UrlEncode("up{job=\"fencepost\"}"))
                   .find("\"1\"]") != std::string::npos;
      },
      60s))
      << "Prometheus never scraped fencepost";

  const auto data = server.data_port();
  Fetch(data, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "from A");
  Fetch(data, "PUT", "/orders/1", {{"Fencing-Token", "34"}}, "from B");
  ASSERT_EQ(Fetch(data, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "stale")
                .status,
            409);
  // That very alert firing, not any alert (Prometheus's ALERTS series).
  std::string alerts;
  EXPECT_TRUE(Poll(
      [&] {
        alerts =
            api("/api/v1/query?query=" +
                UrlEncode("ALERTS{alertname=\"FencepostStaleWritesRejected\","
                          "alertstate=\"firing\"}"));
        return alerts.find("\"1\"]") != std::string::npos;
      },
      60s))
      << alerts;

  const std::string scrape = Fetch(server.admin_port(), "GET", "/metrics").body;
  const auto expressions = DashboardExpressions();
  EXPECT_GE(expressions.size(), 8u);
  const std::regex metric("fencepost_[a-z_]+");
  for (const std::string& e : expressions) {
    const std::string answer = api("/api/v1/query?query=" + UrlEncode(e));
    EXPECT_NE(answer.find("\"status\":\"success\""), std::string::npos)
        << e << " -> " << answer;
    for (auto it = std::sregex_iterator(e.begin(), e.end(), metric);
         it != std::sregex_iterator(); ++it) {
      EXPECT_NE(scrape.find((*it)[0].str()), std::string::npos)
          << e << " names " << (*it)[0] << ", which the scrape lacks";
    }
  }
}

}  // namespace
}  // namespace fencepost
