#include "fence/applier.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "fence/big_endian.h"
#include "fence/fence_store.h"
#include "fence/values.h"

namespace fencepost::fence {
namespace {

constexpr std::string_view kAppliedSeqKey = "applied_seq";
// The most records one transaction takes, and how long a batch gathers.
constexpr std::size_t kApplyBatch = 16384;
constexpr std::chrono::milliseconds kApplyInterval{50};
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

Applier::Applier(Env& env, Fatal fatal) : env_(env), fatal_(std::move(fatal)) {
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
  std::size_t bytes = 0;
  for (const WalRecord& r : logged) bytes += MapReservation(r);
  {
    std::lock_guard lock(mu_);
    unapplied_bytes_ = bytes;
    to_apply_ = std::move(logged);
  }
  reserved_bytes_ = bytes;
  thread_ = std::thread([this] { Loop(); });
}

void Applier::Owe(std::size_t bytes) {
  std::lock_guard lock(mu_);
  unapplied_bytes_ += bytes;
}

void Applier::Add(std::vector<WalRecord>& records) {
  std::lock_guard lock(mu_);
  const bool was_empty = to_apply_.empty();
  to_apply_.insert(to_apply_.end(), std::make_move_iterator(records.begin()),
                   std::make_move_iterator(records.end()));
  // The thread waits for a first record, then for a full batch or its
  // interval: wake it only for those.
  if (was_empty || to_apply_.size() >= kApplyBatch) apply_cv_.notify_one();
}

bool Applier::Holds(const Ready& ready) const {
  std::lock_guard lock(mu_);
  return ready(Now());
}

void Applier::WaitUntil(const Ready& ready) {
  std::unique_lock lock(mu_);
  if (ready(Now())) return;
  waiting_ = true;
  apply_cv_.notify_one();  // apply at once
  applied_cv_.wait(lock, [&] { return ready(Now()); });
  waiting_ = false;
}

bool Applier::Finish() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
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
  while (true) {
    {
      std::unique_lock lock(mu_);
      apply_cv_.wait(lock, [this] { return done_ || !to_apply_.empty(); });
      if (to_apply_.empty()) return;
      // LMDB's synced commits share the disk with the log's syncs, which
      // answers wait for: fewer, larger ones leave the disk to the log.
      apply_cv_.wait_for(lock, kApplyInterval, [this] {
        return done_ || waiting_ || to_apply_.size() >= kApplyBatch;
      });
      const std::size_t n = std::min(to_apply_.size(), kApplyBatch);
      batch.assign(std::make_move_iterator(to_apply_.begin()),
                   std::make_move_iterator(to_apply_.begin() + n));
      to_apply_.erase(to_apply_.begin(), to_apply_.begin() + n);
    }
    if (int rc = Apply(batch); rc != 0) {
      fatal_("cannot apply logged writes to LMDB", rc);
    }
    env_.overlay().Retire(batch);
    std::size_t done = 0;
    for (const WalRecord& r : batch) done += MapReservation(r);
    {
      std::lock_guard lock(mu_);
      applied_seq_ = batch.back().seq;
      unapplied_bytes_ -= std::min(unapplied_bytes_, done);
      reserved_bytes_ -= std::min(reserved_bytes_.load(), done);
    }
    applied_cv_.notify_all();
    batch.clear();
  }
}

int Applier::Apply(const std::vector<WalRecord>& records) {
  while (true) {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_.raw(), nullptr, 0, &txn);
    if (rc == MDB_MAP_RESIZED) {
      mdb_env_set_mapsize(env_.raw(), 0);
      continue;
    }
    if (rc != 0) return rc;
    for (const WalRecord& r : records) {
      if ((rc = ApplyRecord(txn, r)) != 0) break;
    }
    if (rc == 0) {
      char seq[8];
      StoreBigEndian(seq, records.back().seq, 8);
      MDB_val key = Val(kAppliedSeqKey), data{8, seq};
      rc = mdb_put(txn, env_.meta(), &key, &data, 0);
    }
    if (rc != 0) {
      mdb_txn_abort(txn);
    } else {
      rc = mdb_txn_commit(txn);  // durable: default flags
    }
    if ((rc == MDB_MAP_FULL || rc == MDB_TXN_FULL) && env_.Grow()) continue;
    return rc;
  }
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
