// --auth-token-file end to end: writes and bumps need the bearer token;
// reads and health checks do not.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::ServerProcess;
using testing::TempDir;

TEST(AuthTest, WritesAndBumpsNeedTheBearerToken) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "right-token\n";
  ServerProcess server(dir / "data", {"--auth-token-file", dir / "tokens"});
  const auto port = server.data_port();

  auto none = Fetch(port, "PUT", "/k", {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.header("www-authenticate"), "Bearer realm=\"fencepost\"");
  EXPECT_NE(none.body.find("urn:fencepost:problem:unauthorized"),
            std::string::npos);
  auto wrong = Fetch(
      port, "PUT", "/k",
      {{"Fencing-Token", "1"}, {"Authorization", "Bearer wrong-token"}}, "v");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_NE(wrong.header("www-authenticate").find("invalid_token"),
            std::string::npos);
  EXPECT_EQ(Fetch(port, "GET", "/k").status, 404) << "nothing was stored";
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/fences/k").status, 404)
      << "no fence was set";

  const testing::Headers right = {{"Fencing-Token", "1"},
                                  {"Authorization", "Bearer right-token"}};
  EXPECT_EQ(Fetch(port, "PUT", "/k", right, "v").status, 201);
  EXPECT_EQ(Fetch(port, "GET", "/k").status, 200) << "reads stay open";
  EXPECT_EQ(Fetch(port, "DELETE", "/k", {{"Fencing-Token", "2"}}).status, 401);

  EXPECT_EQ(Fetch(server.admin_port(), "PUT", "/v1/fences/k",
                  {{"Fencing-Token", "5"}})
                .status,
            401);
  EXPECT_EQ(
      Fetch(server.admin_port(), "PUT", "/v1/fences/k",
            {{"Fencing-Token", "5"}, {"Authorization", "Bearer right-token"}})
          .status,
      200);
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/metrics").status, 200);
}

// Credentials count only in the header section: never in a chunked body's
// trailer, and a body is invited (100 Continue) only once they pass.
TEST(AuthTest, OnlyTheHeaderSectionCarriesCredentials) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "right-token\n";
  ServerProcess server(dir / "data", {"--auth-token-file", dir / "tokens"});
  {
    testing::HttpClient client(server.data_port());
    auto trailer = client.Raw(
        "PUT /k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
        "Transfer-Encoding: chunked\r\n\r\n1\r\nv\r\n0\r\n"
        "Authorization: Bearer right-token\r\n\r\n");
    EXPECT_EQ(trailer.status, 401);
  }
  {
    testing::HttpClient client(server.data_port());
    auto expect = client.Raw(
        "PUT /k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
        "Expect: 100-continue\r\nContent-Length: 1000000\r\n\r\n");
    EXPECT_EQ(expect.status, 401) << "no 100 Continue before the check";
    EXPECT_TRUE(client.ClosedByPeer(3));
  }
  {
    testing::HttpClient client(server.data_port());
    client.Send(
        "PUT /k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
        "Authorization: Bearer right-token\r\n"
        "Expect: 100-continue\r\nContent-Length: 1\r\n\r\n");
    EXPECT_EQ(client.ReadResponse().status, 100);
    client.Send("v");
    EXPECT_EQ(client.ReadResponse().status, 201);
  }
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/k").body, "v");
}

TEST(AuthTest, BatchesNeedTheBearerToken) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "right-token\n";
  ServerProcess server(dir / "data", {"--auth-token-file", dir / "tokens"});
  const std::string batch =
      R"({"ops":[{"op":"put","key":"b/1","value":"dg=="},)"
      R"({"op":"put","key":"b/2","value":"dg=="}]})";
  for (const testing::Headers& headers :
       {testing::Headers{{"Fencing-Token", "4"}},
        testing::Headers{{"Fencing-Token", "4"},
                         {"Authorization", "Bearer wrong-token"}}}) {
    EXPECT_EQ(Fetch(server.data_port(), "POST", "/", headers, batch).status,
              401);
  }
  for (const std::string key : {"b/1", "b/2"}) {
    EXPECT_EQ(Fetch(server.data_port(), "GET", "/" + key).status, 404) << key;
    EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/fences/" + key).status,
              404)
        << key;
  }
  EXPECT_EQ(
      Fetch(server.data_port(), "POST", "/",
            {{"Fencing-Token", "4"}, {"Authorization", "Bearer right-token"}},
            batch)
          .status,
      200);
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/b/2").body, "v");
}

