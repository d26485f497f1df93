#include "fence/applier.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "fence/big_endian.h"
#include "fence/fence_store.h"
#include "fence/values.h"

namespace fencepost::fence {
namespace {

constexpr std::string_view kAppliedSeqKey = "applied_seq";
// How long a checkpoint gathers at most, from its first record.
constexpr std::chrono::seconds kCheckpointInterval{10};
// The write-back's slice, and the time under which a slice wrote nothing
// (no rest after it).
constexpr std::uint64_t kWriteBackSlice = 256u << 10;
constexpr std::chrono::microseconds kNothingWritten{100};
// How many nice levels the thread runs below the one that created it.
constexpr int kApplierNice = 10;

int ReadAppliedSeq(MDB_txn* txn, MDB_dbi meta, std::uint64_t* seq) {
  MDB_val key = Val(kAppliedSeqKey), data;
  const int rc = mdb_get(txn, meta, &key, &data);
  if (rc == MDB_NOTFOUND) {
    *seq = 0;
    return 0;
  }
  if (rc != 0) return rc;
  if (data.mv_size != 8) return MDB_CORRUPTED;
  *seq = LoadBigEndian(static_cast<const char*>(data.mv_data), 8);
  return 0;
}

// What the record of `w` may take.
std::size_t MapReservation(const FencedWrite& w) {
  return fence::MapReservation(
      w.fence.size() +
      (w.value ? w.value->key.size() + w.value->body.size() : 0));
}

// What `records` hold in memory (HeldBytes) and reserve of the map.
std::pair<std::size_t, std::size_t> Owed(std::span<const WalRecord> records) {
  std::size_t held = 0, reserved = 0;
  for (const WalRecord& r : records) {
    held += HeldBytes(r);
    reserved += MapReservation(r);
  }
  return {held, reserved};
}

}  // namespace

std::size_t MapReservation(const FenceWrite& write) {
  if (const auto* w = std::get_if<FencedWrite>(&write)) {
    return MapReservation(*w);
  }
  if (const auto* l = std::get_if<LeaseOp>(&write)) {
    return MapReservation(l->fence.size());
  }
  std::size_t n = 0;
  for (const FencedWrite& w : std::get<Batch>(write).writes) {
    n += MapReservation(w);
  }
  return n;
}

Applier::Applier(Env& env, std::size_t checkpoint_bytes, bool skip_sync,
                 Fatal fatal, std::size_t dirty_pages)
    : env_(env),
      checkpoint_bytes_(checkpoint_bytes),
      dirty_pages_(dirty_pages),
      skip_sync_(skip_sync),
      fatal_(std::move(fatal)) {
  Env::ReadTxn txn(env_);
  if (txn.get() == nullptr ||
      ReadAppliedSeq(txn.get(), env_.meta(), &applied_seq_) != 0) {
    throw std::runtime_error("cannot read the applied log position in " +
                             env_.dir());
  }
}

Applier::~Applier() { Finish(); }

std::uint64_t Applier::applied_seq() const {
  std::lock_guard lock(mu_);
  return applied_seq_;
}

void Applier::Start(std::vector<WalRecord> logged) {
  const auto [held, reserved] = Owed(logged);
  {
    std::lock_guard lock(mu_);
    unapplied_bytes_ = held;
    to_apply_.clear();
    if (!logged.empty()) to_apply_.push_back(std::move(logged));
  }
  reserved_bytes_ = reserved;
  thread_ = std::thread([this] { Loop(); });
}

void Applier::Owe(std::size_t bytes) {
  std::lock_guard lock(mu_);
  unapplied_bytes_ += bytes;
}

void Applier::Add(std::vector<WalRecord>& records) {
  std::lock_guard lock(mu_);
  const bool was_empty = to_apply_.empty();
  // The group's vector itself: O(1) here on the answer path, however many
  // records a checkpoint gathers (the applier's thread joins them).
  to_apply_.push_back(std::move(records));
  records.clear();
  // The thread waits for a first record, then for a full checkpoint or its
  // interval: wake it only for those.
  if (was_empty || unapplied_bytes_ >= checkpoint_bytes_) {
    apply_cv_.notify_one();
  }
}

bool Applier::Behind() const {
  std::lock_guard lock(mu_);
  return unapplied_bytes_ >= checkpoint_bytes_ + checkpoint_bytes_ / 2;
}

bool Applier::Holds(const Ready& ready) const {
  std::lock_guard lock(mu_);
  return ready(Now());
}

void Applier::WaitUntil(const Ready& ready) {
  std::unique_lock lock(mu_);
  if (ready(Now())) return;
  waiting_ = true;
  hurry_ = true;
  apply_cv_.notify_one();  // apply at once
  applied_cv_.wait(lock, [&] { return ready(Now()); });
  waiting_ = false;
  hurry_ = done_;
}

bool Applier::Finish() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
    hurry_ = true;
  }
  apply_cv_.notify_all();
  if (!thread_.joinable()) return false;
  thread_.join();
  return true;
}

