#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "http/coro.h"
#include "storage/etcd_lease_records.h"
#include "storage/etcd_session.h"

namespace fencepost::storage {

// Renewals of leases this replica knows (EtcdLeases): an acquire of a lease
// whose last state this replica committed or read is decided on that
// state, with others, and applied in one etcd transaction for the group,
// while the etcd leases of their holds are kept alive beside it. So a
// renewal costs one round trip, and a group one raft entry.
//
// The transaction compares each lease's record, hold and fence with the
// state it was decided on. A failed compare reads them in the same
// transaction: the group is decided again on what it read, then, still
// contended, each operation goes alone. An operation that is no renewal
// keeping its hold's etcd lease on the state known (a grant, a release, a
// refusal, a new TTL) goes alone at once: the lease operations that read
// first (EtcdLeases). A renewal is answered only once its hold's etcd lease
// was kept alive after it was decided: the hold then lives past the new
// deadline. One whose etcd lease ran out meanwhile goes alone (its hold is
// gone: it is decided afresh).
//
// Thread safety: every call on the io thread of the session's io_context;
// `done` callbacks run there too.
class EtcdRenewals {
 public:
  using Pending = etcd::Pending;
  using StoredLease = EtcdLeaseRecords::StoredLease;

  // `alone`: settles an operation by reading it first (EtcdLeases).
  EtcdRenewals(EtcdSession& session, std::function<void(Pending)> alone)
      : session_(session), alone_(std::move(alone)) {}

  // Takes `pending` (an acquire) when its lease is known; false otherwise.
  bool Enqueue(Pending& pending);
  // Operations waiting.
  std::size_t queued() const { return queue_.size(); }

  // What this replica knows of a lease: its state after a transaction of
  // this replica committed it (revisions: the transaction's).
  void Remember(const std::string& name, StoredLease state);
  void Forget(const std::string& name) { known_.erase(name); }

  // Transactions committed.
  std::uint64_t transactions() const { return transactions_; }

 private:
  // A renewal of a group: decided, and the parts of its transaction.
  struct Planned;

  static constexpr std::size_t kGroupLeases = 64;
  static constexpr int kRunners = 2;        // groups in flight
  static constexpr int kGroupAttempts = 2;  // then each alone
  static constexpr std::size_t kKnownLeases = 1 << 16;

  // A runner: settles groups from queue_ until it is empty.
  Awaitable<void> Run();
  // The next group: up to kGroupLeases operations on distinct leases and
  // fences, none in a group in flight (they would fail each other's
  // compare).
  std::vector<Pending> NextGroup();
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
  // Keeps the etcd leases of `planned` alive, all at once (Planned::kept);
  // KeptAlive::done is cancelled when the last has answered.
  struct KeptAlive;
  std::shared_ptr<KeptAlive> KeepAlive(std::vector<Planned>& planned);
  // Answers or hands on `planned` after its transaction's `reply`; a
  // failed compare leaves them in `group` to decide again, and its cause.
  std::optional<etcd::Conflict> Take(std::vector<Planned>& planned,
                                     const EtcdApi::Reply& reply,
                                     std::vector<Pending>& group);
  // Decides `pending` on the state known: nullopt when it is no renewal
  // that keeps its hold (or its lease is not known).
  std::optional<Planned> Decide(const Pending& pending, std::int64_t now_ns);

  EtcdSession& session_;
  const std::function<void(Pending)> alone_;
  std::deque<Pending> queue_;
  int runners_ = 0;
  std::unordered_map<std::string, StoredLease> known_;
  // The leases and fences of the groups in flight.
  std::set<std::string> names_in_flight_, fences_in_flight_;
  std::uint64_t transactions_ = 0;
};

}  // namespace fencepost::storage
