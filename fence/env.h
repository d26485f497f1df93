#pragma once

#include <lmdb.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>

#include "fence/checkpoint_file.h"
#include "fence/lease_table.h"
#include "fence/overlay.h"

namespace fencepost::fence {

// One LMDB environment of a data directory (see Shards): the fences
// database, the values database of the embedded backend, the leases whose
// fences live here, and the overlay of writes its committer has logged but
// not yet applied.
//
// Durability: LMDB does not sync the applier's commits (MDB_NOSYNC; the
// constructor's own commit is synced). The applier makes each durable
// itself (fence/applier.h: its pages written back at its own pace, then
// SyncCheckpoint) before anything relies on it, and the CheckpointFile
// rolls back, at the next open, a commit that was not (see
// fence/checkpoint_file.h). MDB_WRITEMAP is not used: a map LMDB writes
// through would turn a full disk into SIGBUS.
//
// The map starts at min(initial_map_size, max_map_size) and grows by
// doubling, up to max_map_size, when a write transaction reports
// MDB_MAP_FULL (see Grow).
// Because growing remaps the file, readers hold a ReadTxn, which takes a
// shared lock that Grow takes exclusively.
//
// Thread safety: ReadTxn may be begun on any thread; each one belongs to the
// thread that began it. Write transactions and Grow belong to the one writer
// thread (see Committer).
class Env {
 public:
  // The data format this release writes: 2 has entity tags and
  // Content-Types in its value records and log (fence/values.h, wal.h); 3
  // lets a value record keep the fence named after its key (KeptFence).
  // Formats 1 (none recorded) and 2 are upgraded in place at open: their
  // records stay as they are, readable, and the format is recorded. A newer
  // format is refused.
  static constexpr std::uint64_t kFormat = 3;

  struct Options {
    std::string dir;
    std::uint64_t max_map_size = 64ull << 30;
    // Where the map starts (capped at max_map_size); a multiple of the page
    // size. Tests set it small to make the map grow.
    std::uint64_t initial_map_size = 1ull << 30;
  };

  // Opens (creating if needed) the environment in options.dir. Throws
  // std::runtime_error with a readable message when the directory or the
  // environment cannot be used; this happens only at start-up.
  explicit Env(const Options& options);
  ~Env();
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  MDB_env* raw() const { return env_; }
  MDB_dbi fences() const { return fences_; }
  MDB_dbi values() const { return values_; }
  // Bookkeeping: the highest log sequence number applied (see Committer).
  MDB_dbi meta() const { return meta_; }
  // Leases whose fence lives here (see LeaseTable), and their records.
  MDB_dbi leases() const { return leases_; }
  LeaseTable& lease_table() const { return lease_table_; }
  const std::string& dir() const { return dir_; }
  // Writes logged but not yet applied to these databases.
  Overlay& overlay() const { return overlay_; }
  std::uint64_t map_size() const { return map_size_.load(); }
  std::uint64_t max_map_size() const { return max_map_size_; }
  // Bytes of the map in use: (last page number + 1) × page size. It reads
  // the map's meta pages, so it holds off Grow as a ReadTxn does; a thread
  // that already holds a ReadTxn calls used_bytes_in_txn instead (a shared
  // lock is not taken twice).
  std::uint64_t used_bytes() const;
  std::uint64_t used_bytes_in_txn() const;
  // The flags the environment was opened with (mdb_env_get_flags).
  unsigned flags() const;
  // The meta page's transaction id this open rolled back (0: none).
  std::uint64_t rolled_back() const { return rolled_back_; }
  // The data file's descriptor, for writing a commit's pages back.
  int fd() const;
  // Makes every commit so far durable (fdatasync of the data file), then
  // records the last one (`txnid`) as synced in DIR/checkpoint. Returns 0
  // or an LMDB error code or errno. The applier's thread calls it.
  // `sync` false skips the sync and records it all the same: the test
  // build's broken promise, never the product's.
  int SyncCheckpoint(std::uint64_t txnid, bool sync = true);
  // Records, durably, that commit `txnid` is about to be made without a
  // sync: the next open rolls it back unless SyncCheckpoint followed.
  int BeginCheckpoint(std::uint64_t txnid) { return checkpoint_->Begin(txnid); }
  // The data format found at open: kFormat, or the older one this open
  // upgraded.
  std::uint64_t format_found() const { return format_found_; }

  // Doubles the map size, capped at max_map_size. Returns false when it is
  // already at the cap or LMDB refused. Only the writer thread calls this,
  // with no write transaction open; it waits for readers to finish.
  bool Grow();

  // What LMDB error (or errno) `rc` means, for an operator: a full disk is
  // named as such, with what to do, whatever errno LMDB turned it into.
  std::string Explain(int rc) const;
  // Whether the file system of dir() has `bytes` free for unprivileged
  // writers beyond the margin under which it counts as full.
  bool DiskHolds(std::uint64_t bytes) const;

  // A read-only transaction. Keep it short: it holds off Grow.
  class ReadTxn {
   public:
    explicit ReadTxn(const Env& env);
    ~ReadTxn();
    ReadTxn(const ReadTxn&) = delete;
    ReadTxn& operator=(const ReadTxn&) = delete;
    // nullptr when LMDB could not begin the transaction; see error().
    MDB_txn* get() const { return txn_; }
    int error() const { return rc_; }

   private:
    std::shared_lock<std::shared_mutex> lock_;
    MDB_txn* txn_ = nullptr;
    int rc_ = 0;
  };

 private:
  MDB_env* env_ = nullptr;
  MDB_dbi fences_ = 0;
  MDB_dbi values_ = 0;
  MDB_dbi meta_ = 0;
  MDB_dbi leases_ = 0;
  mutable LeaseTable lease_table_;
  std::string dir_;
  mutable Overlay overlay_;
  std::atomic<std::uint64_t> map_size_ = 0;
  std::uint64_t max_map_size_ = 0;
  std::uint64_t format_found_ = kFormat;
  std::uint64_t rolled_back_ = 0;
  std::unique_ptr<CheckpointFile> checkpoint_;
  mutable std::shared_mutex resize_mutex_;
};

}  // namespace fencepost::fence
