#include "fence/committer.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

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
// Sync threads: with two, one group's sync overlaps the next one's.
constexpr int kSyncers = 2;

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Map space a write of `bytes` (fence, key and body) may take once applied:
// its bytes twice (a page split can copy them) plus a page of overhead.
std::size_t Reservation(std::size_t bytes) { return 2 * bytes + 4096; }
std::size_t Reservation(const WalRecord& r) {
  return Reservation(r.fence.size() + r.key.size() + r.body.size());
}
std::size_t Reservation(const FenceWrite& w) {
  std::size_t n =
      Reservation(w.fence.size() +
                  (w.value ? w.value->key.size() + w.value->body.size() : 0));
  for (const FenceWrite& op : w.batch) n += Reservation(op);
  return n;
}

// The value bytes a write (or a batch's writes) carries.
std::size_t PayloadBytes(const FenceWrite& w) {
  std::size_t n = w.value ? w.value->key.size() + w.value->body.size() : 0;
  for (const FenceWrite& op : w.batch) n += PayloadBytes(op);
  return n;
}

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
           "): the file system of " + dir +
           " has " + std::to_string(free) +
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
  written_seq_ = sync_target_ = durable_seq_ = next_seq_ - 1;
  published_seq_ = next_seq_ - 1;
  applier_ = std::thread([this] { ApplyLoop(); });
  for (int i = 0; i < kSyncers; ++i) {
    sync_files_.push_back(std::make_unique<Wal::SyncFiles>(*wal_));
  }
  committer_files_ = std::make_unique<Wal::SyncFiles>(*wal_);
  for (const auto& files : sync_files_) {
    syncers_.emplace_back([this, &files = *files] { SyncLoop(files); });
  }
  thread_ = std::thread([this] { Run(); });
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
  const std::int64_t wall_now = NowNs();
  bool corrupt = false;
  auto load = [&](std::string_view name, std::string_view body) {
    LeaseTable::Entry entry;
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
  {
    std::lock_guard lock(mu_);
    if (queue_.size() < options_.max_queue_writes || stopping_) {
      queue_.push_back({std::move(write), std::move(done)});
      // The committer waits only on an empty queue: later writes of a
      // busy moment need no wake-up (no futex call each).
      if (queue_.size() == 1) cv_.notify_one();
      return;
    }
  }
  WriteOutcome overloaded;
  overloaded.error = Errc::kOverloaded;
  done(std::move(overloaded));
}

void Committer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  Drain();
  {
    std::lock_guard lock(sync_mu_);
    syncers_stop_ = true;
  }
  sync_cv_.notify_all();
  for (std::thread& t : syncers_) {
    if (t.joinable()) t.join();
  }
  {
    std::lock_guard lock(mu_);
    committer_done_ = true;
  }
  apply_cv_.notify_all();
  if (applier_.joinable()) {
    applier_.join();
    // Everything logged is in LMDB now.
    if (int e = wal_->MarkApplied(); e != 0) {
      Fatal("cannot mark the write-ahead log applied", e);
    }
  }
}

std::uint64_t Committer::commits() const {
  std::lock_guard lock(mu_);
  return commits_;
}

void Committer::Run() {
  std::vector<Pending> group;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::size_t bytes = 0;
      while (!queue_.empty() && group.size() < options_.max_batch_writes) {
        const std::size_t size = PayloadBytes(queue_.front().write);
        if (!group.empty() && bytes + size > options_.max_batch_bytes) break;
        bytes += size;
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    CommitGroup(group);
    group.clear();
  }
}

