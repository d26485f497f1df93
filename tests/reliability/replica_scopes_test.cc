// The --fence-scope start rule (fence::PlanScopes, fence::ScopeFloor) with
// the fences in a real etcd that replicas share.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::reliability {
namespace {

using testing::Fetch;
using testing::RunFencepost;
using testing::ServerProcess;
using testing::Shell;
using testing::ShellLine;
using testing::TempDir;

const std::string kScript = FENCEPOST_ETCD_SH;

std::vector<std::string> ReplicaArgs(const std::string& url,
                                     std::vector<std::string> scopes) {
  std::vector<std::string> args = {"--fence-store", url + "/scopes",
                                   "--backend", "etcd"};
  for (std::string& scope : scopes) {
    args.push_back("--fence-scope");
    args.push_back(std::move(scope));
  }
  return args;
}

TEST(ReplicaScopesTest, ScopeChangesNeverLowerAFenceInEtcd) {
  TempDir dir;
  const std::string url = ShellLine(kScript + " start " + dir / "etcd");
  ASSERT_FALSE(url.empty()) << "etcd did not start";
  struct StopEtcd {
    std::string command;
    ~StopEtcd() { Shell(command); }
  } stop{kScript + " stop " + dir / "etcd"};
  {
    ServerProcess a("", ReplicaArgs(url, {}));
    ASSERT_EQ(
        Fetch(a.data_port(), "PUT", "/orders/1", {{"Fencing-Token", "35"}}, "B")
            .status,
        201);
  }
  {
    // Added: the scope starts at the highest fence under it.
    ServerProcess a("", ReplicaArgs(url, {"orders/"}));
    EXPECT_EQ(Fetch(a.data_port(), "PUT", "/orders/2",
                    {{"Fencing-Token", "34"}}, "stale")
                  .status,
              409);
    EXPECT_EQ(Fetch(a.data_port(), "PUT", "/orders/2",
                    {{"Fencing-Token", "40"}}, "new")
                  .status,
              201);
  }
  // Removed: no replica serves without it any more.
  std::vector<std::string> args = {"serve", "--listen", "127.0.0.1:0",
                                   "--admin-listen", "127.0.0.1:0"};
  for (std::string& arg : ReplicaArgs(url, {})) args.push_back(arg);
  const testing::RunResult refused = RunFencepost(args);
  EXPECT_EQ(refused.exit_status, 2) << refused.output;
  EXPECT_NE(refused.output.find("--fence-scope orders/"), std::string::npos)
      << refused.output;
  ServerProcess b("", ReplicaArgs(url, {"orders/"}));
  EXPECT_EQ(Fetch(b.data_port(), "PUT", "/orders/1", {{"Fencing-Token", "39"}},
                  "stale")
                .status,
            409);
}

}  // namespace
}  // namespace fencepost::reliability
