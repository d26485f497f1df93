// TLS and mutual TLS end to end, with throwaway certificates made by
// openssl and requests made by curl.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::ServerProcess;
using testing::TempDir;

void Run(const std::string& command) {
  ASSERT_EQ(std::system((command + " >/dev/null 2>&1").c_str()), 0) << command;
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, all
// P-256, valid for a day.
void MakeCertificates(const std::string& dir) {
  const std::string ec =
      "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  Run("openssl req -x509 " + ec + " -keyout " + dir + "/ca.key -out " + dir +
      "/ca.pem -days 1 -subj /CN=fencepost-test-ca");
  std::ofstream(dir + "/server.ext") << "subjectAltName=IP:127.0.0.1\n";
  std::ofstream(dir + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  for (const std::string name : {"server", "client"}) {
    Run("openssl req " + ec + " -keyout " + dir + "/" + name + ".key -out " +
        dir + "/" + name + ".csr -subj /CN=" + name);
    Run("openssl x509 -req -in " + dir + "/" + name + ".csr -CA " + dir +
        "/ca.pem -CAkey " + dir + "/ca.key -CAcreateserial -days 1 -out " +
        dir + "/" + name + ".pem -extfile " + dir + "/" + name + ".ext");
  }
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
  EXPECT_EQ(Curl("--tlsv1.1 --tls-max 1.1 " + ca + base + "/k"), "000")
      << "TLS 1.1 is refused";
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