void Committer::DecideOne(MDB_txn* txn, Seen& seen, const FenceWrite& write,
                          std::int64_t now_ns, WriteOutcome* outcome,
                          std::optional<WalRecord>* record,
                          bool* fence_created) {
  const Overlay& overlay = env_.overlay();
  // The fence as the writes before this one left it: this group's, then
  // the logged but unapplied ones, then LMDB.
  std::optional<Token> current;
  std::int64_t updated_at_ns = 0;
  *fence_created = false;
  if (auto it = seen.fences.find(write.fence); it != seen.fences.end()) {
    current = it->second;
  } else if (const auto* recent = FindRecent(&Seen::fences, write.fence)) {
    current = *recent;
  } else if (const Overlay::Fence* f = overlay.FindFence(write.fence)) {
    current = f->token;
    updated_at_ns = f->updated_at_ns;
  } else {
    Slot slot;
    std::optional<FenceRecord> stored;
    if (int rc = ReadFence(txn, env_.fences(), write.fence, &slot, &stored);
        rc != 0) {
      outcome->error = FromLmdb(rc);
      return;
    }
    if (stored) {
      current = stored->token;
      updated_at_ns = stored->updated_at_ns;
    }
    *fence_created = !stored;
  }
  outcome->previous = current;
  outcome->current = current;
  outcome->updated_at_ns = updated_at_ns;
  WalRecord r;
  r.fence = write.fence;
  LeaseTable::Entry lease;
  if (write.lease) {
    if (!DecideLease(seen, write, current, now_ns, outcome, &r, &lease)) {
      return;
    }
  } else {
    if (write.token) outcome->decision = Decide(current, *write.token);
    if (!DecideValue(txn, seen, write, now_ns, outcome, &r)) return;
  }
  // Refuse what could not fit the map with everything logged before it.
  const std::size_t need = Reservation(r);
  if (env_.used_bytes_in_txn() + reserved_bytes_ + need > env_.max_map_size()) {
    std::optional<LeaseRecord> expired;
    if (outcome->lease) expired = std::move(outcome->lease->expired);
    *outcome = WriteOutcome{};
    outcome->error = Errc::kMapFull;
    if (expired) {
      outcome->lease.emplace();
      outcome->lease->expired = std::move(expired);
    }
    return;
  }
  reserved_bytes_ += need;
  if (r.fence_token) {
    seen.fences[write.fence] = r.fence_token;
    outcome->current = r.fence_token;
    outcome->updated_at_ns = now_ns;
  }
  if (write.value) seen.values[r.key] = r.op == WalRecord::Op::kPut;
  if (write.lease) seen.leases[r.key] = std::move(lease);
  *record = std::move(r);
}

bool Committer::DecideValue(MDB_txn* txn, Seen& seen, const FenceWrite& write,
                            std::int64_t now_ns, WriteOutcome* outcome,
                            WalRecord* r) {
  const Overlay& overlay = env_.overlay();
  if (outcome->decision.accepted) {
    outcome->verdict = WriteOutcome::Verdict::kAccepted;
  } else if (write.observe) {
    outcome->verdict = WriteOutcome::Verdict::kObserved;
  } else {
    outcome->verdict = WriteOutcome::Verdict::kRejected;
    return false;
  }
  if (outcome->decision.accepted) {
    r->fence_token = *write.token;
    r->updated_at_ns = now_ns;
  }
  if (write.value) {
    const ValueOp& value = *write.value;
    bool present = false;
    if (auto it = seen.values.find(value.key); it != seen.values.end()) {
      present = it->second;
    } else if (const bool* recent = FindRecent(&Seen::values, value.key)) {
      present = *recent;
    } else if (const Overlay::Value* v = overlay.FindValue(value.key)) {
      present = v->present;
    } else {
      StoredValue stored;
      if (int rc = ReadValue(txn, env_.values(), value.key, &stored); rc != 0) {
        *outcome = WriteOutcome{};
        outcome->error = FromLmdb(rc);
        return false;
      }
      present = stored.found;
    }
    r->op = value.kind == ValueOp::Kind::kPut ? WalRecord::Op::kPut
                                              : WalRecord::Op::kDelete;
    r->key = value.key;
    r->body = value.body;
    r->value_token = write.token;
    outcome->created = value.kind == ValueOp::Kind::kPut && !present;
  }
  return true;
}

