#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <system_error>
#include <vector>

#include "fence/write.h"
#include "http/coro.h"
#include "storage/etcd_fence_cache.h"
#include "storage/etcd_session.h"
#include "storage/etcd_turns.h"

namespace fencepost::storage {

// The write path of the etcd store: fence writes (with their values) and
// batches, queued and settled in groups.
//
// Group commit: the writes that arrive while a transaction is in flight
// are decided together, in arrival order, against the fences as this
// replica last saw them (EtcdFenceCache: token and mod_revision), and
// applied in one etcd transaction that compares the mod_revision of every
// fence it changes. A failed compare means another replica moved one of
// them: its failure branch reads them back, and the group is decided again
// (three times at most, then each write alone). A rejection needs no
// compare: a fence never goes down, so a token below one seen once stays
// below it.
//
// What a group decided, and its transaction, are EtcdGroupPlan's (with the
// conditional writes); a write that takes its fence's turn (EtcdTurns) takes
// it in its group's transaction.
//
// One transaction holds at most 64 fences and 63 values (etcd's default
// --max-txn-ops is 128) and 1 MiB of values; a value may be 512 KiB. A
// batch (POST /) is one transaction of its own, within the same bounds.
//
// Thread safety: every call on the io thread of the session's io_context;
// `done` callbacks run there too.
class EtcdGroups {
 public:
  static constexpr std::size_t kMaxValueBytes = 512 * 1024;

  EtcdGroups(EtcdSession& session, EtcdFenceCache& cache, EtcdTurns& turns)
      : session_(session), cache_(cache), turns_(turns) {}

  // Why `write` (a fence write or a batch) cannot be settled here:
  // Errc::kBatchTooLarge, kValueTooLarge; none when it can.
  static std::error_code Refuse(const fence::FenceWrite& write);
  // Queues a fence write or a batch (with `pending.turn`, a write that takes
  // its fence's turn) and settles it in its group.
  void Enqueue(etcd::Pending pending);
  // Writes waiting.
  std::size_t queued() const { return queue_.size(); }
  // Transactions committed.
  std::uint64_t transactions() const { return transactions_; }

 private:
  using Pending = etcd::Pending;
  using Settled = etcd::Settled;

  static constexpr std::size_t kMaxGroupFences = 64;
  static constexpr std::size_t kMaxGroupValues = 63;
  static constexpr std::size_t kMaxGroupBytes = 1u << 20;
  static constexpr int kGroupAttempts = 3;
  static constexpr int kAloneAttempts = 16;

  // Whether a batch's writes fit one transaction.
  static bool FitsOneTransaction(const fence::Batch& batch);
  Awaitable<void> Run();
  // The next group of queue_: the writes one transaction can hold, or a
  // batch alone.
  std::vector<Pending> NextGroup();
  // Decides and commits `group`, deciding again after conflicts.
  Awaitable<void> Settle(std::vector<Pending> group);
  // A batch: its writes decided in order and applied all together, or none.
  Awaitable<void> SettleBatch(Pending batch);
  // One attempt: kConflict when a compare failed (the cache now holds the
  // fences as they are; `*conflict` says why), or when the turn lease ran
  // out (kTurn); every write is answered otherwise.
  // With `all_or_nothing`, one write not applied (a rejection, or a
  // precondition that fails) applies nothing (each write is answered with
  // its own decision).
  Awaitable<Settled> TryOnce(std::vector<Pending>& group,
                             etcd::Conflict* conflict,
                             bool all_or_nothing = false);
  // Answers the writes of `group` that take a turn (the lease ran out since
  // they asked for it) and leaves the others.
  static void DropTurns(std::vector<Pending>& group);
  void FailAll(std::vector<Pending>& group, std::error_code error);

  EtcdSession& session_;
  EtcdFenceCache& cache_;
  EtcdTurns& turns_;
  std::deque<Pending> queue_;
  bool running_ = false;
  std::uint64_t transactions_ = 0;
};

}  // namespace fencepost::storage
