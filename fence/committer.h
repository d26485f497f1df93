#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "fence/applier.h"
#include "fence/commit_stats.h"
#include "fence/env.h"
#include "fence/fold.h"
#include "fence/lease.h"
#include "fence/lease_limit.h"
#include "fence/log_syncs.h"
#include "fence/rules.h"
#include "fence/token.h"
#include "fence/wal.h"
#include "fence/write.h"

namespace fencepost::fence {

// Commits fence writes in groups through a write-ahead log (Wal): every write
// that arrives while the previous group is being synced joins the next
// group. The committer's thread decides each write of a group in arrival
// order against the fence as the writes before it left it, by the rules of
// fence/rules.h (so they hold exactly as if the writes were committed one by
// one), appends the
// applied ones to the log in one write, syncs it once, publishes them to the
// environment's Overlay, and only then runs their `done`. A rejected write
// logs nothing and affects no other write.
//
// The Applier (fence/applier.h), a thread of its own, writes the answered
// records into LMDB behind the answers. At construction the records LMDB
// lacks are recovered from the log (fence/recovery.h), so a crash at any
// point loses no acknowledged write (docs/durability.md).
//
// Bounds: past `max_queue_writes` waiting writes, Submit fails new ones at
// once with Errc::kOverloaded; past `max_unapplied_bytes` of logged records
// LMDB lacks, the committer waits for the applier (which bounds recovery at
// start). A write whose value could not fit under --max-map-size with
// everything logged before it fails with Errc::kMapFull and changes nothing.
//
// A failed log write or sync, or a failed LMDB commit of logged records,
// may have lost acknowledged data or cannot keep a promise: `on_fatal` is
// called and the process aborts.
//
// The log's syncs overlap without a thread of their own: the driver
// (below) writes a group to the log and submits its data sync through
// io_uring (LogSyncs), then goes on reading and deciding; a group that
// gathers while a sync is in flight is written and synced in turn, at most
// LogSyncs::kSlots syncs in flight, each through its own open files (Linux
// reports a writeback error once per open file). Answers go out in
// decision order, each only after the completion of a sync submitted after
// its records were written, and of every sync submitted before that one.
//
// Driving: with Options::loop set, the committer has no thread on the
// answer path: the event loop that submits a write also decides it, logs
// it, submits its sync and, when the sync's completion wakes the loop,
// answers it. Without it, a thread of the committer's own does the same.
//
// Thread safety: Submit may be called from any thread. `done` callbacks run
// on the driver (the loop's thread, or the committer's own; for
// kOverloaded, on the caller's) and must not block or call back into the
// committer.
class Committer {
 public:
  using Done = WriteDone;
  struct Options {
    std::size_t max_batch_writes = 512;
    std::size_t max_batch_bytes = 32u << 20;
    std::size_t max_queue_writes = 16384;
    // Records logged and not yet applied to LMDB, as HeldBytes counts
    // them; a checkpoint starts at half of it.
    std::size_t max_unapplied_bytes = 128u << 20;
    std::size_t segment_bytes = 16u << 20;  // each of the log's two files
    std::function<void(const std::string&)> on_fatal;
    // Told, on the committer's thread, of each lease of this environment
    // that ran out without a release, once, when the committer notices it
    // (about once a second) before anyone else does.
    std::function<void(const std::string&, const LeaseRecord&)>
        on_lease_expired;
    // The monotonic clock lease expiry is measured on.
    SteadyNow steady_now = SteadyNowNs;
    // --max-leases, shared by the committers of every shard and watching
    // their lease tables (it must outlive the committer); unset: no limit.
    // A grant past it is refused (LeaseOutcome::kTooManyLeases) in the step
    // that decides it.
    LeaseLimit* lease_limit = nullptr;
    // Breaks the durability promise on purpose: a group is answered before
    // its sync rather than after. Only the test build sets it (the
    // syscall-order test's negative control); never in the product.
    bool answer_before_sync = false;
    // Breaks it another way: LMDB's checkpoints are written back but
    // never synced, yet recorded as synced and the log reused behind them.
    // Only the test build sets it (the power-cut test's negative control).
    bool checkpoint_without_sync = false;
    // The event loop that drives the committer; unset, it runs a thread of
    // its own.
    struct Loop {
      // Runs `fn` on the loop's thread soon; callable from any thread.
      std::function<void(std::function<void()>)> post;
      // Calls `ready` on the loop's thread each time `fd` turns readable,
      // for as long as the loop runs.
      std::function<void(int fd, std::function<void()> ready)> watch;
    };
    Loop loop;
  };

  // Opens the log in env's directory and replays what LMDB lacks. Throws
  // std::runtime_error when the log cannot be used or has a gap.
  Committer(Env& env, Options options);
  ~Committer();  // Stop()
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  void Submit(FenceWrite write, Done done);
  // Commits and applies everything queued, then joins the threads. With a
  // loop, call it once the loop no longer runs. Idempotent.
  void Stop();

