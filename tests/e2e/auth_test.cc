// --auth-token-file end to end: writes and bumps need the bearer token;
// reads and health checks do not.

#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

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
