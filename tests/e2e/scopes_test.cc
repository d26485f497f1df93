// A fence never goes down, whatever the --fence-scope flags a data
// directory is served with from one start to the next.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::RunFencepost;
using testing::ServerProcess;
using testing::TempDir;

int Put(const ServerProcess& server, const std::string& key,
        const std::string& token) {
  return Fetch(server.data_port(), "PUT", "/" + key, {{"Fencing-Token", token}},
               "v-" + token)
      .status;
}

// The README's order: the split-brain story leaves orders/1 at 35, then
// the leader half serves the same directory with --fence-scope orders/.
TEST(ScopesTest, AnAddedScopeStartsAtTheHighestFenceUnderIt) {
  TempDir dir;
  {
    ServerProcess server(dir / "d");
    ASSERT_EQ(Put(server, "orders/1", "33"), 201);
    ASSERT_EQ(Put(server, "orders/1", "35"), 200);
    ASSERT_EQ(Put(server, "other/1", "80"), 201);
  }
  ServerProcess server(dir / "d", {"--fence-scope", "orders/"});
  // The scope's fence is the highest under it, not the other prefix's.
  auto fence = Fetch(server.admin_port(), "GET", "/v1/fences/orders/");
  EXPECT_EQ(fence.status, 200);
  EXPECT_NE(fence.body.find("\"token\":35"), std::string::npos) << fence.body;
  // A lease under the scope is granted above it, and a stale write is
  // refused on the key written before and on a key never written.
  auto lease = Fetch(server.admin_port(), "PUT", "/v1/leases/orders/leader", {},
                     R"({"holder":"a","ttl_ms":60000})");
  ASSERT_EQ(lease.status, 200) << lease.body;
  EXPECT_EQ(lease.header("fencing-token"), "36");
  EXPECT_EQ(Put(server, "orders/1", "2"), 409);
  EXPECT_EQ(Put(server, "orders/2", "34"), 409);
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/orders/1").body, "v-35");
  EXPECT_EQ(Put(server, "orders/2", "36"), 201);
}

// A scope removed while its fence is above the keys it guarded would let
// a stale leader write them: the start is refused, exit 2, and the
// directory still serves with the scope, or with a wider one.
TEST(ScopesTest, ARemovedScopeIsRefusedAcrossRestarts) {
  TempDir dir;
  {
    ServerProcess server(dir / "d");
    ASSERT_EQ(Put(server, "orders/eu/1", "5"), 201);
  }
  {
    ServerProcess server(dir / "d", {"--fence-scope", "orders/eu/"});
    ASSERT_EQ(Put(server, "orders/eu/2", "40"), 201);
  }
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{},
        std::vector<std::string>{"--fence-scope", "orders/eu/x"}}) {
    std::vector<std::string> args = {
        "serve",       "--data-dir",     dir / "d",    "--listen",
        "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    const testing::RunResult refused = RunFencepost(args);
    EXPECT_EQ(refused.exit_status, 2) << refused.output;
    EXPECT_NE(refused.output.find("--fence-scope orders/eu/"),
              std::string::npos)
        << refused.output;
  }
  {
    // With the scope again, its fence stands.
    ServerProcess server(dir / "d", {"--fence-scope", "orders/eu/"});
    EXPECT_EQ(Put(server, "orders/eu/1", "39"), 409);
  }
  // A wider scope covers it, and starts at its fence.
  ServerProcess server(dir / "d", {"--fence-scope", "orders/"});
  EXPECT_EQ(Put(server, "orders/eu/1", "39"), 409);
  EXPECT_EQ(Put(server, "orders/us/1", "39"), 409);
  EXPECT_EQ(Put(server, "orders/us/1", "40"), 201);
}

// A scope carved out of a wider one starts at the wider one's fence, which
// guarded its keys; once served, it keeps its own (its leader may be below
// the wider scope's), and carved out again after a retirement it starts
// at the wider fence again.
TEST(ScopesTest, AScopeCarvedOutOfAWiderOneStartsAtItsFence) {
  TempDir dir;
  const std::vector<std::string> both = {"--fence-scope", "orders/",
                                         "--fence-scope", "orders/eu/"};
  {
    ServerProcess server(dir / "d", {"--fence-scope", "orders/"});
    ASSERT_EQ(Put(server, "orders/eu/1", "100"), 201);
  }
  {
    ServerProcess server(dir / "d", both);
    EXPECT_EQ(Put(server, "orders/eu/1", "1"), 409);
    EXPECT_EQ(Put(server, "orders/eu/2", "99"), 409);
    EXPECT_EQ(Put(server, "orders/eu/2", "100"), 201);
    ASSERT_EQ(Put(server, "orders/x", "200"), 201);  // the wider scope moves
  }
  {
    ServerProcess server(dir / "d", both);
    EXPECT_EQ(Put(server, "orders/eu/1", "101"), 200)
        << "a served scope was raised to the wider one's fence";
  }
  {
    ServerProcess server(dir / "d", {"--fence-scope", "orders/"});
    ASSERT_EQ(Put(server, "orders/eu/3", "250"), 201);
  }
  ServerProcess server(dir / "d", both);
  EXPECT_EQ(Put(server, "orders/eu/1", "249"), 409);
  EXPECT_EQ(Put(server, "orders/eu/1", "250"), 200);
}

// A scope that never had a fence may be dropped.
TEST(ScopesTest, AScopeNeverWrittenMayBeDropped) {
  TempDir dir;
  { ServerProcess server(dir / "d", {"--fence-scope", "unused/"}); }
  ServerProcess server(dir / "d");
  EXPECT_EQ(Put(server, "unused/1", "1"), 201);
}

}  // namespace
}  // namespace fencepost
