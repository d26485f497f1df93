#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "fence/env.h"
#include "fence/wal.h"
#include "fence/write.h"

namespace fencepost::fence {

// Map space a record of `bytes` (fence, key and body) may take once applied:
// its bytes twice (a page split can copy them) plus a page of overhead.
inline std::size_t MapReservation(std::size_t bytes) {
  return 2 * bytes + 4096;
}
inline std::size_t MapReservation(const WalRecord& r) {
  return MapReservation(r.fence.size() + r.key.size() + r.body.size());
}
// What the records of `write` may take, at most.
std::size_t MapReservation(const FenceWrite& write);
// What a record handed to the applier holds in memory until it is applied,
// as the committer's bound on unapplied records counts it: its strings and
// a fixed 256 bytes for the record and the overlay's entry.
inline std::size_t HeldBytes(const WalRecord& r) {
  return r.fence.size() + r.key.size() + r.body.size() + r.content_type.size() +
         256;
}

// Writes a committer's logged records into LMDB behind its answers, as
// checkpoints: the log is the durable copy of a write, and LMDB catches up
// seconds later, so a page that many writes touch is written to the disk
// once per checkpoint rather than once per write.
//
// A thread of its own takes the records the committer hands it once they
// are answered (Add) and gathers them until they hold `checkpoint_bytes`
// (HeldBytes, counted from Owe) or kCheckpointInterval has passed since the
// first. It applies them in log order in one write transaction that also
// stores the highest sequence number applied (applied_seq) and commits it
// without a sync (the environment is MDB_NOSYNC); in a tree of more than
// kDirtyPages leaves, in several, each a checkpoint of its own. It then writes
// the commit's pages back to the disk a slice at a time, resting after each as
// long as it took, so the log's syncs, which answers wait for, share the
// disk with one slice at a time; then it syncs the file and records the
// commit as the synced checkpoint (Env::SyncCheckpoint), and only then
// retires the records from the overlay and lets the log's segments be
// reused behind them. The thread runs ten nice levels below the thread
// that created it, so where the two share a core the answers go first.
//
// It keeps the committer's account of what LMDB lacks: the bytes of records
// logged and not yet applied (Owe), and the map space promised to them
// (Reserve), both given back as their records are applied. A committer
// that must not run further ahead waits for it (WaitUntil), which makes the
// thread apply at once, without gathering or resting.
//
// A failed LMDB commit of logged records calls `fatal` (which must not
// return): acknowledged writes could not be kept.
//
// Thread safety: every method may be called from any thread; `fatal` runs
// on the applier's thread.
class Applier {
 public:
  // The leaves one checkpoint's transaction touches at most, about: LMDB's
  // list of a transaction's dirty pages grows at a cost that rises with
  // its length.
  static constexpr std::size_t kDirtyPages = 32768;
  // What LMDB lacks, as WaitUntil's predicates see it.
  struct Backlog {
    std::size_t queued = 0;           // groups handed over, not applied
    std::size_t unapplied_bytes = 0;  // owed (Owe), not applied
    std::uint64_t applied_seq = 0;    // the highest record in LMDB
  };
  using Fatal = std::function<void(const std::string& what, int rc)>;
  using Ready = std::function<bool(const Backlog&)>;

  // Reads applied_seq from `env`. Throws std::runtime_error when it
  // cannot be read.
  // `skip_sync` breaks the promise on purpose (the test build's negative
  // control): checkpoints are written back and recorded, never synced.
  Applier(Env& env, std::size_t checkpoint_bytes, bool skip_sync, Fatal fatal,
          std::size_t dirty_pages = kDirtyPages);
  ~Applier();  // Finish()
  Applier(const Applier&) = delete;
  Applier& operator=(const Applier&) = delete;

  std::uint64_t applied_seq() const;