bool Committer::DecideLease(Seen& seen, const FenceWrite& write,
                            std::optional<Token> fence, std::int64_t now_ns,
                            WriteOutcome* outcome, WalRecord* r,
                            LeaseTable::Entry* next_entry) {
  const LeaseOp& op = *write.lease;
  const std::int64_t now = options_.steady_now();
  LeaseTable& table = env_.lease_table();
  std::optional<LeaseTable::Entry> entry;
  LeaseOutcome lease;
  if (auto it = seen.leases.find(op.name); it != seen.leases.end()) {
    entry = it->second;
  } else {
    lease.expired = table.NoticeExpired(op.name, now);
    entry = table.Find(op.name);
  }
  lease.existed = entry.has_value();
  if (entry) lease.lease = entry->record;
  const bool live = entry && IsLive(*entry, now);
  const auto expires_in_ms = [now](const LeaseTable::Entry& e) {
    return std::max<std::int64_t>(0, (e.deadline_ns - now + 999999) / 1000000);
  };
  const auto refuse = [&](LeaseOutcome::Verdict verdict) {
    lease.verdict = verdict;
    outcome->verdict = WriteOutcome::Verdict::kRejected;
    outcome->lease = std::move(lease);
    return false;
  };
  const std::int64_t ttl_ns = static_cast<std::int64_t>(op.ttl_ms) * 1000000;
  const bool holder_of_record =
      entry && !entry->record.released && entry->record.holder == op.holder;
  LeaseTable::Entry next;
  if (op.kind == LeaseOp::Kind::kRelease) {
    if (!live || !holder_of_record || entry->record.token != op.token) {
      return refuse(LeaseOutcome::Verdict::kNotHeld);
    }
    next = *entry;
    next.record.released = true;
    next.deadline_ns = 0;
    lease.verdict = LeaseOutcome::Verdict::kReleased;
  } else if (holder_of_record && fence.value_or(0) <= entry->record.token) {
    next = *entry;
    next.record.ttl_ms = op.ttl_ms;
    next.record.renewed_at_ns = now_ns;
    next.deadline_ns = now + ttl_ns;
    next.expiry_noticed = false;
    lease.verdict = LeaseOutcome::Verdict::kRenewed;
  } else if (live && !holder_of_record) {
    lease.expires_in_ms = expires_in_ms(*entry);
    return refuse(LeaseOutcome::Verdict::kDenied);
  } else {
    // One live lease per fence: two would take the fence from each other
    // at every grant.
    std::optional<std::pair<std::string, LeaseTable::Entry>> other;
    for (const auto& [name, e] : seen.leases) {
      if (name != op.name && e.record.fence == write.fence && IsLive(e, now)) {
        other = {name, e};
      }
    }
    if (!other) {
      other = table.LiveOnFence(write.fence, op.name, now);
      // This group changed that lease after the table's state: seen above.
      if (other && seen.leases.count(other->first) > 0) other.reset();
    }
    if (other) {
      lease.blocking_lease = other->first;
      lease.lease = other->second.record;
      lease.expires_in_ms = expires_in_ms(other->second);
      return refuse(LeaseOutcome::Verdict::kDenied);
    }
    const Token base =
        std::max(entry ? entry->record.token : Token{0}, fence.value_or(0));
    if (base == std::numeric_limits<Token>::max()) {
      outcome->error = Errc::kTokensExhausted;
      return false;
    }
    next.record.holder = op.holder;
    next.record.fence = write.fence;
    next.record.token = base + 1;
    next.record.ttl_ms = op.ttl_ms;
    next.record.acquired_at_ns = next.record.renewed_at_ns = now_ns;
    next.record.transitions =
        !entry ? 0
               : entry->record.transitions +
                     (entry->record.holder != op.holder ? 1 : 0);
    next.deadline_ns = now + ttl_ns;
    using Reason = LeaseOutcome::GrantReason;
    if (entry) {
      lease.previous_holder = entry->record.holder;
      lease.previous_expired =
          !entry->record.released && !live && !holder_of_record;
      lease.reason = holder_of_record         ? Reason::kFenceAbove
                     : entry->record.released ? Reason::kReleased
                                              : Reason::kExpired;
    }
    outcome->decision = Decide(fence, base + 1);
    r->fence_token = base + 1;
    r->updated_at_ns = now_ns;
    lease.verdict = LeaseOutcome::Verdict::kGranted;
  }
  outcome->verdict = WriteOutcome::Verdict::kAccepted;
  lease.lease = next.record;
  lease.expires_in_ms = next.record.released ? 0 : expires_in_ms(next);
  outcome->lease = std::move(lease);
  r->op = WalRecord::Op::kLease;
  r->key = op.name;
  r->body = EncodeLease(next.record);
  *next_entry = std::move(next);
  return true;
}

