// TLS and mutual TLS end to end, with throwaway certificates made by
// openssl and requests made by curl.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/testing/certificates.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

using testing::MakeCertificates;
using testing::ServerProcess;
using testing::TempDir;

void Run(const std::string& command) {
  ASSERT_EQ(std::system((command + " >/dev/null 2>&1").c_str()), 0) << command;
}

// curl's status code for one request ("000" when no HTTP answer came).
std::string Curl(const std::string& args) {
  const std::string command =
      "curl -s -o /dev/null -w '%{http_code}' --max-time 5 " + args +
      " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[64];
  while (fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  pclose(pipe);
  return out;
}

// Whether `openssl s_client`, offering exactly `version` ("tls1_1",
// "tls1_2") with every cipher allowed (security level 0, which TLS 1.1's
// signatures need), completes a handshake with 127.0.0.1:`port`.
bool Handshakes(std::uint16_t port, const std::string& version) {
  const std::string command =
      "openssl s_client -connect 127.0.0.1:" + std::to_string(port) + " -" +
      version +
      " -cipher 'DEFAULT:@SECLEVEL=0' </dev/null 2>&1 | grep -q "
      "'^New, TLSv1'";
  return std::system(command.c_str()) == 0;
}

bool HaveTools() {
  return std::system("openssl version >/dev/null 2>&1") == 0 &&
         std::system("curl --version >/dev/null 2>&1") == 0;
}

TEST(TlsTest, ServesHttpsAndRefusesPlainHttp) {
  if (!HaveTools())
    FAIL() << "openssl or curl missing; scripts/deps.sh installs it";
  TempDir dir;
  MakeCertificates(dir.path());
  ServerProcess server(dir / "data", {"--tls-cert", dir / "server.pem",
                                      "--tls-key", dir / "server.key"});
  const std::string base =
      "https://127.0.0.1:" + std::to_string(server.data_port());
  const std::string ca = "--cacert " + (dir / "ca.pem") + " ";
  EXPECT_EQ(Curl(ca + "-X PUT -H 'Fencing-Token: 1' --data v " + base + "/k"),
            "201");
  EXPECT_EQ(Curl(ca + base + "/k"), "200");
  EXPECT_EQ(Curl(ca + "https://127.0.0.1:" +
                 std::to_string(server.admin_port()) + "/readyz"),
            "200")
      << "the admin port is TLS too";
  EXPECT_EQ(
      Curl("http://127.0.0.1:" + std::to_string(server.data_port()) + "/k"),
      "000")
      << "plain HTTP on a TLS port gets no answer";
  EXPECT_TRUE(Handshakes(server.data_port(), "tls1_2"));
  EXPECT_FALSE(Handshakes(server.data_port(), "tls1_1"))
      << "TLS 1.1 is refused";
  EXPECT_FALSE(Handshakes(server.admin_port(), "tls1_1"))
      << "TLS 1.1 is refused on the admin port too";
}

// The client above does offer TLS 1.1: a server that allows it (openssl's
// own, at security level 0) completes the handshake, so the refusal seen
// from fencepost is fencepost's.
TEST(TlsTest, TheTls11ClientIsAbleToConnectToAServerThatAllowsIt) {
  if (!HaveTools())
    FAIL() << "openssl or curl missing; scripts/deps.sh installs it";
  TempDir dir;
  MakeCertificates(dir.path());
  const std::uint16_t port = testing::FreePort();
  testing::ChildProcess lenient(
      {"openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port),
       "-cert", dir / "server.pem", "-key", dir / "server.key", "-tls1_1",
       "-cipher", "DEFAULT:@SECLEVEL=0", "-www"},
      dir / "s_server.log");
  bool handshook = false;
  for (int i = 0; i < 100 && !handshook; ++i) {
    handshook = Handshakes(port, "tls1_1");
    if (!handshook) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(handshook) << "this openssl cannot offer TLS 1.1 at all";
}

TEST(TlsTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  if (!HaveTools())
    FAIL() << "openssl or curl missing; scripts/deps.sh installs it";
  TempDir dir;
  MakeCertificates(dir.path());
  ServerProcess server(dir / "data",
                       {"--tls-cert", dir / "server.pem", "--tls-key",
                        dir / "server.key", "--tls-client-ca", dir / "ca.pem"});
  const std::string url =
      "https://127.0.0.1:" + std::to_string(server.data_port()) + "/k";
  const std::string ca = "--cacert " + (dir / "ca.pem") + " ";
  EXPECT_EQ(Curl(ca + url), "000") << "no client certificate";
  EXPECT_EQ(Curl(ca + "--cert " + (dir / "server.pem") + " --key " +
                 (dir / "server.key") + " " + url),
            "404")
      << "any certificate from the CA is let in";
  EXPECT_EQ(Curl(ca + "--cert " + (dir / "client.pem") + " --key " +
                 (dir / "client.key") +
                 " -X PUT -H 'Fencing-Token: 1' --data v " + url),
            "201");
}

// A certificate with the right shape (clientAuth) from a CA the server was
// not told to trust is refused like none at all.
TEST(TlsTest, MutualTlsRefusesACertificateFromAForeignCa) {
  if (!HaveTools())
    FAIL() << "openssl or curl missing; scripts/deps.sh installs it";
  TempDir dir;
  MakeCertificates(dir.path());
  const std::string ec =
      "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  fencepost::Run("openssl req -x509 " + ec + " -keyout " +
                 (dir / "other-ca.key") + " -out " + (dir / "other-ca.pem") +
                 " -days 1 -subj /CN=other-ca");
  fencepost::Run("openssl req " + ec + " -keyout " + (dir / "foreign.key") +
                 " -out " + (dir / "foreign.csr") + " -subj /CN=client");
  fencepost::Run("openssl x509 -req -in " + (dir / "foreign.csr") + " -CA " +
                 (dir / "other-ca.pem") + " -CAkey " + (dir / "other-ca.key") +
                 " -CAcreateserial -days 1 -out " + (dir / "foreign.pem") +
                 " -extfile " + (dir / "client.ext"));
  ServerProcess server(dir / "data",
                       {"--tls-cert", dir / "server.pem", "--tls-key",
                        dir / "server.key", "--tls-client-ca", dir / "ca.pem"});
  const std::string url =
      "https://127.0.0.1:" + std::to_string(server.data_port()) + "/k";
  const std::string ca = "--cacert " + (dir / "ca.pem") + " ";
  EXPECT_EQ(Curl(ca + "--cert " + (dir / "foreign.pem") + " --key " +
                 (dir / "foreign.key") +
                 " -X PUT -H 'Fencing-Token: 1' --data v " + url),
            "000")
      << "a client certificate from a foreign CA is refused";
  EXPECT_EQ(Curl(ca + "--cert " + (dir / "client.pem") + " --key " +
                 (dir / "client.key") + " " + url),
            "404")
      << "the same request with the CA's certificate is let in, and nothing "
         "was stored by the refused one";
}

TEST(TlsTest, HalfAConfigurationExitsTwo) {
  TempDir dir;
  EXPECT_EQ(
      testing::RunFencepost({"serve", "--tls-cert", dir / "x.pem"}).exit_status,
      2);
  EXPECT_EQ(testing::RunFencepost({"serve", "--tls-client-ca", dir / "ca.pem"})
                .exit_status,
            2);
  auto unreadable =
      testing::RunFencepost({"serve", "--data-dir", dir / "d", "--tls-cert",
                             dir / "none.pem", "--tls-key", dir / "none.key"});
  EXPECT_EQ(unreadable.exit_status, 2);
  EXPECT_NE(unreadable.output.find("TLS"), std::string::npos);
}

}  // namespace
}  // namespace fencepost
