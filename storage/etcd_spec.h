#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fencepost::storage {

// Where an etcd cluster is: etcd://HOST:PORT[,HOST:PORT...][/PREFIX], or
// etcds:// for TLS.
struct EtcdSpec {
  struct Endpoint {
    std::string host;
    std::string port;
  };
  std::vector<Endpoint> endpoints;
  std::string prefix = "fencepost";  // without trailing '/'
  bool tls = false;                  // etcds://
  // TLS: the CA etcd's certificate must chain to (empty: the system's), and
  // this replica's client certificate and key (etcd --client-cert-auth).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// Parses an etcd:// or etcds:// URL (the TLS files are set apart). Returns an
// empty string on success, else what is wrong with it.
std::string ParseEtcdSpec(std::string_view url, EtcdSpec* spec);

}  // namespace fencepost::storage
