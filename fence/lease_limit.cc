#include "fence/lease_limit.h"

#include <algorithm>

#include "fence/rules.h"

namespace fencepost::fence {

bool LeaseLimit::Reserve(const LeaseOp& op, const LeaseState& state,
                         std::int64_t now_ns, bool* reserved) {
  *reserved = false;
  if (!CountsAgainstLeaseLimit(op, state)) return false;
  // The places are read and taken under one lock, which Unreserve takes
  // only after the table counts the lease: a grant between the two is
  // counted twice, never not at all.
  std::lock_guard lock(mu_);
  std::size_t held = reserved_;
  for (const LeaseTable* table : tables_) held += table->Live(now_ns);
  if (OverLeaseLimit(op, state, held, max_leases_)) return true;
  ++reserved_;
  *reserved = true;
  return false;
}

void LeaseLimit::Unreserve(std::size_t count) {
  std::lock_guard lock(mu_);
  reserved_ -= std::min(reserved_, count);
}

}  // namespace fencepost::fence
