// The committer's decisions: a group is decided by one Fold (fence/fold.h);
// here are only what it loads (the fence, the value, the lease, as the
// groups being synced, the overlay and LMDB left them), the map space and
// --max-leases places its changes take, and its changes made log records.
// No rule is written here.

#include <utility>

#include "fence/committer.h"
#include "fence/errc.h"
#include "fence/fence_store.h"
#include "fence/lease_table.h"
#include "fence/values.h"

namespace fencepost::fence {
namespace {

// The log record of `change`, numbered `seq`.
WalRecord RecordOf(Change change, std::uint64_t seq) {
  WalRecord r;
  r.seq = seq;
  r.fence = std::move(change.fence);
  r.fence_token = change.fence_token;
  r.updated_at_ns = change.updated_at_ns;
  r.key = std::move(change.key);
  switch (change.op) {
    case Change::Op::kNone:
      break;
    case Change::Op::kPut:
      r.op = WalRecord::Op::kPut;
      r.content_type = change.content_type.substr(0, kMaxContentTypeBytes);
      break;
    case Change::Op::kDelete:
      r.op = WalRecord::Op::kDelete;
      break;
    case Change::Op::kLease:
      r.op = WalRecord::Op::kLease;
      change.body = EncodeLease(*change.lease);
      break;
  }
  r.body = std::move(change.body);
  r.value_token = change.value_token;
  r.batch_continues = change.batch_continues;
  return r;
}

}  // namespace

// What a group's fold reads of this shard, in one LMDB read transaction
// under the overlay's lock, and what its changes take: map space for each
// record (refused with Errc::kMapFull when it could not fit with everything
// logged before it) and --max-leases places for its grants.
class Committer::Loads : public Fold::Source {
 public:
  Loads(Committer& committer, MDB_txn* txn)
      : c_(committer), env_(committer.env_), txn_(txn) {}

  // The places the group's grants hold under --max-leases.
  std::size_t leases() const { return leases_; }

  std::error_code LoadFence(const std::string& name, FenceNow* now) override {
    // The groups being synced, then the logged but unapplied records, then
    // LMDB.
    if (const FenceNow* recent = c_.FindRecent(&Fold::State::fences, name)) {
      *now = *recent;
    } else if (const Overlay::Fence* f = env_.overlay().FindFence(name)) {
      *now = {f->token, f->updated_at_ns};
    } else {
      Slot slot;
      std::optional<FenceRecord> stored;
      if (int rc = ReadFenceOf(txn_, env_, name, &slot, &stored); rc != 0) {
        return FromLmdb(rc);
      }
      if (stored) *now = {stored->token, stored->updated_at_ns};
      now->created = !stored;
    }
    return {};
  }

  std::error_code LoadValue(const std::string& key, bool with_tag,
                            ValueNow* now) override {
    if (const ValueNow* recent = c_.FindRecent(&Fold::State::values, key)) {
      *now = *recent;
      return {};
    }
    std::optional<std::uint64_t> seq;
    if (const Overlay::Value* v = env_.overlay().FindValue(key)) {
      if (v->present) seq = v->seq;
    } else {
      StoredValue stored;
      if (int rc = ReadValue(txn_, env_.values(), key, &stored); rc != 0) {
        return FromLmdb(rc);
      }
      if (stored.found) seq = stored.seq;
    }
    now->exists = seq.has_value();
    if (seq && with_tag) now->tag = TagOf(*seq);
    return {};
  }

  LeaseState LoadLease(const LeaseOp& op, std::int64_t now,
                       std::optional<LeaseRecord>* expired) override {
    LeaseTable& table = env_.lease_table();
    *expired = table.NoticeExpired(op.name, now);
    const std::optional<LeaseEntry> entry = table.Find(op.name);
    return entry ? LeaseStateOf(*entry, now) : LeaseState{};
  }

  std::optional<LeaseState::Blocking> LiveOnFence(const LeaseOp& op,
                                                  std::int64_t now) override {
    auto other = env_.lease_table().LiveOnFence(op.fence, op.name, now);
    if (!other) return std::nullopt;
    return BlockingOf(std::move(other->first), other->second, now);
  }

  bool OverLeaseLimit(const LeaseOp& op, const LeaseState& state,
                      std::int64_t now) override {
    // A place taken now is held until the group is answered (LeaseLimit).
    reserved_ = false;
    LeaseLimit* limit = c_.options_.lease_limit;
    return limit != nullptr && limit->Reserve(op, state, now, &reserved_);
  }

  void LeaseDecided(bool applied) override {
    if (!std::exchange(reserved_, false)) return;
    if (applied) {
      ++leases_;
    } else {
      c_.options_.lease_limit->Unreserve(1);
    }
  }

  std::error_code Admit(Change& change, std::size_t number,
                        WriteOutcome* outcome) override {
    const std::size_t need = Reservation(change);
    if (env_.used_bytes_in_txn() + c_.applier_->reserved() + need >
        env_.max_map_size()) {
      return Errc::kMapFull;
    }
    c_.applier_->Reserve(need);
    if (change.op == Change::Op::kPut) {
      change.tag = TagOf(c_.next_seq_ + number);
      outcome->etag = change.tag;
    }
    return {};
  }

  void Unadmit(const std::vector<Change>& changes) override {
    // Its own only: the applier may have released others' meanwhile.
    for (const Change& change : changes)
      c_.applier_->Unreserve(Reservation(change));
  }

 private:
  // What MapReservation gives its record.
  static std::size_t Reservation(const Change& change) {
    const std::size_t body = change.op == Change::Op::kLease
                                 ? EncodeLease(*change.lease).size()
                                 : change.body.size();
    return MapReservation(change.fence.size() + change.key.size() + body);
  }

  Committer& c_;
  Env& env_;
  MDB_txn* txn_;
  bool reserved_ = false;  // by the lease operation being decided
  std::size_t leases_ = 0;
};

void Committer::DecideGroup(std::vector<Pending>& group, Group& g,
                            Fold::State* state) {
  g.outcomes.resize(group.size());
  // The overlay's lock, then LMDB's snapshot: nothing acknowledged is
  // missed between them (see Overlay).
  auto lock = env_.overlay().Lock();
  Env::ReadTxn txn(env_);
  if (txn.get() == nullptr) {
    for (WriteOutcome& o : g.outcomes) o.error = FromLmdb(txn.error());
    return;
  }
  const std::int64_t now_ns = WallNowNs();
  Loads loads(*this, txn.get());
  Fold fold(loads);
  for (std::size_t i = 0; i < group.size(); ++i) {
    WriteOutcome* outcome = &g.outcomes[i];
    if (const auto* write = std::get_if<FencedWrite>(&group[i].write)) {
      fold.Decide(*write, now_ns, outcome);
    } else if (const auto* op = std::get_if<LeaseOp>(&group[i].write)) {
      fold.Decide(*op, now_ns, options_.steady_now(), outcome);
    } else {
      std::vector<WriteOutcome> outcomes;
      fold.Decide(std::get<Batch>(group[i].write), now_ns, &outcomes);
      *outcome = BatchOutcome(std::move(outcomes));
    }
  }
  std::vector<Change>& changes = fold.changes();
  for (std::size_t i = 0; i < changes.size(); ++i) {
    g.created.push_back(changes[i].fence_created);
    g.records.push_back(RecordOf(std::move(changes[i]), next_seq_ + i));
  }
  g.reserved_leases = loads.leases();
  *state = std::move(fold.state());
}

}  // namespace fencepost::fence