// Lease grants, renewals and releases are writes: they need the bearer
// token too, and a refused one grants nothing and raises no fence; lease
// reads stay open.
TEST(AuthTest, LeaseWritesNeedTheBearerToken) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "right-token\n";
  ServerProcess server(dir / "data", {"--auth-token-file", dir / "tokens"});
  const auto admin = server.admin_port();
  const std::string body = R"({"holder":"a","ttl_ms":60000})";
  for (const testing::Headers& headers :
       {testing::Headers{},
        testing::Headers{{"Authorization", "Bearer wrong-token"}}}) {
    EXPECT_EQ(Fetch(admin, "PUT", "/v1/leases/l", headers, body).status, 401);
  }
  EXPECT_EQ(Fetch(admin, "GET", "/v1/leases/l").status, 404)
      << "nothing was granted";
  EXPECT_EQ(Fetch(admin, "GET", "/v1/fences/l").status, 404)
      << "no fence was raised";
  const testing::Headers right = {{"Authorization", "Bearer right-token"}};
  auto granted = Fetch(admin, "PUT", "/v1/leases/l", right, body);
  ASSERT_EQ(granted.status, 200);
  EXPECT_EQ(Fetch(admin, "DELETE", "/v1/leases/l", {{"Fencing-Token", "1"}},
                  R"({"holder":"a"})")
                .status,
            401);
  EXPECT_NE(Fetch(admin, "GET", "/v1/leases/l").body.find("\"holder\":\"a\""),
            std::string::npos)
      << "still held";
  EXPECT_EQ(
      Fetch(admin, "DELETE", "/v1/leases/l",
            {{"Fencing-Token", "1"}, {"Authorization", "Bearer right-token"}},
            R"({"holder":"a"})")
          .status,
      204);
}

// With a backend that stores values elsewhere, an unauthenticated write
// reaches neither the store nor the fence.
TEST(AuthTest, HttpBackendWritesNeedTheBearerToken) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "right-token\n";
  testing::FakeUpstream upstream;
  ServerProcess server(dir / "data",
                       {"--auth-token-file", dir / "tokens", "--backend",
                        "http://127.0.0.1:" + std::to_string(upstream.port())});
  for (const std::string method : {"PUT", "POST", "PATCH", "DELETE"}) {
    EXPECT_EQ(
        Fetch(server.data_port(), method, "/k", {{"Fencing-Token", "3"}}, "v")
            .status,
        401)
        << method;
  }
  EXPECT_TRUE(upstream.Requests().empty()) << "nothing reached the store";
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/fences/k").status, 404);
  const testing::Headers right = {{"Fencing-Token", "3"},
                                  {"Authorization", "Bearer right-token"}};
  EXPECT_EQ(Fetch(server.data_port(), "PUT", "/k", right, "v").status / 100, 2);
  EXPECT_EQ(upstream.Value("/k"), "v");
  Fetch(server.data_port(), "POST", "/k", right, "w");
  Fetch(server.data_port(), "PATCH", "/k", right, "x");
  std::vector<std::string> methods;
  for (const auto& seen : upstream.Requests()) methods.push_back(seen.method);
  EXPECT_NE(std::find(methods.begin(), methods.end(), "POST"), methods.end());
  EXPECT_NE(std::find(methods.begin(), methods.end(), "PATCH"), methods.end());
}

TEST(AuthTest, FsBackendWritesNeedTheBearerToken) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "right-token\n";
  const std::string store = dir / "store";
  std::filesystem::create_directories(store);
  ServerProcess server(dir / "data", {"--auth-token-file", dir / "tokens",
                                      "--backend", "fs:" + store});
  for (const std::string method : {"PUT", "DELETE"}) {
    EXPECT_EQ(
        Fetch(server.data_port(), method, "/k", {{"Fencing-Token", "3"}}, "v")
            .status,
        401)
        << method;
  }
  EXPECT_FALSE(std::filesystem::exists(store + "/k")) << "no file written";
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/fences/k").status, 404);
  EXPECT_EQ(
      Fetch(server.data_port(), "PUT", "/k",
            {{"Fencing-Token", "3"}, {"Authorization", "Bearer right-token"}},
            "v")
          .status,
      201);
  EXPECT_TRUE(std::filesystem::exists(store + "/k"));
  EXPECT_EQ(Fetch(server.data_port(), "DELETE", "/k", {{"Fencing-Token", "4"}})
                .status,
            401);
  EXPECT_TRUE(std::filesystem::exists(store + "/k")) << "not deleted";
}

TEST(AuthTest, AnUnreadableOrEmptyTokenFileStopsTheStart) {
  TempDir dir;
  auto missing = testing::RunFencepost(
      {"serve", "--data-dir", dir / "d", "--auth-token-file", dir / "none"});
  EXPECT_EQ(missing.exit_status, 2);
  std::ofstream(dir / "empty") << "\n# no tokens\n";
  auto empty = testing::RunFencepost(
      {"serve", "--data-dir", dir / "d", "--auth-token-file", dir / "empty"});
  EXPECT_EQ(empty.exit_status, 2);
  EXPECT_NE(empty.output.find("holds no token"), std::string::npos);
}

}  // namespace
}  // namespace fencepost
