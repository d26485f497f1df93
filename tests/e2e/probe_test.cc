// `fencepost probe URL` against real stores: Debian's nginx (WebDAV), which
// answers ETags but ignores If-Match and If-None-Match on PUT and DELETE,
// and fencepost itself, which honours them.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/testing/http_client.h"
#include "tests/testing/refusing_port.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

namespace fs = std::filesystem;
using testing::RunFencepost;
using testing::TempDir;

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST(ProbeTest, NginxIgnoresThePreconditionsAndIsToldSo) {
  TempDir dir;
  const std::string root = dir / "root";
  testing::NginxProcess nginx(root, dir / "nginx");
  const std::string url =
      "http://127.0.0.1:" + std::to_string(nginx.port()) + "/store";
  const auto probe = RunFencepost({"probe", url});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  EXPECT_EQ(Count(probe.output, "DOES NOT HOLD"), 3u) << probe.output;
  EXPECT_NE(probe.output.find("PUT with a wrong If-Match: DOES NOT HOLD "
                              "(HTTP 204, value overwritten)"),
            std::string::npos)
      << probe.output;
  EXPECT_NE(probe.output.find("DELETE with a wrong If-Match: DOES NOT HOLD "
                              "(HTTP 204, value deleted)"),
            std::string::npos)
      << probe.output;
  EXPECT_NE(probe.output.find("does NOT honour"), std::string::npos);
  // It cleaned up after itself: nothing is left under the store.
  EXPECT_TRUE(fs::is_empty(root + "/store")) << probe.output;
  const auto requests = nginx.AwaitRequests(1, "DELETE");
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests.back().method, "DELETE");
}

TEST(ProbeTest, FencepostHonoursThemThroughItsDataPort) {
  TempDir dir;
  testing::ServerProcess server(dir / "data");
  const std::string url =
      "http://127.0.0.1:" + std::to_string(server.data_port()) + "/base/";
  const auto probe = RunFencepost({"probe", url, "--token", "7"});
  EXPECT_EQ(probe.exit_status, 0) << probe.output;
  EXPECT_EQ(Count(probe.output, ": holds (HTTP 412, value unchanged)"), 3u)
      << probe.output;
  EXPECT_NE(probe.output.find(" honours If-Match and If-None-Match"),
            std::string::npos);
  // The scratch key is gone; its fence stays, as every fence does.
  const auto state =
      testing::Fetch(server.admin_port(), "GET", "/v1/fences?prefix=base/");
  EXPECT_NE(state.body.find("fencepost-probe-"), std::string::npos);
}

TEST(ProbeTest, UnreachableIs3AndABadUrlIs2) {
  testing::RefusingPort refusing;
  const auto down = RunFencepost(
      {"probe", "http://127.0.0.1:" + std::to_string(refusing.port())});
  EXPECT_EQ(down.exit_status, 3) << down.output;
  EXPECT_EQ(RunFencepost({"probe", "127.0.0.1:7400"}).exit_status, 2);
  EXPECT_EQ(RunFencepost({"probe"}).exit_status, 2);
}

}  // namespace
}  // namespace fencepost