void Applier::Loop() {
  // Named for top -H, perf and /proc/PID/task/*/comm (15 bytes at most).
  pthread_setname_np(pthread_self(), "fp-applier");
  // The answer path goes first where the two share a core: the applier's
  // batches would otherwise hold the io thread off the core for a
  // scheduler slice. Ten nice levels below it, the applier still gets
  // about a tenth of a busy core (it needs less), and a writer that
  // outruns it waits (max_unapplied). Relative to the thread's own nice,
  // so an operator's Nice= moves both. Lowering one's own priority needs
  // no privilege; a refusal changes nothing else.
  const auto self = static_cast<id_t>(::gettid());
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, self);
  if (errno == 0) {
    ::setpriority(PRIO_PROCESS, self, std::min(19, nice + kApplierNice));
  }
  std::vector<WalRecord> batch;
  std::vector<std::vector<WalRecord>> groups;
  while (true) {
    {
      std::unique_lock lock(mu_);
      apply_cv_.wait(lock, [this] { return done_ || !to_apply_.empty(); });
      if (to_apply_.empty()) return;
      apply_cv_.wait_for(lock, kCheckpointInterval, [this] {
        return done_ || waiting_ || unapplied_bytes_ >= checkpoint_bytes_;
      });
      groups.swap(to_apply_);
    }
    std::size_t count = 0;
    for (const auto& g : groups) count += g.size();
    batch.reserve(count);
    for (auto& g : groups) {
      batch.insert(batch.end(), std::make_move_iterator(g.begin()),
                   std::make_move_iterator(g.end()));
    }
    groups.clear();
    if (int rc = Checkpoints(batch, /*paced=*/true, /*retire=*/true); rc != 0) {
      fatal_("cannot apply logged writes to LMDB", rc);
    }
    batch.clear();
  }
}

void Applier::Applied(std::span<const WalRecord> records) {
  // In parts, so readers and the committer's publishing wait for one part
  // at a time, not for a whole slice.
  constexpr std::size_t kRetirePart = 4096;
  for (std::size_t at = 0; at < records.size(); at += kRetirePart) {
    env_.overlay().Retire(
        records.subspan(at, std::min(kRetirePart, records.size() - at)));
  }
  const auto [held, reserved] = Owed(records);
  {
    std::lock_guard lock(mu_);
    applied_seq_ = records.back().seq;
    unapplied_bytes_ -= std::min(unapplied_bytes_, held);
    reserved_bytes_ -= std::min(reserved_bytes_.load(), reserved);
  }
  applied_cv_.notify_all();
}

std::size_t Applier::TransactionRecords() const {
  Env::ReadTxn txn(env_);
  MDB_stat values, fences;
  if (txn.get() == nullptr ||
      mdb_stat(txn.get(), env_.values(), &values) != 0 ||
      mdb_stat(txn.get(), env_.fences(), &fences) != 0) {
    return SIZE_MAX;  // the transaction will say what is wrong
  }
  const double leaves =
      static_cast<double>(values.ms_leaf_pages + fences.ms_leaf_pages);
  const double dirty = static_cast<double>(dirty_pages_);
  if (leaves <= dirty) return SIZE_MAX;
  // n records on keys spread over the tree touch about
  // leaves * (1 - e^(-n / leaves)) of its leaves.
  return std::max<std::size_t>(
      1, static_cast<std::size_t>(-leaves * std::log1p(-dirty / leaves)));
}

int Applier::Checkpoints(std::span<const WalRecord> records, bool paced,
                         bool retire) {
  std::size_t most = TransactionRecords();
  while (!records.empty()) {
    const std::size_t n = std::min(records.size(), most);
    const int rc = Checkpoint(records.first(n), paced);
    if (rc == MDB_TXN_FULL && n > 1) {
      // More pages than one transaction may dirty: half as many records.
      most = n / 2;
      continue;
    }
    if (rc != 0) return rc;
    // Each checkpoint retires its own records, so a committer waiting for
    // room waits for one checkpoint, not for all the gathered ones.
    if (retire) Applied(records.first(n));
    records = records.subspan(n);
  }
  return 0;
}

