#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "http/coro.h"
#include "storage/etcd_lease_records.h"
#include "storage/etcd_session.h"

namespace fencepost::storage {

// Renewals of leases this replica knows (EtcdLeases): an acquire of a lease
// whose state this replica last committed or read (holding its fence) is
// decided on that state, with the others waiting, and the group is applied
// in one etcd transaction while the etcd leases of their holds are kept
// alive beside it. So a renewal costs one round trip, and a group one raft
// entry.
//
// The transaction compares each lease's record, hold and fence with the
// state it was decided on; a failed compare reads them in the same
// transaction. The renewals whose lease did not change are decided again at
// once (twice at most); those whose lease changed, and any acquire that is
// not a renewal keeping its hold's etcd lease on the state known (a grant,
// a refusal, a new TTL in whole seconds), are handed to `alone`: read
// first, decided alone. A renewal is answered only once its hold's etcd
// lease was kept alive after it was decided, so the hold lives past the new
// deadline; one whose etcd lease ran out meanwhile is handed on (its hold
// is gone).
//
// Errors: etcd not answering the transaction or a keep-alive answers those
// renewals storage::Errc::kStoreUnavailable (the transaction may be
// applied: a holder that asks again renews); an answer fencepost cannot
// read, fence::Errc::kStorage.
//
// Thread safety: every call on the io thread of the session's io_context;
// `done` callbacks run there too.
class EtcdRenewals {
 public:
  using Pending = etcd::Pending;
  using StoredLease = EtcdLeaseRecords::StoredLease;

  // `alone`: settles an operation by reading it first (EtcdLeases).
  EtcdRenewals(EtcdSession& session, const EtcdLeaseRecords& records,
               std::function<void(Pending)> alone)
      : session_(session), records_(records), alone_(std::move(alone)) {}

  // Whether the lease `name` is known: an acquire of it may be queued.
  bool Knows(const std::string& name) const { return known_.count(name) > 0; }
  // Queues `pending`, an acquire of a known lease.
  void Enqueue(Pending pending);
  // Operations waiting.
  std::size_t queued() const { return queue_.size(); }

  // What this replica knows of a lease: its state as read, or after a
  // transaction of this replica committed it (revisions: the
  // transaction's).
  void Remember(const std::string& name, StoredLease state);
  void Forget(const std::string& name) { known_.erase(name); }

  // Transactions committed.
  std::uint64_t transactions() const { return transactions_; }

 private:
  // A renewal of a group: decided, and the parts of its transaction.
  struct Planned;

  // Three compares and three failure reads a renewal, within etcd's
  // default --max-txn-ops (128).
  static constexpr std::size_t kGroupLeases = 32;
  static_assert(3 * kGroupLeases <= 128);
  static constexpr int kRunners = 2;        // groups in flight
  static constexpr int kGroupAttempts = 2;  // then each alone
  static constexpr std::size_t kKnownLeases = 1 << 16;

  // How far a group is looked for past operations left for later.
  static constexpr std::size_t kGroupScan = 4 * kGroupLeases;

  // A runner: settles groups from queue_ until it is empty.
  Awaitable<void> Run();
  Awaitable<void> Settle(std::vector<Pending> group);
  // One attempt: answers or hands on every operation of `group` but those
  // to decide again (left in it); the cause of their failed compare.
  Awaitable<std::optional<etcd::Conflict>> TryOnce(std::vector<Pending>& group);
  // Decides each of `group` on the state known, handing on those that are
  // no renewal keeping its hold (EtcdRenewals's class comment).
  std::vector<Planned> Plan(std::vector<Pending>& group);
  // The transaction of `planned`: each compared as decided on, put as
  // renewed; on failure each read.
  std::string TxnOf(const std::vector<Planned>& planned) const;
  // The calls of an attempt, made all at once: its transaction, and the
  // keep-alive of each renewal's etcd lease (Planned::kept).
  static Awaitable<void> Commit(EtcdSession& session, std::string txn,
                                EtcdApi::Reply& reply);
  static Awaitable<void> KeepAlive(EtcdSession& session, Planned& p);
  // Answers or hands on `planned` after its transaction's `reply`; a failed
  // compare leaves in `group` those to decide again, and says why.
  std::optional<etcd::Conflict> Answer(std::vector<Planned>& planned,
                                       const EtcdApi::Reply& reply,
                                       std::vector<Pending>& group);
  // Decides `pending` on the state known: nullopt when it is no renewal
  // that keeps its hold (or its lease is not known).
  std::optional<Planned> Decide(const Pending& pending, std::int64_t now_ns);

  EtcdSession& session_;
  const EtcdLeaseRecords& records_;
  const std::function<void(Pending)> alone_;
  std::deque<Pending> queue_;
  int runners_ = 0;
  std::unordered_map<std::string, StoredLease> known_;
  etcd::Busy in_flight_;  // the leases and fences of the groups in flight
  std::uint64_t transactions_ = 0;
};

}  // namespace fencepost::storage
