#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "client/client.h"
#include "client/lease_backend.h"

namespace fencepost::client {

// fencepost's own leases (PUT, DELETE /v1/leases/{name} on the admin port).
// The token is the lease's: 1 + the highest of the lease's last token and
// its fence's, and the grant raised the fence to it in the same
// transaction, so an earlier holder's writes are refused from that instant
// even on keys the new holder has not written yet.
class FencepostLeases final : public LeaseBackend {
 public:
  // Throws std::invalid_argument for an empty name, a TTL the server would
  // refuse (100 ms to 1 h) or a bad URL, and what Client's constructor
  // throws. Does not connect yet.
  FencepostLeases(Client::Options admin, LeaseSpec spec);

  const LeaseSpec& spec() const override { return spec_; }
  std::string Describe() const override;
  LeaseAttempt Acquire(std::chrono::milliseconds timeout) override;
  LeaseAttempt Renew(std::uint64_t token,
                     std::chrono::milliseconds timeout) override;
  std::string Release(std::uint64_t token,
                      std::chrono::milliseconds timeout) override;
  // The long poll on the lease's fence, on a connection of its own.
  std::unique_ptr<FenceWatch> WatchFence(std::uint64_t token) const override;

 private:
  // One PUT /v1/leases/{name}; `token` 0 for an acquire.
  LeaseAttempt Put(std::uint64_t token, std::chrono::milliseconds timeout);

  const LeaseSpec spec_;
  const Client::Options admin_;
  Client client_;
};

}  // namespace fencepost::client
