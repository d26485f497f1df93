#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "fence/lease.h"
#include "fence/write.h"
#include "http/coro.h"
#include "storage/changes.h"
#include "storage/etcd_fence_cache.h"
#include "storage/etcd_lease_records.h"
#include "storage/etcd_renewals.h"
#include "storage/etcd_session.h"
#include "storage/fences.h"

namespace fencepost::storage {

// Leases (/v1/leases), decided on this replica and applied with etcd
// transactions beside the writes': renewals of leases this replica knows in
// groups (EtcdRenewals), any other operation read first and applied alone,
// up to 16 at a time, and grants that race for --max-leases in the grant
// lane's groups (EtcdLeaseAttempt both). A lease lives in etcd as its
// record and the hold of its fence
// (EtcdLeaseRecords). Every lease operation's transaction compares the
// record and the hold as read, an acquire the fence too (the mark of a
// noticed expiry compares the record only); a grant puts all three: the
// fence is raised in the transaction that grants.
// --max-leases counts the holds under PREFIX (one per live lease, every
// replica's): an acquire that would grant reads their count with the
// lease, at revision R, and is refused (fence::OverLeaseLimit) when the
// limit is reached; else its transaction also compares that no hold under
// PREFIX was created after R. A grant elsewhere in between fails that
// compare, and the acquire is read and decided again (the grants of one
// group count against the same read, each after those before it). So the
// limit holds
// across every replica that shares PREFIX with the same --max-leases, in
// the transaction that grants (a replica with a larger one may fill the
// room up to its own). The count and the compare read every hold: leases
// are for leaders, not millions of locks. A record keeps its fence; a replica
// whose --fence-scope gives the name another refuses the lease
// (Errc::kScopeMismatch).
//
// The expiries that reads notice are told to `tell` (Fences::Tell); those a
// lease operation notices are in its outcome. A grant leaves the fence it
// raised in the cache.
//
// Thread safety: every call on the io thread of the session's io_context;
// `done` callbacks run there too.
class EtcdLeases {
 public:
  EtcdLeases(EtcdSession& session, EtcdFenceCache& cache, ChangeSink tell)
      : session_(session),
        records_(session),
        cache_(cache),
        tell_(std::move(tell)),
        renewals_(session, records_,
                  [this](Pending p) { SettleAlone(std::move(p)); }) {}

  // Queues a lease operation (`pending.write` holds a fence::LeaseOp): a
  // renewal of a lease this replica knows with others (EtcdRenewals), any
  // other alone by one of a few workers.
  void Enqueue(etcd::Pending pending);
  // Lease operations waiting.
  std::size_t queued() const {
    return leases_.size() + grant_lane_.size() + renewals_.queued();
  }
  // Fences::GetLease and Fences::ListLeases.
  Awaitable<Fences::LeaseRead> GetLease(std::string name, std::string fence);
  Awaitable<Fences::LeaseList> ListLeases(std::string prefix, std::string after,
                                          std::size_t limit);
  // Transactions committed.
  std::uint64_t transactions() const {
    return transactions_ + renewals_.transactions();
  }

 private:
  using Pending = etcd::Pending;
  using StoredLease = EtcdLeaseRecords::StoredLease;
  using NamedLeases = EtcdLeaseRecords::NamedLeases;
  static constexpr int kAloneAttempts = 16;
  static constexpr int kLeaseWorkers = 16;

  // Queues `pending` for a worker that settles it alone.
  void SettleAlone(Pending pending);
  // The lane's groups: grants of distinct leases and fences, decided and
  // applied together (EtcdLeaseAttempt), up to twice, then one at a time.
  // Three compares (and one of the holds), three puts and three failure
  // reads a grant: within etcd's default --max-txn-ops (128).
  static constexpr std::size_t kLaneGroup = 32;
  static_assert(3 * kLaneGroup + 1 <= 128);
  static constexpr int kLaneAttempts = 2;

  // A lease operation: decided and applied alone (EtcdLeaseAttempt), again
  // after a conflict. A grant that counts against --max-leases and met a
  // failed compare goes on in the grant lane (grant_lane_), so that this
  // replica's grants stop failing each other's compare of the holds; while
  // the lane runs, such grants go there before their first commit.
  Awaitable<void> SettleLease(Pending pending, bool in_lane = false);
  // The grant lane: settles grant_lane_ a group at a time.
  Awaitable<void> SettleLimited();
  // Queues `pending` in the grant lane, and starts it.
  void ToLane(Pending pending);
  // A worker: settles lease operations from leases_ until it is empty.
  Awaitable<void> SettleLeases();

  EtcdSession& session_;
  EtcdLeaseRecords records_;
  EtcdFenceCache& cache_;
  const ChangeSink tell_;
  std::deque<Pending> leases_;  // lease operations waiting for a worker
  int lease_workers_ = 0;
  std::deque<Pending> grant_lane_;
  bool lane_running_ = false;
  std::uint64_t transactions_ = 0;
  EtcdRenewals renewals_;
};

}  // namespace fencepost::storage