bool Committer::DecideBatch(MDB_txn* txn, Seen& seen, const FenceWrite& batch,
                            std::int64_t now_ns, WriteOutcome* outcome,
                            std::vector<WalRecord>* records,
                            std::vector<bool>* created) {
  Seen trial = seen;
  std::size_t reserved = 0;  // by this batch's records
  const std::size_t created_at = created->size();
  for (const FenceWrite& write : batch.batch) {
    WriteOutcome& one = outcome->batch.emplace_back();
    std::optional<WalRecord> record;
    bool fence_created = false;
    DecideOne(txn, trial, write, now_ns, &one, &record, &fence_created);
    if (!record) {
      // Nothing of the batch is applied: undo its reservations (its own
      // only: the applier may have released others' meanwhile).
      reserved_bytes_ -= reserved;
      records->clear();
      created->resize(created_at);
      outcome->verdict = one.verdict;
      outcome->error = one.error;
      return false;
    }
    record->batch_continues = true;
    reserved += Reservation(*record);
    records->push_back(std::move(*record));
    created->push_back(fence_created);
  }
  records->back().batch_continues = false;
  outcome->verdict = WriteOutcome::Verdict::kAccepted;
  for (const WriteOutcome& one : outcome->batch) {
    if (one.verdict == WriteOutcome::Verdict::kObserved) {
      outcome->verdict = WriteOutcome::Verdict::kObserved;
    }
  }
  seen = std::move(trial);
  return true;
}

template <class Ready>
void Committer::WaitForApplier(Ready ready) {
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
  // Lease decisions read the lease table, which groups update when they
  // are answered: let the earlier ones be answered first.
  if (std::any_of(group.begin(), group.end(),
                  [](const Pending& p) { return p.write.lease.has_value(); })) {
    Drain();
  }
  // Near --max-map-size the reservations of unapplied records would refuse
  // writes that fit: let the applier drain first, so a 507 is decided on
  // the map as it is (and stays 507 while nothing frees space).
  std::size_t need = 0;
  for (const Pending& p : group) need += Reservation(p.write);
  if (env_.used_bytes() + reserved_bytes_ + need > env_.max_map_size()) {
    Drain();
    WaitForApplier(
        [this] { return to_apply_.empty() && unapplied_bytes_ == 0; });
  }
  Group g;
  g.outcomes.resize(group.size());
  Seen seen;
  {
    // The overlay's lock, then LMDB's snapshot: nothing acknowledged is
    // missed between them (see Overlay).
    auto lock = env_.overlay().Lock();
    Env::ReadTxn txn(env_);
    if (txn.get() == nullptr) {
      for (WriteOutcome& o : g.outcomes) o.error = FromLmdb(txn.error());
    } else {
      const std::int64_t now_ns = NowNs();
      for (std::size_t i = 0; i < group.size(); ++i) {
        if (!group[i].write.batch.empty()) {
          std::vector<WalRecord> batch;
          if (DecideBatch(txn.get(), seen, group[i].write, now_ns,
                          &g.outcomes[i], &batch, &g.created)) {
            for (WalRecord& r : batch) {
              r.seq = next_seq_ + g.records.size();
              g.records.push_back(std::move(r));
            }
          }
          continue;
        }
        std::optional<WalRecord> record;
        bool fence_created = false;
        DecideOne(txn.get(), seen, group[i].write, now_ns, &g.outcomes[i],
                  &record, &fence_created);
        if (!record) continue;
        record->seq = next_seq_ + g.records.size();
        g.records.push_back(std::move(*record));
        g.created.push_back(fence_created);
      }
    }
  }

  int segment = -1;
  if (!g.records.empty()) {
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
    if (int e = wal_->Write(bytes, g.records.back().seq, &segment); e != 0) {
      Fatal(
          "the write-ahead log write failed; the outcome of its writes is "
          "unknown",
          e);
    }
    next_seq_ = g.records.back().seq + 1;
    recent_.push_back(
        {g.records.back().seq,
         Seen{std::move(seen.fences), std::move(seen.values), {}}});
  }
  g.leases = std::move(seen.leases);
  g.durable_at = next_seq_ - 1;
  g.pending = std::move(group);
  group.clear();
  {
    std::lock_guard lock(sync_mu_);
    decided_.push_back(std::move(g));
    ++unanswered_;
    if (segment >= 0) {
      written_seq_ = next_seq_ - 1;
      unsynced_segments_ |= 1u << segment;
    }
  }
  if (segment < 0) {
    AnswerDurable();  // nothing to sync: it may be answerable now
    return;
  }
  // With no other write waiting and no sync in flight there is nothing to
  // overlap: sync here, sparing the hand-off to a sync thread and back.
  bool idle = false;
  {
    std::lock_guard lock(mu_);
    idle = queue_.empty();
  }
  std::unique_lock lock(sync_mu_);
  if (idle && syncs_.empty() && unsynced_segments_ != 0 &&
      !options_.sync_threads_only) {
    Sync(*committer_files_, lock);
    return;
  }
  sync_cv_.notify_one();
  // Let the next group gather while every sync thread is busy: go on only
  // once a sync has begun that covers this group.
  room_cv_.wait(lock, [this] { return sync_target_ >= written_seq_; });
}

