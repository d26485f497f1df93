#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fence/write.h"
#include "http/json.h"
#include "storage/etcd_fence_cache.h"
#include "storage/etcd_records.h"
#include "storage/etcd_session.h"
#include "storage/etcd_turns.h"

namespace fencepost::storage {

// One attempt at a group of writes (EtcdGroups): what it decided, the etcd
// transaction that applies it, and the answers that transaction's reply
// gives.
//
// Conditional writes (If-Match, If-None-Match): a write whose precondition
// is not empty is decided against its value's mod_revision and its fence,
// both read afresh before the group is decided (in one read transaction
// with the fences missing from the cache: ReadsOf), so that a 412, which
// needs no transaction, is answered against the fence as it is, not as
// cached. When such a write is applied, the transaction also compares the
// value's mod_revision with the one read (0: none): if another replica
// wrote the value in between, the compare fails and the group is decided
// again. In a group, a write sees the writes before it: after a put its
// value exists, with a tag not known until the transaction commits (its
// revision), so no If-Match names it; after a delete there is none. A write
// that carries the value's state (FencedWrite::value_now, the fs: backend)
// is decided against that. An applied put's tag is the transaction's
// revision; a put that a later put of the same group replaced has none.
//
// A write that takes its fence's turn (EtcdTurns) takes it in the
// transaction, which compares the turn key absent.
//
// Thread safety: one attempt, on the io thread; `group` outlives it.
class EtcdGroupPlan {
 public:
  using Pending = etcd::Pending;
  using ValuesRead = EtcdFenceCache::ValuesRead;

  // What the cache loads before `group` is decided: the fences of `group`
  // missing from `cache`, and those of the writes with a precondition
  // (every fence of a batch that has one), and the values those writes
  // replace (unless they carry them, value_now).
  static EtcdFenceCache::Reads ReadsOf(const std::vector<Pending>& group,
                                       bool all_or_nothing,
                                       const EtcdFenceCache& cache);

  // Decides every write of `group` in order through one fence::Fold (with
  // `all_or_nothing`, as one batch) against the fences and values as the
  // writes before it left them, the cache, and the values of `read`. With
  // `all_or_nothing`, one write not applied (a rejection, or a precondition
  // that fails) applies nothing (each write is answered with its own
  // decision).
  EtcdGroupPlan(EtcdSession& session, EtcdFenceCache& cache, EtcdTurns& turns,
                std::vector<Pending>& group, bool all_or_nothing,
                std::int64_t now_ns, const ValuesRead& read);

  // Whether a write of the group takes its fence's turn.
  bool takes_turns() const { return !turn_writes_.empty(); }
  // Whether the plan applies nothing: then Answer answers every write.
  bool applies_nothing() const {
    return changed_.empty() || (all_or_nothing_ && rejected_);
  }
  void Answer();

  // The transaction that applies the plan: compare each changed fence as
  // this replica saw it (and each turn absent); success: the fences that
  // moved, each value's last write with its previous kv, the turns;
  // failure: the fences and turns as they are.
  std::string Txn();
  // The responses of the transaction's branch.
  std::size_t ops(bool success) const {
    return success ? success_ops_ : failure_ops_;
  }
  // After a transaction whose outcome is unknown: removes the turns it
  // would take, if etcd applies it.
  void ForgetTurns() const;
  // A failed compare: caches the fences as the failure branch read them
  // and answers the writes whose turn another replica holds (leaving the
  // others in the group). Returns its cause: kFence when a fence compared
  // moved, else kTurn when a turn was held, else kValue (a value compare,
  // which the failure branch does not read).
  etcd::Conflict TakeConflict(const http::JsonValue& responses);
  // A committed transaction: caches the fences it moved and answers every
  // write of the group.
  void AnswerCommitted(const http::JsonValue& answer,
                       const http::JsonValue& responses);

 private:
  using Seen = etcd::Seen;
  // What the group's fence::Fold loads from this replica.
  class GroupLoads;

  // A write of a group (never a batch or a lease operation: those are
  // settled apart).
  static const fence::FencedWrite& WriteOf(const Pending& pending) {
    return std::get<fence::FencedWrite>(pending.write);
  }

  EtcdSession& session_;
  EtcdFenceCache& cache_;
  EtcdTurns& turns_;
  std::vector<Pending>& group_;
  const bool all_or_nothing_;

  std::vector<fence::WriteOutcome> outcomes_;      // one per write
  std::map<std::string, Seen, std::less<>> view_;  // fences as left
  std::map<std::string, std::size_t, std::less<>> last_value_;  // key->write
  // The values whose precondition was decided from etcd's read: key ->
  // mod_revision read.
  std::map<std::string, std::int64_t, std::less<>> value_compares_;
  // Writes refused (412) over a value put earlier in the group, whose tag
  // is the transaction's revision.
  std::vector<std::size_t> unknown_tags_;
  std::vector<std::string> changed_;      // fences compared (and maybe put)
  std::vector<std::size_t> turn_writes_;  // writes that take their turn
  bool rejected_ = false;
  // Set by Txn, in the order of its responses.
  std::vector<std::int64_t> compared_;   // changed_'s mod_revisions
  std::vector<std::string> moved_;       // the fences put
  std::vector<std::string> value_keys_;  // the values put or deleted
  std::vector<std::string> turn_values_;
  std::size_t success_ops_ = 0, failure_ops_ = 0;
};

}  // namespace fencepost::storage
