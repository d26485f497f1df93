#include "fence/committer.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>

#include "fence/big_endian.h"
#include "fence/errc.h"
#include "fence/fence_store.h"
#include "fence/values.h"

namespace fencepost::fence {
namespace {

constexpr std::string_view kAppliedSeqKey = "applied_seq";
// The most records one applier transaction takes, and how long it lets a
// batch gather.
constexpr std::size_t kApplyBatch = 16384;
constexpr std::chrono::milliseconds kApplyInterval{50};
// How many nice levels the applier thread runs below the io thread
// (ApplyLoop).
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

// Below this much free space the file system of a data directory counts as
// full: LMDB's short write there reports EIO, not ENOSPC.
constexpr std::uint64_t kFullBelowBytes = 4u << 20;

// Free bytes for unprivileged writers on the file system of `dir`, or the
// largest value when that cannot be told.
std::uint64_t FreeBytes(const std::string& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

// What failed, for an operator: a full disk is named as such, with what to
// do, whatever errno LMDB turned it into.
std::string Explain(const std::string& dir, int rc) {
  const std::uint64_t free = FreeBytes(dir);
  if ((rc == EIO || rc == ENOSPC) && free < kFullBelowBytes) {
    return std::string("no space left on device (ENOSPC") +
           (rc == EIO ? ", reported as EIO by a short write" : "") +
           "): the file system of " + dir + " has " + std::to_string(free) +
           " bytes free; the acknowledged writes are kept in its write-ahead "
           "log: free space there, then start fencepost again";
  }
  return mdb_strerror(rc);
}

}  // namespace

Committer::Committer(Env& env, Options options)
    : env_(env), options_(std::move(options)) {
  {
    Env::ReadTxn txn(env_);
    if (txn.get() == nullptr ||
        ReadAppliedSeq(txn.get(), env_.meta(), &applied_seq_) != 0) {
      throw std::runtime_error("cannot read the applied log position in " +
                               env_.dir());
    }
  }
  wal_ = std::make_unique<Wal>(
      Wal::Options{env_.dir(), options_.segment_bytes, applied_seq_});
  Replay();
  LoadLeases();
  written_seq_ = durable_seq_ = next_seq_ - 1;
  published_seq_ = next_seq_ - 1;
  for (int i = 0; i < kSyncSlots; ++i) {
    slot_files_.push_back(std::make_unique<Wal::SyncFiles>(*wal_));
  }
  ring_ = std::make_unique<SyncRing>(8);
  applier_ = std::thread([this] { ApplyLoop(); });
  StartDriving();
}

Committer::~Committer() { Stop(); }

// The records LMDB lacks: those in the segment the writer overwrites first
// applied now, the others published to the overlay and handed to the
// applier.
void Committer::Replay() {
  std::vector<WalRecord> missing;
  for (const WalRecord& r : wal_->recovered()) {
    if (r.seq <= applied_seq_) continue;
    const std::uint64_t expected =
        missing.empty() ? applied_seq_ + 1 : missing.back().seq + 1;
    if (r.seq != expected) {
      throw std::runtime_error(
          "the write-ahead log in " + env_.dir() + " has a gap: record " +
          std::to_string(expected) + " is missing; refusing to start");
    }
    missing.push_back(r);
  }
  // The writer starts over the segment written less recently: its records
  // go into LMDB now. That segment is usually applied already, since the
  // writer leaves a segment only for one whose records are all in LMDB;
  // only a crash soon after such a switch leaves some here.
  // So are all of them when they might not fit the map, or the disk: then
  // the start fails here, as it should, not the applier once the ports are
  // open.
  std::size_t bytes = 0;
  for (const WalRecord& r : missing) bytes += Reservation(r);
  const bool fits = env_.used_bytes() + bytes <= env_.max_map_size() &&
                    FreeBytes(env_.dir()) >= 2 * bytes + kFullBelowBytes;
  const auto later =
      !fits ? missing.end()
            : std::find_if(missing.begin(), missing.end(),
                           [this](const WalRecord& r) {
                             return r.seq > wal_->first_overwritten_seq();
                           });
  const std::size_t now = static_cast<std::size_t>(later - missing.begin());
  for (std::size_t at = 0; at < now; at += kApplyBatch) {
    const std::vector<WalRecord> chunk(
        missing.begin() + at,
        missing.begin() + std::min(now, at + kApplyBatch));
    if (int rc = Apply(chunk); rc != 0) {
      throw std::runtime_error("cannot replay the write-ahead log into " +
                               env_.dir() + ": " + Explain(env_.dir(), rc));
    }
  }
  replayed_ = missing.size();
  missing.erase(missing.begin(), later);
  // The others, in the segment written last, are durable in the log (Wal
  // syncs its segments at open): they are served from the overlay at once,
  // as logged writes always are, and the applier writes them into LMDB in
  // the background, so a restart does not wait for LMDB's flush of their
  // scattered pages. The writer leaves the segment it starts on only once
  // the applier is past them (Wal::CanAppend), so a second crash finds them
  // in the log again.
  std::vector<bool> created(missing.size(), false);
  {
    Env::ReadTxn txn(env_);
    if (txn.get() == nullptr) {
      throw std::runtime_error("cannot read the fences in " + env_.dir() +
                               ": " + mdb_strerror(txn.error()));
    }
    std::set<std::string_view> seen;
    for (std::size_t i = 0; i < missing.size(); ++i) {
      if (!missing[i].fence_token || !seen.insert(missing[i].fence).second) {
        continue;
      }
      Slot slot;
      std::optional<FenceRecord> fence;
      if (int rc = ReadFence(txn.get(), env_.fences(), missing[i].fence, &slot,
                             &fence);
          rc != 0) {
        throw std::runtime_error("cannot read the fences in " + env_.dir() +
                                 ": " + mdb_strerror(rc));
      }
      created[i] = !fence.has_value();
    }
  }
  env_.overlay().Publish(missing, created);
  bytes = 0;
  for (const WalRecord& r : missing) bytes += Reservation(r);
  unapplied_bytes_ = bytes;
  reserved_bytes_ = bytes;
  next_seq_ = std::max(applied_seq_, wal_->last_seq()) + 1;
  to_apply_ = std::move(missing);
}

void Committer::LoadLeases() {
  const std::int64_t now = options_.steady_now();
  const std::int64_t wall_now = WallNowNs();
  bool corrupt = false;
  auto load = [&](std::string_view name, std::string_view body) {
    LeaseEntry entry;
    if (!DecodeLease(body, &entry.record)) {
      corrupt = true;
      return;
    }
    const std::int64_t ttl_ns =
        static_cast<std::int64_t>(entry.record.ttl_ms) * 1000000;
    if (entry.record.released) {
      // Free.
    } else if (entry.record.renewed_at_ns + ttl_ns <= wall_now) {
      // It ran out before the restart by the wall clock: not live. A
      // wrong wall clock can only free it early (safe: its token is
      // fenced by the next grant) or keep it one TTL longer.
      entry.expiry_noticed = true;
    } else {
      entry.deadline_ns = now + ttl_ns;  // renewed at start
    }
    env_.lease_table().Set(std::string(name), std::move(entry));
  };
  Env::ReadTxn txn(env_);
  int rc = txn.get() == nullptr ? txn.error() : 0;
  if (rc == 0) {
    rc = ForEachValue(txn.get(), env_.leases(),
                      [&](std::string_view name, const StoredValue& value) {
                        load(name, value.body);
                      });
  }
  // Then the logged lease records LMDB lacks yet, newest last (Replay).
  for (const WalRecord& r : to_apply_) {
    if (rc == 0 && r.op == WalRecord::Op::kLease) load(r.key, r.body);
  }
  if (rc != 0 || corrupt) {
    throw std::runtime_error("cannot read the leases in " + env_.dir() +
                             (corrupt ? ": a record is corrupt"
                                      : std::string(": ") + mdb_strerror(rc)));
  }
}

void Committer::Submit(FenceWrite write, Done done) {
  enum { kQueued, kFirst, kOverloaded } result = kOverloaded;
  {
    std::lock_guard lock(mu_);
    if (queue_.size() < options_.max_queue_writes || stopping_) {
      queue_.push_back({std::move(write), std::move(done)});
      // The driver takes the whole queue when it runs: only the first
      // write of a busy moment needs to wake it.
      result = queue_.size() == 1 ? kFirst : kQueued;
    }
  }
  if (result == kFirst) Wake();
  if (result != kOverloaded) return;
  WriteOutcome overloaded;
  overloaded.error = Errc::kOverloaded;
  done(std::move(overloaded));
}

template <class Ready>
void Committer::WaitForApplier(Ready ready) {
  {
    std::lock_guard lock(mu_);
    if (ready()) return;
  }
  Drain();
  std::unique_lock lock(mu_);
  if (ready()) return;
  committer_waiting_ = true;
  apply_cv_.notify_one();  // the applier applies at once
  applied_cv_.wait(lock, ready);
  committer_waiting_ = false;
}

void Committer::CommitGroup(std::vector<Pending>& group) {
  // Records published to the overlay are found there from now on.
  while (!recent_.empty() && recent_.front().last_seq <= published_seq_) {
    recent_.pop_front();
  }
  // Near --max-map-size the reservations of unapplied records would refuse
  // writes that fit: let the applier drain first, so a 507 is decided on
  // the map as it is (and stays 507 while nothing frees space).
  std::size_t need = 0;
  for (const Pending& p : group) need += Reservation(p.write);
  if (env_.used_bytes() + reserved_bytes_ + need > env_.max_map_size()) {
    WaitForApplier(
        [this] { return to_apply_.empty() && unapplied_bytes_ == 0; });
  }
  Group g;
  Fold::State seen;
  DecideGroup(group, g, &seen);
  g.decided_at = std::chrono::steady_clock::now();
  const int segment = LogGroup(g, seen);
  g.leases = std::move(seen.leases);
  if (!g.leases.empty()) ++lease_groups_unanswered_;
  g.durable_at = next_seq_ - 1;
  g.pending = std::move(group);
  group.clear();
  decided_.push_back(std::move(g));
  if (segment < 0) {
    AnswerDurable();  // nothing to sync: it may be answerable now
    return;
  }
  written_seq_ = next_seq_ - 1;
  unsynced_segments_ |= 1u << segment;
  if (options_.answer_before_sync) {
    durable_seq_ = written_seq_;  // the broken promise, on purpose
    AnswerDurable();
  }
  StartSync();
}

int Committer::LogGroup(Group& g, Fold::State& seen) {
  if (g.records.empty()) return -1;
  std::string bytes;
  std::size_t unapplied = 0;
  for (const WalRecord& r : g.records) {
    EncodeRecord(r, &bytes);
    unapplied += Reservation(r);
  }
  // Recovery reads each segment's run from its start: a record left
  // undurable in the segment the writer leaves, with later ones durable
  // in the next, would read as a gap. Leave only a durable segment.
  if (wal_->Switches(bytes.size())) Drain();
  // Bounded replay at start, and segments free to reuse: wait for the
  // applier when it is too far behind. Groups still being synced count
  // as unapplied from here on.
  WaitForApplier([&] {
    return (unapplied_bytes_ == 0 ||
            unapplied_bytes_ + unapplied <= options_.max_unapplied_bytes) &&
           wal_->CanAppend(bytes.size(), applied_seq_);
  });
  {
    std::lock_guard lock(mu_);
    unapplied_bytes_ += unapplied;
  }
  int segment = -1;
  if (int e = wal_->Write(bytes, g.records.back().seq, &segment); e != 0) {
    Fatal(
        "the write-ahead log write failed; the outcome of its writes is "
        "unknown",
        e);
  }
  next_seq_ = g.records.back().seq + 1;
  recent_.push_back({g.records.back().seq,
                     {std::move(seen.fences), std::move(seen.values), {}}});
  return segment;
}

void Committer::AnswerDurable() {
  while (!decided_.empty() && decided_.front().durable_at <= durable_seq_) {
    Group g = std::move(decided_.front());
    decided_.pop_front();
    const std::chrono::duration<double> waited =
        std::chrono::steady_clock::now() - g.decided_at;
    {
      std::lock_guard lock(stats_mu_);
      stats_.group_writes.Observe(static_cast<double>(g.pending.size()));
      stats_.group_wait_seconds.Observe(waited.count());
    }
    Answer(g);
  }
}

void Committer::Answer(Group& g) {
  if (!g.records.empty()) {
    env_.overlay().Publish(g.records, g.created);
    for (auto& [name, entry] : g.leases) {
      env_.lease_table().Set(name, std::move(entry));
    }
    // The table counts the group's grants now (LeaseLimit).
    if (g.reserved_leases > 0) {
      options_.lease_limit->Unreserve(g.reserved_leases);
    }
    if (!g.leases.empty()) --lease_groups_unanswered_;
    published_seq_ = g.records.back().seq;
    {
      std::lock_guard lock(mu_);
      ++commits_;
      const bool was_empty = to_apply_.empty();
      to_apply_.insert(to_apply_.end(),
                       std::make_move_iterator(g.records.begin()),
                       std::make_move_iterator(g.records.end()));
      // The applier waits for a first record, then for a full batch or its
      // interval: wake it only for those.
      if (was_empty || to_apply_.size() >= kApplyBatch) {
        apply_cv_.notify_one();
      }
    }
  }
  for (std::size_t i = 0; i < g.pending.size(); ++i) {
    g.pending[i].done(std::move(g.outcomes[i]));
  }
}

void Committer::ApplyLoop() {
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
      apply_cv_.wait(lock,
                     [this] { return committer_done_ || !to_apply_.empty(); });
      if (to_apply_.empty()) return;
      // LMDB's synced commits share the disk with the log's syncs, which
      // answers wait for: fewer, larger ones leave the disk to the log.
      apply_cv_.wait_for(lock, kApplyInterval, [this] {
        return committer_done_ || committer_waiting_ ||
               to_apply_.size() >= kApplyBatch;
      });
      const std::size_t n = std::min(to_apply_.size(), kApplyBatch);
      batch.assign(std::make_move_iterator(to_apply_.begin()),
                   std::make_move_iterator(to_apply_.begin() + n));
      to_apply_.erase(to_apply_.begin(), to_apply_.begin() + n);
    }
    if (int rc = Apply(batch); rc != 0) {
      Fatal("cannot apply logged writes to LMDB", rc);
    }
    env_.overlay().Retire(batch);
    std::size_t done = 0;
    for (const WalRecord& r : batch) done += Reservation(r);
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

int Committer::Apply(const std::vector<WalRecord>& records) {
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

int Committer::ApplyRecord(MDB_txn* txn, const WalRecord& r) {
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

void Committer::Fatal(const std::string& what, int rc) {
  // mdb_strerror also names plain errno values.
  const std::string message = what + ": " + Explain(env_.dir(), rc);
  if (options_.on_fatal) options_.on_fatal(message);
  std::abort();
}

}  // namespace fencepost::fence