void Committer::SyncLoop(const Wal::SyncFiles& files) {
  std::unique_lock lock(sync_mu_);
  while (true) {
    sync_cv_.wait(lock,
                  [this] { return syncers_stop_ || unsynced_segments_ != 0; });
    if (unsynced_segments_ == 0) return;
    Sync(files, lock);
  }
}

void Committer::Sync(const Wal::SyncFiles& files,
                     std::unique_lock<std::mutex>& lock) {
  const unsigned segments = unsynced_segments_;
  unsynced_segments_ = 0;
  sync_target_ = written_seq_;
  syncs_.push_back({written_seq_, false});
  SyncTicket& ticket = syncs_.back();  // deque: stays valid
  room_cv_.notify_all();
  lock.unlock();
  const auto sync = [&] {
    for (int i = 0; i < 2; ++i) {
      if ((segments & (1u << i)) == 0) continue;
      if (int e = files.Sync(i); e != 0) {
        Fatal(
            "the write-ahead log sync failed; the outcome of its writes is "
            "unknown",
            e);
      }
    }
  };
  if (!options_.answer_before_sync) sync();
  lock.lock();
  ticket.done = true;
  bool advanced = false;
  while (!syncs_.empty() && syncs_.front().done) {
    durable_seq_ = syncs_.front().target;
    syncs_.pop_front();
    advanced = true;
  }
  if (advanced) {
    lock.unlock();
    AnswerDurable();
    lock.lock();
  }
  if (options_.answer_before_sync) {
    lock.unlock();
    sync();
    lock.lock();
  }
}

void Committer::AnswerDurable() {
  std::lock_guard order(answer_mu_);
  while (true) {
    Group g;
    {
      std::lock_guard lock(sync_mu_);
      if (decided_.empty() || decided_.front().durable_at > durable_seq_) {
        return;
      }
      g = std::move(decided_.front());
      decided_.pop_front();
    }
    Answer(g);
    {
      std::lock_guard lock(sync_mu_);
      --unanswered_;
    }
    room_cv_.notify_all();
  }
}

void Committer::Answer(Group& g) {
  if (!g.records.empty()) {
    env_.overlay().Publish(g.records, g.created);
    for (auto& [name, entry] : g.leases) {
      env_.lease_table().Set(name, std::move(entry));
    }
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

void Committer::Drain() {
  std::unique_lock lock(sync_mu_);
  room_cv_.wait(lock, [this] { return unanswered_ == 0; });
}

void Committer::ApplyLoop() {
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
      if (r.fence_token) {
        Slot slot;
        std::optional<FenceRecord> ignored;
        rc = ReadFence(txn, env_.fences(), r.fence, &slot, &ignored);
        if (rc == 0) {
          rc = WriteFence(txn, env_.fences(), slot, r.fence, *r.fence_token,
                          r.updated_at_ns);
        }
      }
      if (rc == 0 && r.op == WalRecord::Op::kLease) {
        rc = PutValue(txn, env_.leases(), r.key, r.body, std::nullopt);
      } else if (rc == 0 && r.op == WalRecord::Op::kPut) {
        rc = PutValue(txn, env_.values(), r.key, r.body, r.value_token);
      } else if (rc == 0 && r.op == WalRecord::Op::kDelete) {
        rc = DeleteValue(txn, env_.values(), r.key);
      }
      if (rc != 0) break;
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

void Committer::Fatal(const std::string& what, int rc) {
  // mdb_strerror also names plain errno values.
  const std::string message = what + ": " + Explain(env_.dir(), rc);
  if (options_.on_fatal) options_.on_fatal(message);
  std::abort();
}

}  // namespace fencepost::fence
