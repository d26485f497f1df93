// The client against the real fencepost binary: the data port and the
// admin fence calls, keep-alive, bearer tokens and TLS.

#include "client/client.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "client/documents.h"
#include "tests/client/helpers.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::client {
namespace {

using fencepost::testing::ServerProcess;
using fencepost::testing::TempDir;
using std::chrono::milliseconds;

TEST(ClientTest, PutGetDeleteAgainstTheDataPort) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client data(testing::Options(testing::DataUrl(server)));

  Result put = data.Put("orders/a b", 5, "v1");
  ASSERT_TRUE(put.ok()) << put.detail;
  EXPECT_EQ(put.response.status, 201);
  EXPECT_EQ(put.response.header("fencing-token"), "5");

  Result get = data.Get("orders/a b");
  ASSERT_TRUE(get.ok()) << get.detail;
  EXPECT_EQ(get.response.status, 200);
  EXPECT_EQ(get.response.body, "v1");
  EXPECT_EQ(get.response.header("fencing-token"), "5");

  const Result stale = data.Put("orders/a b", 4, "old leader");
  ASSERT_TRUE(stale.ok()) << stale.detail;
  EXPECT_EQ(stale.response.status, 409);
  const auto problem = ParseProblem(stale.response.body);
  ASSERT_TRUE(problem) << stale.response.body;
  EXPECT_EQ(problem->slug(), "stale-token");
  EXPECT_EQ(problem->current_token, 5u);
  EXPECT_EQ(problem->presented_token, 4u);

  const Result del = data.Delete("orders/a b", 5);
  ASSERT_TRUE(del.ok()) << del.detail;
  EXPECT_EQ(del.response.status, 204);
  get = data.Get("orders/a b");
  ASSERT_TRUE(get.ok()) << get.detail;
  EXPECT_EQ(get.response.status, 404);
}

TEST(ClientTest, KeysAreEncodedSoTheServerSeesThemAsTheyAre) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client data(testing::Options(testing::DataUrl(server)));
  const std::string key = "odd/k%20?#+&=caf\xc3\xa9";
  ASSERT_EQ(data.Put(key, 1, "x").response.status, 201);
  EXPECT_EQ(data.Get(key).response.body, "x");
  Client admin(testing::AdminOptions(server));
  const auto fence = ParseFence(admin.GetFence(key).response.body);
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->name, key);
}

TEST(ClientTest, GetFenceAndBumpAgainstTheAdminPort) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));

  Result result = admin.GetFence("jobs/x");
  ASSERT_TRUE(result.ok()) << result.detail;
  EXPECT_EQ(result.response.status, 404);

  result = admin.Bump("jobs/x", 18446744073709551614ull);
  ASSERT_TRUE(result.ok()) << result.detail;
  EXPECT_EQ(result.response.status / 100, 2) << result.response.body;

  result = admin.GetFence("jobs/x");
  ASSERT_EQ(result.response.status, 200);
  const auto fence = ParseFence(result.response.body);
  ASSERT_TRUE(fence) << result.response.body;
  EXPECT_EQ(fence->name, "jobs/x");
  EXPECT_EQ(fence->token, 18446744073709551614ull) << "read exactly";
  EXPECT_FALSE(fence->updated_at.empty());

  result = admin.Bump("jobs/x", 7);
  EXPECT_EQ(result.response.status, 409);
  const auto problem = ParseProblem(result.response.body);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->current_token, 18446744073709551614ull);
}

TEST(ClientTest, ReconnectsWhenTheServerClosedAnIdleConnection) {
  TempDir dir;
  ServerProcess server(dir / "data", {"--idle-timeout", "0.2"});
  Client data(testing::Options(testing::DataUrl(server)));
  ASSERT_EQ(data.Put("k", 1, "a").response.status, 201);
  std::this_thread::sleep_for(milliseconds(600));  // the server closes it
  const Result put = data.Put("k", 1, "b");
  ASSERT_TRUE(put.ok()) << put.detail;
  EXPECT_EQ(put.response.status, 200);
  std::this_thread::sleep_for(milliseconds(600));
  const Result get = data.Get("k");
  ASSERT_TRUE(get.ok()) << get.detail;
  EXPECT_EQ(get.response.body, "b");
}

TEST(ClientTest, KeepsOneConnectionAcrossRequests) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client data(testing::Options(testing::DataUrl(server)));
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(data.Put("k", 1, std::to_string(i)).response.status / 100, 2);
  }
  Client admin(testing::AdminOptions(server));
  const std::string metrics = admin.Send("GET", "/metrics").response.body;
  EXPECT_EQ(fencepost::testing::MetricValue(
                metrics, "fencepost_connections{port=\"data\"}"),
            1);
}

TEST(ClientTest, SendsTheBearerToken) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "# comment\nright-token\n";
  ServerProcess server(dir / "data", {"--auth-token-file", dir / "tokens"});
  Client without(testing::Options(testing::DataUrl(server)));
  EXPECT_EQ(without.Put("k", 1, "v").response.status, 401);
  Client::Options options = testing::Options(testing::DataUrl(server));
  options.bearer_token = "right-token";
  Client with(options);
  EXPECT_EQ(with.Put("k", 1, "v").response.status, 201);
}

TEST(ClientTest, AServerThatIsGoneIsAnErrorNotAResponse) {
  TempDir dir;
  auto server = std::make_unique<ServerProcess>(dir / "data");
  Client data(testing::Options(testing::DataUrl(*server), milliseconds(2000)));
  ASSERT_EQ(data.Put("k", 1, "v").response.status, 201);
  server->Kill();
  const Result put = data.Put("k", 1, "v");
  EXPECT_FALSE(put.ok());
  EXPECT_TRUE(put.error == Errc::kConnectFailed ||
              put.error == Errc::kConnectionLost)
      << put.detail;
}

TEST(ClientTest, SpeaksTlsAndChecksTheCertificate) {
  TempDir dir;
  if (!testing::MakeCertificates(dir.path())) {
    FAIL() << "openssl missing or failing; scripts/deps.sh installs it";
  }
  ServerProcess server(dir / "data", {"--tls-cert", dir / "server.pem",
                                      "--tls-key", dir / "server.key"});
  const std::string port = std::to_string(server.data_port());
  Client trusted(testing::Options("https://127.0.0.1:" + port,
                                  std::chrono::seconds(5), dir / "ca.pem"));
  Result put = trusted.Put("k", 3, "secret");
  ASSERT_TRUE(put.ok()) << put.detail;
  EXPECT_EQ(put.response.status, 201);
  EXPECT_EQ(trusted.Get("k").response.body, "secret");

  Client other_ca(testing::Options("https://127.0.0.1:" + port,
                                   std::chrono::seconds(5),
                                   dir / "other-ca.pem"));
  put = other_ca.Put("k", 3, "x");
  EXPECT_EQ(put.error, Errc::kTlsFailed) << put.detail;

  // The certificate names 127.0.0.1 only: "localhost" is another host.
  Client wrong_name(testing::Options("https://localhost:" + port,
                                     std::chrono::seconds(5), dir / "ca.pem"));
  put = wrong_name.Put("k", 3, "x");
  EXPECT_EQ(put.error, Errc::kTlsFailed) << put.detail;

  Client plain(
      testing::Options("http://127.0.0.1:" + port, milliseconds(2000)));
  EXPECT_FALSE(plain.Get("k").ok()) << "plain HTTP on a TLS port";
}

}  // namespace
}  // namespace fencepost::client