  // Log syncs (groups) so far.
  std::uint64_t commits() const;
  // Its groups' sizes and waits and its log's syncs so far (CommitStats).
  // Counted on the driver, a lock per group and per sync; a copy.
  CommitStats stats() const;
  // Records LMDB lacked at construction (recovered from the log).
  std::uint64_t replayed() const { return replayed_; }
  // Why the log's syncs run on the driving thread instead of through
  // io_uring (SyncRing); empty when they go through io_uring.
  const std::string& sync_fallback() const;

 private:
  struct Pending {
    FenceWrite write;
    Done done;
  };
  // A decided group, answered once the log is durable up to `durable_at`:
  // its last record, or (no record) the last one written before it.
  struct Group {
    std::vector<Pending> pending;
    std::vector<WriteOutcome> outcomes;
    std::vector<WalRecord> records;
    std::vector<bool> created;
    std::map<std::string, LeaseEntry, std::less<>> leases;
    // Places its grants hold under --max-leases until `leases` are in the
    // table.
    std::size_t reserved_leases = 0;
    std::uint64_t durable_at = 0;
    std::chrono::steady_clock::time_point decided_at;
  };
  // What a group being synced did to fences and values, for the decisions
  // of the groups after it until it is published to the overlay.
  struct Recent {
    std::uint64_t last_seq = 0;
    Fold::State seen;  // without its leases
  };
  // Driving (committer_drive.cc). Each step below runs under drive_mu_.
  // Starts driving: the loop's watches, or the committer's own thread.
  void StartDriving();
  // The committer's own thread, when there is no loop.
  void Run();
  // Lets the driver know the queue has writes.
  void Wake();
  // One turn of the driver: reaps the syncs done, answers what they made
  // durable, commits what is queued while a sync slot is free, and looks
  // for leases that ran out once a second.
  void Pump();
  // Commits the next group from the queue when a sync slot is free;
  // returns whether it did.
  bool CommitNext();
  void CommitGroup(std::vector<Pending>& group);
  // Takes the completed syncs (waiting for one with `wait`), then answers
  // what is durable.
  void Reap(bool wait);
  void SweepLeases();
  void NoticeExpiredLeases();
  // Answers, in decision order, every group the log is durable for.
  void AnswerDurable();
  void Answer(Group& group);
  // Waits until every decided group is answered.
  void Drain();
  // Commits everything queued and waits for its answers (Stop).
  void DrainQueue();
  // The newest entry for `key` in one of Fold::State's maps of the groups
  // being synced (`recent_`), or nullptr.
  template <class Map>
  const typename Map::mapped_type* FindRecent(Map Fold::State::*map,
                                              std::string_view key) const {
    for (auto r = recent_.rbegin(); r != recent_.rend(); ++r) {
      const Map& m = r->seen.*map;
      if (auto it = m.find(key); it != m.end()) return &it->second;
    }
    return nullptr;
  }

  // Deciding (committer_decide.cc): what a group's Fold loads and takes
  // from this shard.
  class Loads;
  // Decides a group's writes in order into `g`, and what they did into
  // `*state`.
  void DecideGroup(std::vector<Pending>& group, Group& g, Fold::State* state);
  // Logs `g`'s records (waiting for the applier when it is behind); returns
  // the segment written, -1 when there was nothing to log.
  int LogGroup(Group& g, Fold::State& seen);
  // Waits until `ready` holds, with the applier told to apply at once
  // instead of gathering a batch; first answers every decided group, since
  // the applier takes records only once they are answered.
  void WaitForApplier(const Applier::Ready& ready);
  [[noreturn]] void Fatal(const std::string& what, int rc);

  Env& env_;
  Options options_;
  std::unique_ptr<Wal> wal_;
  std::uint64_t next_seq_ = 1;
  std::uint64_t replayed_ = 0;
  std::unique_ptr<Applier> applier_;
  std::atomic<std::uint64_t> commits_ = 0;

  mutable std::mutex mu_;
  std::deque<Pending> queue_;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_
  // Apart from mu_, which Submit takes: a scrape never waits for writes.
  mutable std::mutex stats_mu_;
  CommitStats stats_;

  // The driver's state: one driver at a time holds drive_mu_ (the loop's
  // thread, or the committer's own; Stop at the end).
  std::mutex drive_mu_;
  bool stopped_ = false;
  std::atomic<bool> pump_posted_ = false;
  std::unique_ptr<LogSyncs> log_syncs_;
  int timer_fd_ = -1;   // ticks once a second: the lease sweep
  std::thread thread_;  // without a loop
  // Guards the loop's callbacks: they do nothing once the committer is
  // gone.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  std::deque<Group> decided_;      // not yet answered, in order
  std::uint64_t written_seq_ = 0;  // the last record written
  std::uint64_t durable_seq_ = 0;
  std::int64_t next_sweep_ = 0;
  std::atomic<std::uint64_t> published_seq_ = 0;
  // Decided groups with a lease change the lease table lacks yet.
  std::atomic<int> lease_groups_unanswered_ = 0;
  std::deque<Recent> recent_;
};

}  // namespace fencepost::fence
