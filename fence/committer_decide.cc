// The committer's decisions: it reads what a write's rule needs (the fence,
// the value's presence, the lease, as the writes before it left them) and
// applies fence/rules.h; what the rules return becomes the group's log
// records. No rule is written here.

#include <algorithm>
#include <chrono>
#include <utility>

#include "fence/committer.h"
#include "fence/errc.h"
#include "fence/fence_store.h"
#include "fence/lease_table.h"
#include "fence/rules.h"
#include "fence/values.h"

namespace fencepost::fence {
namespace {

// Milliseconds until `entry` runs out (rounded up), 0 when it has.
std::int64_t ExpiresInMs(const LeaseEntry& entry, std::int64_t now) {
  return std::max<std::int64_t>(0,
                                (entry.deadline_ns - now + 999999) / 1000000);
}

// Map space a write of `bytes` (fence, key and body) may take once applied:
// its bytes twice (a page split can copy them) plus a page of overhead.
std::size_t Reservation(std::size_t bytes) { return 2 * bytes + 4096; }

}  // namespace

std::size_t Committer::Reservation(const WalRecord& r) {
  return fence::Reservation(r.fence.size() + r.key.size() + r.body.size());
}
std::size_t Committer::Reservation(const FencedWrite& w) {
  return fence::Reservation(
      w.fence.size() +
      (w.value ? w.value->key.size() + w.value->body.size() : 0));
}
std::size_t Committer::Reservation(const FenceWrite& write) {
  if (const auto* w = std::get_if<FencedWrite>(&write)) return Reservation(*w);
  if (const auto* l = std::get_if<LeaseOp>(&write)) {
    return fence::Reservation(l->fence.size());
  }
  std::size_t n = 0;
  for (const FencedWrite& w : std::get<Batch>(write).writes) {
    n += Reservation(w);
  }
  return n;
}

std::size_t Committer::PayloadBytes(const FenceWrite& write) {
  const auto bytes = [](const FencedWrite& w) {
    return w.value ? w.value->key.size() + w.value->body.size() : 0;
  };
  if (const auto* w = std::get_if<FencedWrite>(&write)) return bytes(*w);
  std::size_t n = 0;
  if (const auto* b = std::get_if<Batch>(&write)) {
    for (const FencedWrite& w : b->writes) n += bytes(w);
  }
  return n;
}

bool Committer::CurrentFence(MDB_txn* txn, const Seen& seen,
                             const std::string& fence, FenceNow* now,
                             WriteOutcome* outcome) const {
  // This group's decisions, then the logged but unapplied records, then
  // LMDB.
  if (auto it = seen.fences.find(fence); it != seen.fences.end()) {
    now->token = it->second.token;
    now->updated_at_ns = it->second.updated_at_ns;
  } else if (const auto* recent = FindRecent(&Seen::fences, fence)) {
    now->token = recent->token;
    now->updated_at_ns = recent->updated_at_ns;
  } else if (const Overlay::Fence* f = env_.overlay().FindFence(fence)) {
    now->token = f->token;
    now->updated_at_ns = f->updated_at_ns;
  } else {
    Slot slot;
    std::optional<FenceRecord> stored;
    if (int rc = ReadFenceOf(txn, env_, fence, &slot, &stored); rc != 0) {
      outcome->error = FromLmdb(rc);
      return false;
    }
    if (stored) {
      now->token = stored->token;
      now->updated_at_ns = stored->updated_at_ns;
    }
    now->created = !stored;
  }
  return true;
}

int Committer::CurrentValue(MDB_txn* txn, const Seen& seen,
                            const std::string& key, bool with_tag,
                            ValueNow* now) const {
  std::optional<std::uint64_t> seq;
  if (auto it = seen.values.find(key); it != seen.values.end()) {
    seq = it->second;
  } else if (const auto* recent = FindRecent(&Seen::values, key)) {
    seq = *recent;
  } else if (const Overlay::Value* v = env_.overlay().FindValue(key)) {
    if (v->present) seq = v->seq;
  } else {
    StoredValue stored;
    if (int rc = ReadValue(txn, env_.values(), key, &stored); rc != 0) {
      return rc;
    }
    if (stored.found) seq = stored.seq;
  }
  now->exists = seq.has_value();
  if (seq && with_tag) now->tag = TagOf(*seq);
  return 0;
}

bool Committer::Admit(Seen& seen, const WalRecord& r, WriteOutcome* outcome) {
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
    return false;
  }
  reserved_bytes_ += need;
  if (r.fence_token) seen.fences[r.fence] = {*r.fence_token, r.updated_at_ns};
  if (r.op == WalRecord::Op::kPut) {
    seen.values[r.key] = r.seq;
  } else if (r.op == WalRecord::Op::kDelete) {
    seen.values[r.key] = std::nullopt;
  }
  return true;
}

