#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fence/lease.h"

namespace fencepost::fence {

// The committed leases of one environment in memory, with each live lease's
// deadline on the monotonic clock. The committer loads it from LMDB at
// start (every held lease counts as renewed then) and updates it after a
// group's log sync, before the group's answers. Expiry is noticed lazily:
// Notice counts each lease that ran out (without a release) once.
//
// Thread safety: every method may be called from any thread.
class LeaseTable {
 public:
  using Entry = LeaseEntry;

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

}  // namespace fencepost::fence
