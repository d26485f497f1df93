#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "fence/lease.h"
#include "fence/rules.h"
#include "http/coro.h"
#include "http/json.h"
#include "storage/etcd_records.h"
#include "storage/etcd_session.h"

namespace fencepost::storage {

// A lease as etcd holds it (EtcdLeases):
//   PREFIX/leases/NAME  a flag byte ('-', or 'n' once its expiry was
//                       noticed) then fence::EncodeLease's record
//   PREFIX/holds/FENCE  "TOKEN DEADLINE_NS NAME_BYTES\n" NAME HOLDER: the
//                       live lease of FENCE, attached to an etcd lease of
//                       ceil(ttl_ms / 1 s) that a renewal keeps alive
// A lease is live while its hold exists: etcd's leader decides expiry, on
// one clock for every replica (and extends its leases when a new leader is
// elected, so a lease never ends early). The hold is keyed by the fence,
// so one lease per fence is live. DEADLINE_NS (wall clock of the replica
// that granted or renewed) only gives documents their expires_in_ms.
//
// This class reads the two (and the fence) and marks an expiry noticed;
// RulesView and EntryOf say what they mean.
//
// Errors: storage::Errc::kStoreUnavailable (etcd did not answer),
// fence::Errc::kStorage (a record fencepost did not write).
//
// Thread safety: every call on the io thread of the session's io_context.
class EtcdLeaseRecords {
 public:
  struct StoredLease {
    std::optional<fence::LeaseRecord> record;
    bool noticed = false;  // its expiry was counted
    std::int64_t record_revision = 0;
    std::optional<etcd::Hold> hold;  // of the lease's fence
    std::int64_t hold_revision = 0;
    etcd::Seen fence;
    // With --max-leases, for an acquire: the holds under PREFIX, counted at
    // `read_revision` (the read's; set by every read of a lease).
    std::optional<std::size_t> holds;
    std::int64_t read_revision = 0;
  };
  using NamedLeases = std::vector<std::pair<std::string, StoredLease>>;

  explicit EtcdLeaseRecords(EtcdSession& session) : session_(session) {}

  // Reads the record of `name`, the hold of `fence` and the fence, and
  // with `count_holds` how many holds there are (StoredLease::holds).
  Awaitable<std::error_code> ReadLease(const std::string& name,
                                       const std::string& fence,
                                       StoredLease* state,
                                       bool count_holds = false);
  // The lease read by three ranges from `first` of `responses` (a
  // transaction's: the record, the hold, the fence), into `*state`.
  static std::error_code StateOf(const http::JsonValue& responses,
                                 std::size_t first, StoredLease* state);
  // ReadLease of each (name, fence) of `leases`, in one transaction, into
  // `*states` (one count of the holds for all). With `each`, a lease
  // fencepost cannot read sets its own error there, not the read's.
  Awaitable<std::error_code> ReadLeases(
      const std::vector<std::pair<std::string, std::string>>& leases,
      std::vector<StoredLease>* states, bool count_holds,
      std::vector<std::error_code>* each = nullptr);
  // Reads the holds of the fences of `leases`, keeping each that is its
  // lease's.
  Awaitable<std::error_code> ReadHolds(NamedLeases& leases);
  // Marks the expiry of the lease `name` as noticed, unless another replica
  // changed its record since `state` was read: true when this call did.
  Awaitable<bool> NoticeExpiry(const std::string& name,
                               const StoredLease& state);

  // What the rules need to know of the lease, from etcd's state: live
  // while its hold exists with its token.
  static fence::LeaseState RulesView(const fence::LeaseOp& op,
                                     const StoredLease& state,
                                     std::int64_t now_ns);
  // The lease document's entry for `state` at steady time `now`.
  static fence::LeaseEntry EntryOf(const StoredLease& state, std::int64_t now);
  // What changed between `read` and `now` (a failure branch's reads; null:
  // unreadable) that a lease operation's transaction compares: the record
  // or the hold (kLease), else an acquire's fence (kFence); nullopt when
  // neither did.
  static std::optional<etcd::Conflict> Changed(const fence::LeaseOp& op,
                                               const StoredLease& read,
                                               const StoredLease* now);
  // What fence::DecideLease made of `op` on `state` (its answer in
  // `*outcome`), with --max-leases over `state.holds` when counted.
  struct Decision {
    std::optional<fence::LeaseRecord> next;  // the change; none: answered
    bool limited = false;    // a grant that counts against --max-leases
    bool unnoticed = false;  // ran out, and no replica counted it yet
  };
  static Decision Decide(const fence::LeaseOp& op, const StoredLease& state,
                         std::size_t max_leases, std::int64_t now_ns,
                         fence::WriteOutcome* outcome);
  // Adds to `txn` the change of a lease operation decided on `state`: the
  // compares of its record and hold as read (an acquire's fence too, since
  // a renewal keeps its token only while the fence is not above it); the
  // puts of the record `next`, a grant's fence, and the hold on the etcd
  // lease `hold_id` until `now_ns` + ttl_ms (a release deletes it); on
  // failure, the reads of the three (StateOf).
  void AddChange(etcd::Txn& txn, const fence::LeaseOp& op,
                 const StoredLease& state, const fence::LeaseRecord& next,
                 fence::LeaseOutcome::Verdict verdict, std::int64_t hold_id,
                 std::int64_t now_ns) const;
  // The lease as the transaction that applied such a change (not a
  // release) left it, at `revision`.
  static StoredLease After(const fence::LeaseOp& op, const StoredLease& state,
                           const fence::LeaseRecord& next, bool granted,
                           std::int64_t hold_id, std::int64_t now_ns,
                           std::int64_t revision);
  // Whether a renewal of `state` to `next` keeps the live hold's etcd
  // lease (the TTL in whole seconds stays): then it is kept alive, not
  // replaced.
  static bool KeepsHold(const fence::LeaseOp& op, const StoredLease& state,
                        const fence::LeaseRecord& next);

 private:
  using Hold = etcd::Hold;

  EtcdSession& session_;
};

}  // namespace fencepost::storage
