#include "tests/testing/certificates.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace fencepost::testing {
namespace {

void Run(const std::string& command) {
  ASSERT_EQ(std::system((command + " >/dev/null 2>&1").c_str()), 0) << command;
}

}  // namespace

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

}  // namespace fencepost::testing
