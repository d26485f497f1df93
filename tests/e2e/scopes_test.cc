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

// README's lease section, then scripts/run.sh on the same directory: the
// refusal names the flag to start with.
TEST(ScopesTest, ALeaseGrantedUnderAScopeNamesTheFlagItNeeds) {
  TempDir dir;
  {
    ServerProcess server(dir / "d", {"--fence-scope", "orders/"});
    const auto lease =
        Fetch(server.admin_port(), "PUT", "/v1/leases/orders/leader", {},
              R"({"holder":"a","ttl_ms":60000})");
    ASSERT_EQ(lease.status, 200) << lease.body;
  }
  const testing::RunResult refused =
      RunFencepost({"serve", "--data-dir", dir / "d", "--listen", "127.0.0.1:0",
                    "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_status, 2) << refused.output;
  EXPECT_NE(refused.output.find("start with --fence-scope orders/ among the "
                                "flags"),
            std::string::npos)
      << refused.output;
}

// On several shards a value lives in the shard of the fence that guarded
// it when it was written. A scope change that would give stored values a
// fence in another shard is refused (exit 2) and changes nothing: every
// acknowledged value still reads back with its tag, and conditional
// writes still see it. A change that strands no value goes ahead.
TEST(ScopesTest, OnShardsAScopeChangeThatWouldStrandValuesIsRefused) {
  TempDir dir;
  const std::vector<std::string> shards = {"--lmdb-shards", "4"};
  std::vector<std::string> tags;
  {
    ServerProcess server(dir / "d", shards);
    for (int i = 0; i < 8; ++i) {
      const std::string key = "a/" + std::to_string(i);
      ASSERT_EQ(Put(server, key, "5"), 201);
      const auto put = Fetch(server.data_port(), "PUT", "/" + key,
                             {{"Fencing-Token", "6"}}, "v-6");
      ASSERT_EQ(put.status, 200);
      tags.push_back(put.header("etag"));
    }
    // Killed: the values may still be only in the log at the next start.
    server.Kill();
  }
  const auto serve = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> args = {
        "serve",       "--data-dir",     dir / "d",    "--listen",
        "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    return RunFencepost(args);
  };
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--fence-scope", "a/"},
        std::vector<std::string>{"--fence-scope", "a"},
        std::vector<std::string>{"--fence-scope", "a/", "--fence-scope",
                                 "b/"}}) {
    const testing::RunResult refused = serve(flags);
    EXPECT_EQ(refused.exit_status, 2) << refused.output;
    EXPECT_NE(refused.output.find("stored values (a/"), std::string::npos)
        << refused.output;
  }
  {
    // A scope with no value under it strands nothing.
    ServerProcess server(dir / "d", {"--fence-scope", "b/"});
    for (int i = 0; i < 8; ++i) {
      const std::string key = "/a/" + std::to_string(i);
      const auto read = Fetch(server.data_port(), "GET", key);
      EXPECT_EQ(read.status, 200) << key;
      EXPECT_EQ(read.body, "v-6") << key;
      EXPECT_EQ(read.header("etag"), tags[i]) << key;
      EXPECT_EQ(Fetch(server.data_port(), "PUT", key,
                      {{"Fencing-Token", "6"}, {"If-None-Match", "*"}}, "x")
                    .status,
                412)
          << key;
    }
    const auto cas =
        Fetch(server.data_port(), "PUT", "/a/0",
              {{"Fencing-Token", "6"}, {"If-Match", tags[0]}}, "v-7");
    EXPECT_EQ(cas.status, 200) << cas.body;
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(Fetch(server.data_port(), "DELETE", "/a/" + std::to_string(i),
                      {{"Fencing-Token", "6"}})
                    .status,
                204);
    }
  }
  // With the values gone, the scope is added, and starts at their fence.
  ServerProcess server(dir / "d",
                       {"--fence-scope", "b/", "--fence-scope", "a/"});
  EXPECT_EQ(Put(server, "a/9", "5"), 409);
  EXPECT_EQ(Put(server, "a/9", "6"), 201);
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/a/9").body, "v-6");
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