  // Writes `records` into LMDB durably on the calling thread, before
  // Start: in one transaction, or in several, in log order, over a large
  // tree (TransactionRecords) or when one cannot hold them (growing the map
  // when needed). Returns 0, an LMDB error code or
  // an errno (ENOSPC: the disk cannot hold them).
  int Apply(std::span<const WalRecord> records) {
    return Checkpoints(records, /*paced=*/false, /*retire=*/false);
  }
  // Starts the thread with `logged`, records published to the overlay and
  // not in LMDB (recovered from the log), owed and reserved.
  void Start(std::vector<WalRecord> logged);

  // Map space promised to records not yet applied.
  std::size_t reserved() const { return reserved_bytes_; }
  void Reserve(std::size_t bytes) { reserved_bytes_ += bytes; }
  void Unreserve(std::size_t bytes) { reserved_bytes_ -= bytes; }
  // Counts `bytes` of logged records as unapplied until they are applied.
  void Owe(std::size_t bytes);
  // Hands over answered records (moved from) to apply.
  void Add(std::vector<WalRecord>& records);
  // Whether `ready` holds now.
  bool Holds(const Ready& ready) const;
  // Waits until `ready` holds, with the thread told to apply at once.
  void WaitUntil(const Ready& ready);
  // Applies everything handed over, then joins the thread. Returns whether
  // it ran (then everything logged is in LMDB). Idempotent.
  bool Finish();

 private:
  // What LMDB lacks now; under mu_.
  Backlog Now() const {
    return {to_apply_.size(), unapplied_bytes_, applied_seq_};
  }
  void Loop();
  // Applies `records` in log order as checkpoints of at most
  // TransactionRecords() records each, resting between the write-back's slices
  // when `paced`; retires each checkpoint's records (Applied) when `retire`.
  int Checkpoints(std::span<const WalRecord> records, bool paced, bool retire);
  // How many records one transaction applies at most: all, unless the
  // tree has more leaves than dirty_pages_; then as many as touch about
  // dirty_pages_ leaves on keys spread over it.
  std::size_t TransactionRecords() const;
  // One checkpoint: one transaction, then Durable. Returns 0,
  // MDB_TXN_FULL (nothing committed) or another error code.
  int Checkpoint(std::span<const WalRecord> records, bool paced);
  // Whether the records owed reach three quarters of the committer's
  // bound (a checkpoint and a half): the write-back then stops resting, so
  // that the committer seldom has to wait at the bound for a whole
  // checkpoint.
  bool Behind() const;
  // Makes LMDB's commit `txnid` durable: writes its pages back a slice
  // at a time (resting after each as long as it took when `paced`, not
  // hurried and not Behind), then Env::SyncCheckpoint. Returns 0 or an
  // error code.
  int Durable(std::uint64_t txnid, bool paced);
  int ApplyRecord(MDB_txn* txn, const WalRecord& r);
  // Retires applied records from the overlay and gives back what they
  // held and reserved.
  void Applied(std::span<const WalRecord> records);

  Env& env_;
  const std::size_t checkpoint_bytes_;
  const std::size_t dirty_pages_;
  const bool skip_sync_;
  const Fatal fatal_;
  // Set while a committer waits (WaitUntil) or at Finish: no resting.
  std::atomic<bool> hurry_ = false;
  std::atomic<std::size_t> reserved_bytes_ = 0;
  mutable std::mutex mu_;
  // Each waiter has its own: a wake-up goes only to the thread it is for.
  std::condition_variable apply_cv_;    // the thread: records, a waiter, done
  std::condition_variable applied_cv_;  // progress, for WaitUntil
  // Guarded by mu_, with the below.
  std::vector<std::vector<WalRecord>> to_apply_;  // groups, in log order
  std::size_t unapplied_bytes_ = 0;
  std::uint64_t applied_seq_ = 0;
  bool done_ = false;
  bool waiting_ = false;
  std::thread thread_;
};

}  // namespace fencepost::fence
