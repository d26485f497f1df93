#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fencepost::storage {

// Where an etcd cluster is: etcd://HOST:PORT[,HOST:PORT...][/PREFIX].
struct EtcdSpec {
  struct Endpoint {
    std::string host;
    std::string port;
  };
  std::vector<Endpoint> endpoints;
  std::string prefix = "fencepost";  // without trailing '/'
};

// Parses an etcd:// URL. Returns an empty string on success, else what is
// wrong with it.
std::string ParseEtcdSpec(std::string_view url, EtcdSpec* spec);

}  // namespace fencepost::storage
