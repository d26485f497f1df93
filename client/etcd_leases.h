#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/lease_backend.h"

namespace fencepost::client {

// Leases of etcd (v3 API, through its JSON gateway over HTTP/1.1).
//
// Acquire grants an etcd lease with the TTL (etcd counts in whole seconds:
// rounded up, and a server may raise it to its minimum) and, in one
// transaction, creates the election key PREFIX/NAME bound to that lease
// only if the key does not exist; the value is the holder. The token is
// the key's create_revision: etcd's revision counts every change of the
// whole key space, and the key of a later holder can only be created after
// the earlier one's was deleted, so a later holder's token is higher.
// Renew is a keep-alive of the lease, followed by a read of the key that
// checks it is still the one created. Release revokes the lease, which
// deletes the key.
//
// URL: etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (etcds:// for TLS, with
// `ca_file` or the system's CAs). PREFIX defaults to "fencepost/leases".
// When an endpoint cannot be reached the next one is tried.
class EtcdLeases final : public LeaseBackend {
 public:
  // Throws std::invalid_argument for a bad URL, an empty name or a TTL
  // under 1 ms. Does not connect yet.
  EtcdLeases(const std::string& url, LeaseSpec spec, std::string ca_file = {});
  ~EtcdLeases() override;

  const LeaseSpec& spec() const override { return spec_; }
  std::string Describe() const override;
  LeaseAttempt Acquire(std::chrono::milliseconds timeout) override;
  LeaseAttempt Renew(std::uint64_t token,
                     std::chrono::milliseconds timeout) override;
  std::string Release(std::uint64_t token,
                      std::chrono::milliseconds timeout) override;

  // The etcd key the lease is held under.
  const std::string& key() const { return key_; }

 private:
  struct Call;  // one gateway request's answer
  Call Post(const std::string& path, const std::string& body,
            std::chrono::steady_clock::time_point deadline);
  std::string Revoke(std::int64_t lease,
                     std::chrono::steady_clock::time_point deadline);

  const LeaseSpec spec_;
  std::string key_;
  std::vector<Client> endpoints_;
  std::size_t current_ = 0;  // the endpoint tried first
  // The lease held, if any: etcd's lease ID and the key's create_revision.
  std::optional<std::int64_t> lease_id_;
  std::uint64_t token_ = 0;
};

}  // namespace fencepost::client
