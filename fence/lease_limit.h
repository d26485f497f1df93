#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "fence/lease.h"
#include "fence/lease_table.h"
#include "fence/rules.h"

namespace fencepost::fence {

// --max-leases across every environment of a data directory, decided where
// a grant is committed. The live leases are those of each environment's
// LeaseTable, plus the grants a committer has decided and not yet put in
// its table: each such grant holds a place (Reserve) from the step that
// decides it until its group is answered, when the table counts it
// (Unreserve, after LeaseTable::Set), or until it is dropped unapplied.
// A grant is counted by one of the two at every moment, so grants decided
// at once by committers on different shards, or in one group, never pass
// the limit together. Releases and expiries free their place through the
// tables (a table counts a lease live until its deadline).
//
// Thread safety: any thread; the committers of every shard share one.
class LeaseLimit {
 public:
  explicit LeaseLimit(std::size_t max_leases) : max_leases_(max_leases) {}
  LeaseLimit(const LeaseLimit&) = delete;
  LeaseLimit& operator=(const LeaseLimit&) = delete;

  // Counts the leases of `table` (which must outlive this); before any
  // Reserve.
  void Watch(const LeaseTable* table) { tables_.push_back(table); }

  // For `op`, with `state` as the committer read it at `now_ns` (steady):
  // whether it would pass the limit (fence::OverLeaseLimit over the leases
  // live in every table and the places held). When it counts against the
  // limit and would not pass it, it takes a place (`*reserved`).
  bool Reserve(const LeaseOp& op, const LeaseState& state, std::int64_t now_ns,
               bool* reserved);
  // Gives back `count` places Reserve took.
  void Unreserve(std::size_t count);

  std::size_t max_leases() const { return max_leases_; }

 private:
  const std::size_t max_leases_;
  std::vector<const LeaseTable*> tables_;
  std::mutex mu_;
  std::size_t reserved_ = 0;  // guarded by mu_
};

}  // namespace fencepost::fence
