#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace fencepost::client {

// What one lease is: its name in the coordination system, who asks for it
// and for how long.
struct LeaseSpec {
  std::string name;
  std::string holder;
  std::chrono::milliseconds ttl{10000};
};

// The answer to one Acquire or Renew.
struct LeaseAttempt {
  enum class Outcome {
    kHeld,     // the caller holds the lease, as `token`
    kRefused,  // Acquire: another holder has it; Renew: the lease is lost
               // for sure (revoked, expired, taken over)
    kFailed,   // no answer (unreachable, timed out, a server error): the
               // caller does not know and may retry
  };
  Outcome outcome = Outcome::kFailed;
  // kHeld: the fencing token. It is above the token of every earlier
  // holder of this lease in the same system, so fencepost refuses the
  // writes of an earlier holder once this one's token reached the fence.
  std::uint64_t token = 0;
  // kHeld: taken just before the request that granted or renewed the lease
  // was sent, on this process's steady clock. The system keeps the lease at
  // least until sent_at + ttl.
  std::chrono::steady_clock::time_point sent_at;
  // kHeld: how long the system keeps the lease from sent_at, which may be
  // less than asked (a ZooKeeper server negotiates its session timeout).
  std::chrono::milliseconds ttl{0};
  // kRefused: who holds it, or why it is lost, when known; kFailed: what
  // went wrong. For people.
  std::string detail;
  std::string holder;  // kRefused by Acquire: the holder, when known
  // kFailed: false when retrying cannot help (credentials refused, a
  // request the system calls bad), so a campaign should give up.
  bool retryable = true;

  static LeaseAttempt Refused(std::string detail, std::string holder = {}) {
    LeaseAttempt out;
    out.outcome = Outcome::kRefused;
    out.detail = std::move(detail);
    out.holder = std::move(holder);
    return out;
  }
  static LeaseAttempt Failed(std::string detail, bool retryable = true) {
    LeaseAttempt out;
    out.outcome = Outcome::kFailed;
    out.detail = std::move(detail);
    out.retryable = retryable;
    return out;
  }
};

// A wait for a held lease's fence to go above its token: another holder was
// granted it, or it was bumped. Only fencepost's own leases have one (the
// long poll GET /v1/fences/{name}?wait_above=TOKEN); it lets a holder stop
// at once rather than at its next renewal. Used by one thread; needs
// nothing of the backend that made it.
class FenceWatch {
 public:
  enum class Outcome {
    kAbove,     // the fence is above the token: the lease is lost
    kTimedOut,  // not within max_wait; ask again
    kFailed,    // no answer (unreachable, a server error): ask again later
  };
  virtual ~FenceWatch() = default;
  // Waits up to `max_wait` (and the request's own time); `detail` says
  // what happened, for people.
  virtual Outcome Wait(std::chrono::milliseconds max_wait,
                       std::string* detail) = 0;
};

// A coordination system that grants a named lease to one holder at a time,
// with a fencing token that only goes up from one holder to the next:
// fencepost's own leases, etcd, ZooKeeper, PostgreSQL. LeaseKeeper renews
// through it and LeaderElector campaigns through it.
//
// Calls come from one thread at a time (the elector's and the keeper's
// threads take turns), never concurrently; each returns within `timeout`.
class LeaseBackend {
 public:
  virtual ~LeaseBackend() = default;

  // The lease this backend was made for.
  virtual const LeaseSpec& spec() const = 0;
  // "etcd 127.0.0.1:2379", for logs.
  virtual std::string Describe() const = 0;

  // One attempt to hold the lease. kHeld when it is now held by spec().holder
  // (newly granted, or already held by this backend: then with the same
  // token), kRefused when another holder has it, kFailed otherwise.
  virtual LeaseAttempt Acquire(std::chrono::milliseconds timeout) = 0;
  // Renews the lease held as `token`. kHeld with the new sent_at, kRefused
  // when it is lost (detail says why), kFailed when no answer came.
  virtual LeaseAttempt Renew(std::uint64_t token,
                             std::chrono::milliseconds timeout) = 0;
  // Gives up the lease held as `token`, so another holder need not wait for
  // it to expire. Returns "" when released, else why not (it was no longer
  // held, or no answer came: then it expires on its own).
  virtual std::string Release(std::uint64_t token,
                              std::chrono::milliseconds timeout) = 0;
  // A watch of the lease's fence for the holder of `token`, or nullptr when
  // the system has none (only renewals tell that the lease was lost).
  virtual std::unique_ptr<FenceWatch> WatchFence(std::uint64_t token) const {
    (void)token;
    return nullptr;
  }
};

}  // namespace fencepost::client