void Committer::DecideOne(MDB_txn* txn, Seen& seen, const FencedWrite& write,
                          std::int64_t now_ns, WriteOutcome* outcome,
                          std::optional<WalRecord>* record,
                          bool* fence_created) {
  FenceNow fence;
  if (!CurrentFence(txn, seen, write.fence, &fence, outcome)) return;
  *fence_created = fence.created;
  // The value it replaces, for its precondition and `created`.
  ValueNow value;
  if (write.value_now) {
    value = *write.value_now;
  } else if (write.value) {
    if (int rc = CurrentValue(txn, seen, write.value->key,
                              !write.precondition.empty(), &value);
        rc != 0) {
      outcome->error = FromLmdb(rc);
      return;
    }
  }
  *outcome =
      DecideWrite(write, fence.token, fence.updated_at_ns, now_ns, value);
  if (!Applied(*outcome)) return;
  // A write whose value is kept elsewhere (fs:, http://, s3://) and that
  // does not raise its fence changes nothing here: no record, and it is
  // answered once the log written before it is durable, which holds the
  // raise that set its fence's token.
  if (!write.value && !RaisesFence(*outcome)) return;
  WalRecord r;
  r.seq = deciding_seq_;
  r.fence = write.fence;
  if (RaisesFence(*outcome)) {
    r.fence_token = outcome->current;
    r.updated_at_ns = outcome->updated_at_ns;
  }
  if (write.value) {
    const ValueOp& op = *write.value;
    const bool put = op.kind == ValueOp::Kind::kPut;
    r.op = put ? WalRecord::Op::kPut : WalRecord::Op::kDelete;
    r.key = op.key;
    r.body = op.body;
    r.value_token = write.token;
    if (put) r.content_type = op.content_type.substr(0, kMaxContentTypeBytes);
    outcome->created = put && !value.exists;
    if (put) outcome->etag = TagOf(r.seq);
  }
  if (Admit(seen, r, outcome)) {
    ++deciding_seq_;
    *record = std::move(r);
  }
}

LeaseState Committer::ReadLease(const Seen& seen, const LeaseOp& op,
                                std::int64_t now,
                                std::optional<LeaseRecord>* expired) {
  LeaseTable& table = env_.lease_table();
  std::optional<LeaseEntry> entry;
  if (auto it = seen.leases.find(op.name); it != seen.leases.end()) {
    entry = it->second;
  } else {
    *expired = table.NoticeExpired(op.name, now);
    entry = table.Find(op.name);
  }
  LeaseState state;
  if (entry) {
    state.record = entry->record;
    state.live = IsLive(*entry, now);
    state.expires_in_ms = ExpiresInMs(*entry, now);
  }
  // Another live lease on the same fence: this group's word on it first.
  std::optional<std::pair<std::string, LeaseEntry>> other;
  for (const auto& [name, e] : seen.leases) {
    if (name != op.name && e.record.fence == op.fence && IsLive(e, now)) {
      other = {name, e};
    }
  }
  if (!other) {
    other = table.LiveOnFence(op.fence, op.name, now);
    if (other && seen.leases.count(other->first) > 0) other.reset();
  }
  if (other) {
    state.other = LeaseState::Blocking{other->first, other->second.record,
                                       ExpiresInMs(other->second, now)};
  }
  return state;
}

