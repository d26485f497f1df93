#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "http/coro.h"
#include "storage/etcd_fence_cache.h"
#include "storage/etcd_lease_records.h"
#include "storage/etcd_renewals.h"
#include "storage/etcd_session.h"

namespace fencepost::storage {

// One attempt at a group of lease operations read first (EtcdLeases): one
// transaction reads each operation's record, hold and fence (with
// --max-leases and an acquire among them, the count of the holds); each is
// decided in order (fence::DecideLease, through EtcdLeaseRecords::Decide),
// a grant against the count plus the grants decided before it; the etcd
// leases the holds need are granted or kept alive all at once; and one
// transaction applies every change, comparing each record and hold (an
// acquire's fence too, and with a grant counted, that no hold was created
// since the read). A refusal is answered from the read (noticing a lease
// that ran out); a failed compare leaves the group to be decided again.
// The operations of a group name distinct leases and fences.
//
// Errors: as EtcdLeases (storage::Errc::kStoreUnavailable when etcd does
// not answer, the transaction's outcome unknown; kScopeMismatch).
//
// Thread safety: one attempt, on the io thread.
class EtcdLeaseAttempt {
 public:
  using Pending = etcd::Pending;
  using StoredLease = EtcdLeaseRecords::StoredLease;

  EtcdLeaseAttempt(EtcdSession& session, EtcdLeaseRecords& records,
                   EtcdFenceCache& cache, EtcdRenewals& renewals);
  ~EtcdLeaseAttempt();

  // Reads, decides and applies `group`: answers each operation it settles
  // and leaves in `group` those to decide again, with the cause of their
  // failed compare (nullopt: none left). With `defer_limited`, a grant that
  // counts against --max-leases is left in `group` undecided. Sets
  // `*limited` when one was decided so.
  Awaitable<std::optional<etcd::Conflict>> Run(std::vector<Pending>& group,
                                               bool defer_limited,
                                               bool* limited);
  // Whether its transaction committed.
  bool committed() const { return committed_; }

 private:
  // One operation: its state as read, its decision, and its hold's etcd
  // lease.
  struct Op;
  // The etcd lease a hold goes on (AttachHold).
  struct HoldLease;

  // Reads and decides `group`: answers refusals and errors, moves the
  // changes to ops_, and leaves deferred grants in `group`.
  Awaitable<void> Decide(std::vector<Pending>& group, bool defer_limited,
                         bool* limited);
  // The etcd leases of ops_'s holds, all at once; answers or leaves in
  // `group` those that got none.
  Awaitable<void> AttachHolds(std::vector<Pending>& group);
  // The hold's etcd lease for `op`: the live hold's own, kept alive, when
  // a renewal keeps its TTL in whole seconds; else a new one.
  Awaitable<void> AttachHold(Op& op);
  // The transaction that applies ops_; on failure it reads them.
  std::string Txn() const;
  // Answers a refusal (noticing a lease that ran out unnoticed).
  Awaitable<void> Refuse(Op& op);
  // Answers ops_ after the transaction's `reply`, or leaves them in `group`
  // (a failed compare) and says why; counts the grants against the limit
  // it committed.
  std::optional<etcd::Conflict> Answer(const EtcdApi::Reply& reply,
                                       std::vector<Pending>& group,
                                       std::size_t* counted_committed);

  EtcdSession& session_;
  EtcdLeaseRecords& records_;
  EtcdFenceCache& cache_;
  EtcdRenewals& renewals_;
  std::vector<Op> ops_;  // the changes
  // Refused past --max-leases, counted after grants of this group: they
  // stand only when those commit.
  std::vector<Op> over_limit_;
  std::int64_t read_revision_ = 0;  // of the count
  std::size_t counted_ = 0;         // grants decided against --max-leases
  bool waiting_ = false;            // an operation left for the count
  bool committed_ = false;
};

}  // namespace fencepost::storage
