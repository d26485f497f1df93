// The operator's view, checked with the real tools: a live scrape passes
// `promtool check metrics` and carries the build, map and token-lag series.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

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
    GTEST_SKIP() << "promtool (Debian package prometheus) is not installed";
  }
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto port = server.data_port();
  Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "from A");
  Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "34"}}, "from B");
  EXPECT_EQ(Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "stale")
                .status,
            409);
  const std::string scrape =
      Fetch(server.admin_port(), "GET", "/metrics").body;
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

}  // namespace
}  // namespace fencepost