void Committer::DecideOne(MDB_txn* txn, Seen& seen, const LeaseOp& op,
                          std::int64_t now_ns, WriteOutcome* outcome,
                          std::optional<WalRecord>* record,
                          bool* fence_created) {
  FenceNow fence;
  if (!CurrentFence(txn, seen, op.fence, &fence, outcome)) return;
  *fence_created = fence.created;
  const std::int64_t now = options_.steady_now();
  std::optional<LeaseRecord> expired;
  LeaseState state = ReadLease(seen, op, now, &expired);
  // --max-leases is decided here, in the step that commits the grant: a
  // place taken now is held until the group is answered (LeaseLimit).
  bool reserved = false;
  if (options_.lease_limit != nullptr) {
    state.over_limit = options_.lease_limit->Reserve(op, state, now, &reserved);
  }
  LeaseDecision decision = DecideLease(op, fence.token, state, now_ns);
  *outcome = std::move(decision.outcome);
  if (!RaisesFence(*outcome)) outcome->updated_at_ns = fence.updated_at_ns;
  if (expired) {
    // Counted by whoever answers, whatever the verdict.
    if (!outcome->lease) outcome->lease.emplace();
    outcome->lease->expired = std::move(expired);
  }
  if (!decision.next) {
    // Denied after all (another lease live on its fence, or no token left).
    if (reserved) options_.lease_limit->Unreserve(1);
    return;
  }
  WalRecord r;
  r.fence = op.fence;
  if (RaisesFence(*outcome)) {
    r.fence_token = outcome->current;
    r.updated_at_ns = now_ns;
  }
  r.op = WalRecord::Op::kLease;
  r.seq = deciding_seq_;
  r.key = op.name;
  r.body = EncodeLease(*decision.next);
  if (!Admit(seen, r, outcome)) {
    if (reserved) options_.lease_limit->Unreserve(1);
    return;
  }
  if (reserved) ++deciding_leases_;
  ++deciding_seq_;
  LeaseEntry& next = seen.leases[op.name];
  next.record = std::move(*decision.next);
  next.deadline_ns =
      next.record.released
          ? 0
          : now + static_cast<std::int64_t>(next.record.ttl_ms) * 1000000;
  next.expiry_noticed = false;
  *record = std::move(r);
}

bool Committer::DecideBatch(MDB_txn* txn, Seen& seen, const Batch& batch,
                            std::int64_t now_ns, WriteOutcome* outcome,
                            std::vector<WalRecord>* records,
                            std::vector<bool>* created) {
  Seen trial = seen;
  const std::uint64_t first_seq = deciding_seq_;
  std::size_t reserved = 0;  // by this batch's records
  std::vector<WalRecord> decided;
  std::vector<bool> fences_created;
  std::vector<WriteOutcome> outcomes;
  bool applied = true;
  for (const FencedWrite& write : batch.writes) {
    WriteOutcome& one = outcomes.emplace_back();
    std::optional<WalRecord> record;
    bool fence_created = false;
    DecideOne(txn, trial, write, now_ns, &one, &record, &fence_created);
    if (StopsBatch(one)) {
      applied = false;
      break;
    }
    if (!Applied(one)) {
      // Its precondition failed: the batch is not applied, but the writes
      // after it are still decided, since a stale token among them is the
      // batch's answer (fence/rules.h).
      applied = false;
      continue;
    }
    if (!record) continue;  // it changes nothing here
    record->batch_continues = true;
    reserved += Reservation(*record);
    decided.push_back(std::move(*record));
    fences_created.push_back(fence_created);
  }
  if (!applied) {
    // Nothing of the batch is applied: undo its reservations (its own
    // only: the applier may have released others' meanwhile) and numbers.
    reserved_bytes_ -= reserved;
    deciding_seq_ = first_seq;
    *outcome = BatchOutcome(std::move(outcomes));
    return false;
  }
  if (!decided.empty()) decided.back().batch_continues = false;
  *outcome = BatchOutcome(std::move(outcomes));
  for (std::size_t i = 0; i < decided.size(); ++i) {
    records->push_back(std::move(decided[i]));
    created->push_back(fences_created[i]);
  }
  seen = std::move(trial);
  return true;
}

}  // namespace fencepost::fence
