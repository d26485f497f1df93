#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fence/sync_ring.h"
#include "fence/wal.h"

namespace fencepost::fence {

// The write-ahead log's data syncs in flight, for a committer's driver: a
// sync of the segments written since the last one began is submitted
// through io_uring (SyncRing) and completes on the kernel's workers, at most
// kSlots at a time, each through its own open files (Linux reports a
// writeback error once per open file). The log is durable up to a sync's
// target once it and every sync submitted before it completed.
//
// A sync that cannot be queued, submitted or waited for, or that fails,
// calls `fatal` (which must not return): the outcome of its writes is
// unknown.
//
// Thread safety: none; the driver's thread only (event_fd may be polled
// from anywhere).
class LogSyncs {
 public:
  // Syncs in flight at most: one group's sync overlaps the next one's.
  static constexpr int kSlots = 2;
  using Fatal = std::function<void(const std::string& what, int rc)>;

  LogSyncs(Wal& wal, Fatal fatal);
  LogSyncs(const LogSyncs&) = delete;
  LogSyncs& operator=(const LogSyncs&) = delete;

  // Readable when a sync completed.
  int event_fd() const { return ring_->event_fd(); }
  // Why syncs run on the calling thread instead of through io_uring;
  // empty when they go through io_uring.
  const std::string& fallback() const { return ring_->fallback(); }
  bool slot_free() const { return FreeSlot() >= 0; }
  bool in_flight() const { return !syncs_.empty(); }

  // Notes that a group was written into `segment`.
  void Written(int segment) { unsynced_segments_ |= 1u << segment; }
  // Submits a sync of the segments written since the last one began; the
  // log is durable up to `target` once it completes. Needs a free slot.
  void Start(std::uint64_t target);
  // Takes the completed syncs (waiting for one with `wait`), telling
  // `synced` how long each took (seconds). Returns the highest target the
  // log is now durable up to, or 0 when no sync finished.
  std::uint64_t Reap(bool wait, const std::function<void(double)>& synced);

 private:
  // A submitted sync: when it and every sync submitted before it are done,
  // the log is durable up to `target`.
  struct Ticket {
    std::uint64_t id = 0;  // its completions' tag
    std::uint64_t target = 0;
    int slot = 0;
    int pending = 0;  // completions not yet reaped; none: done
    std::chrono::steady_clock::time_point submitted_at;
  };
  int FreeSlot() const;

  const Fatal fatal_;
  std::unique_ptr<SyncRing> ring_;
  std::vector<std::unique_ptr<Wal::SyncFiles>> slot_files_;  // one each
  bool slot_busy_[kSlots] = {};
  unsigned unsynced_segments_ = 0;  // bit i: segment i written since
  std::deque<Ticket> syncs_;        // submitted, in order
  std::uint64_t next_ticket_ = 0;
};

}  // namespace fencepost::fence
