#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

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

// A lease operation, decided by the committer against the lease's state and
// its fence, in the same group as fenced writes.
struct LeaseOp {
  enum class Kind { kAcquire, kRelease };
  Kind kind = Kind::kAcquire;
  std::string name;
  std::string holder;
  std::uint64_t ttl_ms = 0;  // acquire
  Token token = 0;           // release: the token the holder presents
};

struct LeaseOutcome {
  enum class Verdict {
    kGranted,  // a new token; the fence is raised to it
    kRenewed,  // the holder of record kept its token; expiry reset
    kDenied,   // another holder's lease is live
    kReleased,
    kNotHeld,  // release by a non-holder, of a lease not live, or a wrong token
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

// The committed leases of one environment in memory, with each live lease's
// deadline on the monotonic clock. The committer loads it from LMDB at
// start (every held lease counts as renewed then) and updates it after a
// group's log sync, before the group's answers. Expiry is noticed lazily:
// Notice counts each lease that ran out (without a release) once.
//
// Thread safety: every method may be called from any thread.
class LeaseTable {
 public:
  struct Entry {
    LeaseRecord record;
    std::int64_t deadline_ns = 0;  // on the steady clock; released: 0
    bool expiry_noticed = false;
  };

  std::optional<Entry> Find(std::string_view name) const;
  void Set(const std::string& name, Entry entry);
  // A live lease other than `name` whose fence is `fence`, if any.
  std::optional<std::pair<std::string, Entry>> LiveOnFence(
      std::string_view fence, std::string_view name, std::int64_t now_ns) const;

  // Up to `limit` leases whose names start with `prefix` and sort after
  // `after`, in name order.
  std::vector<std::pair<std::string, Entry>> List(std::string_view prefix,
                                                  std::string_view after,
                                                  std::size_t limit) const;
  // Marks every lease that ran out by `now_ns` and was not noticed yet;
  // returns them (for fencepost_lease_expirations_total and the log).
  std::vector<std::pair<std::string, LeaseRecord>> NoticeExpired(
      std::int64_t now_ns);
  // The same for one lease: its record when this call noticed its expiry.
  std::optional<LeaseRecord> NoticeExpired(std::string_view name,
                                           std::int64_t now_ns);
  // Leases held and not run out at `now_ns`.
  std::size_t Live(std::int64_t now_ns) const;
  // Leases held whose expiry was not noticed: Live after NoticeExpired(now),
  // in constant time (for --max-leases).
  std::size_t Held() const;

 private:
  // Keeps by_deadline_ in step with one entry's change.
  void Index(const std::string& name, const Entry* before, const Entry& after);

  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
  // Lease names by fence.
  std::map<std::string, std::set<std::string>, std::less<>> by_fence_;
  // The leases neither released nor noticed expired, by deadline: expiries
  // are found, and live leases counted, without walking the records of
  // every lease ever granted.
  std::set<std::pair<std::int64_t, std::string>> by_deadline_;
};

// Whether `entry` is held by someone at `now_ns`.
inline bool IsLive(const LeaseTable::Entry& entry, std::int64_t now_ns) {
  return !entry.record.released && now_ns < entry.deadline_ns;
}

}  // namespace fencepost::fence
