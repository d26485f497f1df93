#pragma once

#include <string>

namespace fencepost::testing {

// Throwaway certificates made by openssl in `dir`, all P-256 and valid for a
// day: a CA (ca.pem, ca.key), a server certificate for 127.0.0.1 it signed
// (server.pem, server.key) and a client certificate (client.pem,
// client.key). Fails the current test when openssl does.
void MakeCertificates(const std::string& dir);

}  // namespace fencepost::testing