// --- A scope named by its own prefix --------------------------------------

// A configured scope's prefix names its fence wherever a fence name goes,
// though it ends in '/' and so is not a key: the admin port's fence routes
// (read, long poll, bump), a lease's name, and the client commands that
// call them (fence get, fence bump, lease run --fence). On the data port
// it is still not a key, and a prefix that is no scope names nothing.
TEST(ScopeNameTest, AScopesPrefixNamesItsFenceOnTheAdminPort) {
  TempDir dir;
  ServerProcess server(dir / "d", {"--fence-scope", "orders/"});
  const auto admin = server.admin_port();
  const std::string url = "--admin=http://127.0.0.1:" + std::to_string(admin);
  const auto bump = [&](const std::string& name, const std::string& token) {
    return Fetch(admin, "PUT", "/v1/fences/" + name,
                 {{"Fencing-Token", token}});
  };
  const auto token_of_scope = [&] {
    return Fetch(admin, "GET", "/v1/fences/orders/").header("fencing-token");
  };

  // lease run --fence orders/ raises it to the lease's token before CMD.
  testing::RunResult run =
      RunFencepost({"lease", "run", "jobs/leader", "--ttl", "10s", "--fence",
                    "orders/", url, "--", "true"});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_EQ(token_of_scope(), "1");
  EXPECT_EQ(Put(server, "orders/1", "0"), 409);

  // The bump, over HTTP (also percent-encoded) and by fence bump.
  auto raised = bump("orders/", "5");
  EXPECT_EQ(raised.status, 200) << raised.body;
  EXPECT_NE(raised.body.find("\"fence\":\"orders/\",\"token\":5"),
            std::string::npos)
      << raised.body;
  EXPECT_EQ(Put(server, "orders/2", "4"), 409);
  EXPECT_EQ(bump("orders/", "3").status, 409);
  EXPECT_EQ(bump("orders%2F", "6").status, 200);
  run = RunFencepost({"fence", "bump", "orders/", "--token", "7", url});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  run = RunFencepost({"fence", "get", "orders/", url});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_NE(run.output.find("\"token\":7"), std::string::npos) << run.output;
  auto poll = Fetch(admin, "GET", "/v1/fences/orders/?wait_above=6");
  EXPECT_EQ(poll.status, 200);
  EXPECT_EQ(poll.header("fencing-token"), "7");

  // A lease named by the scope guards the scope's fence.
  auto lease = Fetch(admin, "PUT", "/v1/leases/orders/", {},
                     R"({"holder":"a","ttl_ms":60000})");
  EXPECT_EQ(lease.status, 200) << lease.body;
  EXPECT_EQ(lease.header("fencing-token"), "8");
  EXPECT_EQ(token_of_scope(), "8");
  EXPECT_EQ(Fetch(admin, "GET", "/v1/leases/orders/").status, 200);
  EXPECT_EQ(Put(server, "orders/3", "7"), 409);
  EXPECT_EQ(Put(server, "orders/3", "8"), 201);

  // Not a key on the data port; no name where no scope is.
  EXPECT_EQ(Fetch(server.data_port(), "PUT", "/orders/",
                  {{"Fencing-Token", "9"}}, "x")
                .status,
            400);
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/orders/").status, 400);
  EXPECT_EQ(bump("other/", "9").status, 400);
  EXPECT_EQ(bump("orders//", "9").status, 400);
  EXPECT_EQ(Fetch(admin, "GET", "/v1/fences/other/").status, 400);
  EXPECT_EQ(Fetch(admin, "PUT", "/v1/leases/other/", {},
                  R"({"holder":"a","ttl_ms":60000})")
                .status,
            400);
  run = RunFencepost({"fence", "bump", "other/", "--token", "9", url});
  EXPECT_EQ(run.exit_status, 2) << run.output;
  EXPECT_EQ(token_of_scope(), "8");
}

}  // namespace
}  // namespace fencepost