int Applier::Checkpoint(std::span<const WalRecord> records, bool paced) {
  while (true) {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_.raw(), nullptr, 0, &txn);
    if (rc == MDB_MAP_RESIZED) {
      mdb_env_set_mapsize(env_.raw(), 0);
      continue;
    }
    if (rc != 0) return rc;
    const std::uint64_t txnid = mdb_txn_id(txn);
    for (const WalRecord& r : records) {
      if ((rc = ApplyRecord(txn, r)) != 0) break;
    }
    if (rc == 0) {
      char seq[8];
      StoreBigEndian(seq, records.back().seq, 8);
      MDB_val key = Val(kAppliedSeqKey), data{8, seq};
      rc = mdb_put(txn, env_.meta(), &key, &data, 0);
    }
    if (rc == 0) rc = env_.BeginCheckpoint(txnid);
    if (rc != 0) {
      mdb_txn_abort(txn);
    } else if ((rc = mdb_txn_commit(txn)) == 0) {
      // In the page cache only (MDB_NOSYNC): durable from here on.
      return Durable(txnid, paced);
    }
    if (rc == MDB_MAP_FULL && env_.Grow()) continue;
    return rc;
  }
}

int Applier::Durable(std::uint64_t txnid, bool paced) {
  const int fd = env_.fd();
  const std::uint64_t end = env_.used_bytes();
  for (std::uint64_t at = 0; paced && at < end; at += kWriteBackSlice) {
    const auto began = std::chrono::steady_clock::now();
    if (::sync_file_range(fd, static_cast<off64_t>(at), kWriteBackSlice,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                              SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
      // A writeback error is reported once per open file: the sync below
      // would not see it again, so the checkpoint fails here.
      return errno;
    }
    const auto took = std::chrono::steady_clock::now() - began;
    if (took > kNothingWritten && !hurry_ && !Behind()) {
      std::this_thread::sleep_for(took);
    }
  }
  return env_.SyncCheckpoint(txnid, /*sync=*/!skip_sync_);
}

int Applier::ApplyRecord(MDB_txn* txn, const WalRecord& r) {
  // A put of a key that is its own fence keeps the fence in its value
  // record (KeptFence): once the fence has a record in the fences database,
  // the write changes one record instead of two.
  const bool keeps_fence =
      r.op == WalRecord::Op::kPut && r.fence_token && r.key == r.fence;
  int rc = 0;
  if (r.fence_token) {
    Slot slot;
    std::optional<FenceRecord> stored;
    rc = ReadFence(txn, env_.fences(), r.fence, &slot, &stored);
    if (rc == 0 && !(keeps_fence && stored)) {
      rc = WriteFence(txn, env_.fences(), slot, r.fence, *r.fence_token,
                      r.updated_at_ns);
    }
  }
  if (rc != 0 || r.op == WalRecord::Op::kNone) return rc;
  if (r.op == WalRecord::Op::kLease) {
    return PutValue(txn, env_.leases(), r.key, r.body, std::nullopt);
  }
  // The record replaced may keep the fence named after the key: another
  // put keeps it on, a delete gives it to the fences database.
  std::optional<KeptFence> kept;
  if (keeps_fence) {
    kept = KeptFence{*r.fence_token, r.updated_at_ns};
  } else {
    StoredValue old;
    if ((rc = ReadValue(txn, env_.values(), r.key, &old)) != 0) return rc;
    kept = old.fence;
  }
  if (r.op == WalRecord::Op::kPut) {
    return PutValue(txn, env_.values(), r.key, r.body, r.value_token, r.seq,
                    r.content_type, kept);
  }
  if (kept) {
    Slot slot;
    std::optional<FenceRecord> stored;
    rc = ReadFence(txn, env_.fences(), r.key, &slot, &stored);
    if (rc == 0 && (!stored || KeptIsAhead(*kept, *stored))) {
      rc = WriteFence(txn, env_.fences(), slot, r.key, kept->token,
                      kept->updated_at_ns);
    }
    if (rc != 0) return rc;
  }
  return DeleteValue(txn, env_.values(), r.key);
}

}  // namespace fencepost::fence
