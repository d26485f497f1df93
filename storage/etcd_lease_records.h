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
    // `read_revision` (the read's).
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

 private:
  using Hold = etcd::Hold;

  EtcdSession& session_;
};

}  // namespace fencepost::storage
