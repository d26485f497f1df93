#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "fence/token.h"

namespace fencepost::fence {

// A lease as it is stored: its last holder and whether it released it, the
// fence it was granted under, the token of its last grant, and when it was
// granted and last renewed (Unix ns: for documents, and at start as a hint
// that a lease ran out before the restart; expiry is measured on the
// monotonic clock).
struct LeaseRecord {
  std::string holder;  // the last holder (never empty once granted)
  bool released = false;
  std::string fence;
  Token token = 0;
  std::uint64_t ttl_ms = 0;
  std::int64_t acquired_at_ns = 0;
  std::int64_t renewed_at_ns = 0;
  // Grants to a holder other than the last one (like a Kubernetes Lease's
  // leaseTransitions: 0 after the first grant).
  std::uint64_t transitions = 0;
};

// The stored form: fixed-width big-endian fields, then the holder.
std::string EncodeLease(const LeaseRecord& lease);
// False when `bytes` is not a record EncodeLease wrote.
bool DecodeLease(std::string_view bytes, LeaseRecord* lease);

// A lease operation, decided (fence/rules.h) against the lease's state and
// its fence, in the same group as fenced writes.
struct LeaseOp {
  enum class Kind { kAcquire, kRelease };
  Kind kind = Kind::kAcquire;
  std::string name;
  std::string holder;
  std::uint64_t ttl_ms = 0;  // acquire
  Token token = 0;           // release: the token the holder presents
  std::string fence;         // the fence that guards the lease's name
};

struct LeaseOutcome {
  enum class Verdict {
    kGranted,  // a new token; the fence is raised to it
    kRenewed,  // the holder of record kept its token; expiry reset
    kDenied,   // another holder's lease is live
    kReleased,
    kNotHeld,  // release by a non-holder, of a lease not live, or a wrong token
    // A grant past --max-leases live leases (the engine's count, taken in
    // the step that would commit it): nothing changed.
    kTooManyLeases,
  };
  Verdict verdict = Verdict::kDenied;
  LeaseRecord lease;  // after the operation (before it when refused)
  std::int64_t expires_in_ms = 0;  // of the live lease after (or blocking) it
  bool existed = false;            // a record was there before
  // Denied because another lease guarded by the same fence is live: its
  // name (and `lease` is that lease's record).
  std::string blocking_lease;
  // Why a grant was possible, and the holder before it.
  enum class GrantReason { kFirst, kReleased, kExpired, kFenceAbove };
  GrantReason reason = GrantReason::kFirst;
  std::string previous_holder;
  bool previous_expired = false;  // kExpired: that holder lost the lease
  // This operation noticed that the lease had run out without a release
  // (each expiry is noticed once; see LeaseTable): the lease as it ran out.
  std::optional<LeaseRecord> expired;
};

// Monotonic time in nanoseconds (steady_clock by default; tests pass a fake).
using SteadyNow = std::function<std::int64_t()>;
std::int64_t SteadyNowNs();
// The wall clock in Unix nanoseconds, which stamps records.
std::int64_t WallNowNs();

// A lease as an engine holds it: its record and, while it is held, its
// deadline on the monotonic clock.
struct LeaseEntry {
  LeaseRecord record;
  std::int64_t deadline_ns = 0;  // on the steady clock; released: 0
  bool expiry_noticed = false;
};

// Whether `entry` is held by someone at `now_ns`.
inline bool IsLive(const LeaseEntry& entry, std::int64_t now_ns) {
  return !entry.record.released && now_ns < entry.deadline_ns;
}

}  // namespace fencepost::fence
