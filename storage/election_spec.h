#pragma once

#include <string>
#include <string_view>

#include "storage/etcd_spec.h"

namespace fencepost::storage {

// Where an election is held (SPEC "Elections watched at their source"):
//   etcd://HOST:PORT[,HOST:PORT...]/PATH (etcds:// for TLS): the holder is
//     the key PATH, or the key under PATH/, with the lowest create_revision;
//     its token is that create_revision.
//   zookeeper://HOST:PORT[,HOST:PORT...]/PATH (or zk://): the holder is the
//     child of PATH with the lowest sequence suffix; its token is that
//     node's czxid.
struct ElectionSpec {
  enum class Kind { kEtcd, kZooKeeper };
  Kind kind = Kind::kEtcd;
  std::string url;    // as given, for logs
  EtcdSpec etcd;      // kEtcd: endpoints, TLS files, and PATH as `prefix`
  std::string hosts;  // kZooKeeper: "HOST:PORT,..." as its client takes it
  std::string path;   // kZooKeeper: "/a/b"
  // kZooKeeper: "user:password" for digest authentication (from a file);
  // empty: none.
  std::string digest;
};

// Parses an election's URL into *spec (TLS files and the digest are set
// apart). Returns "" on success, else what is wrong with it.
std::string ParseElectionSpec(std::string_view url, ElectionSpec* spec);

}  // namespace fencepost::storage
