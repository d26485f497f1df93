#include "fence/fold.h"

#include <algorithm>
#include <utility>

namespace fencepost::fence {
namespace {

// Milliseconds until `entry` runs out (rounded up), 0 when it has.
std::int64_t ExpiresInMs(const LeaseEntry& entry, std::int64_t now) {
  return std::max<std::int64_t>(0,
                                (entry.deadline_ns - now + 999999) / 1000000);
}

// `outcome` made a failure with `error`, keeping the expiry it noticed
// (counted by whoever answers, whatever the verdict).
void Fail(WriteOutcome* outcome, std::error_code error) {
  std::optional<LeaseRecord> expired;
  if (outcome->lease) expired = std::move(outcome->lease->expired);
  *outcome = WriteOutcome{};
  outcome->error = error;
  if (expired) {
    outcome->lease.emplace();
    outcome->lease->expired = std::move(expired);
  }
}

}  // namespace

LeaseState LeaseStateOf(const LeaseEntry& entry, std::int64_t now) {
  LeaseState state;
  state.record = entry.record;
  state.live = IsLive(entry, now);
  state.expires_in_ms = ExpiresInMs(entry, now);
  return state;
}

LeaseState::Blocking BlockingOf(std::string name, const LeaseEntry& entry,
                                std::int64_t now) {
  return {std::move(name), entry.record, ExpiresInMs(entry, now)};
}

LeaseState Fold::Source::LoadLease(const LeaseOp&, std::int64_t,
                                   std::optional<LeaseRecord>*) {
  return {};
}
std::optional<LeaseState::Blocking> Fold::Source::LiveOnFence(const LeaseOp&,
                                                              std::int64_t) {
  return std::nullopt;
}
bool Fold::Source::OverLeaseLimit(const LeaseOp&, const LeaseState&,
                                  std::int64_t) {
  return false;
}
void Fold::Source::LeaseDecided(bool) {}
void Fold::Source::Unadmit(const std::vector<Change>&) {}

std::error_code Fold::FenceOf(const State& state, const std::string& name,
                              FenceNow* now) {
  if (auto it = state.fences.find(name); it != state.fences.end()) {
    *now = it->second;
    return {};
  }
  return source_.LoadFence(name, now);
}

void Fold::DecideIn(State& state, std::vector<Change>& out, std::size_t base,
                    const FencedWrite& write, std::int64_t now_ns,
                    WriteOutcome* outcome) {
  FenceNow fence;
  if (std::error_code e = FenceOf(state, write.fence, &fence)) {
    outcome->error = e;
    return;
  }
  // The value it replaces, for its precondition and `created`.
  ValueNow value;
  bool loaded = false;
  if (write.value_now) {
    value = *write.value_now;
  } else if (write.value) {
    const std::string& key = write.value->key;
    if (auto it = state.values.find(key); it != state.values.end()) {
      value = it->second;
    } else {
      loaded = !write.precondition.empty();
      if (std::error_code e = source_.LoadValue(key, loaded, &value)) {
        outcome->error = e;
        return;
      }
    }
  }
  *outcome =
      DecideWrite(write, fence.token, fence.updated_at_ns, now_ns, value);
  if (!Applied(*outcome)) return;
  // A write whose value is kept elsewhere (fs:, http://, s3://) and that
  // does not raise its fence changes nothing here.
  if (!write.value && !RaisesFence(*outcome)) return;
  Change change;
  change.fence = write.fence;
  change.fence_created = fence.created;
  change.value_loaded = loaded;
  if (RaisesFence(*outcome)) {
    change.fence_token = outcome->current;
    change.updated_at_ns = outcome->updated_at_ns;
  }
  if (write.value) {
    const ValueOp& op = *write.value;
    const bool put = op.kind == ValueOp::Kind::kPut;
    change.op = put ? Change::Op::kPut : Change::Op::kDelete;
    change.key = op.key;
    change.body = op.body;
    change.value_token = write.token;
    if (put) change.content_type = op.content_type;
    outcome->created = put && !value.exists;
  }
  if (std::error_code e = source_.Admit(change, base + out.size(), outcome)) {
    Fail(outcome, e);
    return;
  }
  if (change.fence_token) {
    state.fences[change.fence] = {change.fence_token, change.updated_at_ns};
  }
  if (change.op == Change::Op::kPut) {
    state.values[change.key] = ValueNow{true, change.tag};
  } else if (change.op == Change::Op::kDelete) {
    state.values[change.key] = ValueNow{};
  }
  out.push_back(std::move(change));
}

void Fold::Decide(const FencedWrite& write, std::int64_t now_ns,
                  WriteOutcome* outcome) {
  DecideIn(state_, changes_, 0, write, now_ns, outcome);
}

bool Fold::Decide(const Batch& batch, std::int64_t now_ns,
                  std::vector<WriteOutcome>* outcomes) {
  State trial = state_;
  std::vector<Change> decided;
  bool applied = true;
  for (const FencedWrite& write : batch.writes) {
    WriteOutcome& one = outcomes->emplace_back();
    DecideIn(trial, decided, changes_.size(), write, now_ns, &one);
    if (StopsBatch(one)) {
      applied = false;
      break;
    }
    // A failed precondition: the batch is not applied, but the writes
    // after it are still decided, since a stale token among them is the
    // batch's answer (fence/rules.h).
    if (!Applied(one)) applied = false;
  }
  if (!applied) {
    source_.Unadmit(decided);
    return false;
  }
  for (Change& change : decided) {
    change.batch_continues = true;
    changes_.push_back(std::move(change));
  }
  if (!decided.empty()) changes_.back().batch_continues = false;
  state_ = std::move(trial);
  return true;
}

LeaseState Fold::LeaseOf(const LeaseOp& op, std::int64_t now,
                         std::optional<LeaseRecord>* expired) {
  LeaseState state;
  if (auto it = state_.leases.find(op.name); it != state_.leases.end()) {
    state = LeaseStateOf(it->second, now);
  } else {
    state = source_.LoadLease(op, now, expired);
  }
  // Another live lease on the same fence: the group's word on it first.
  for (const auto& [name, entry] : state_.leases) {
    if (name != op.name && entry.record.fence == op.fence &&
        IsLive(entry, now)) {
      state.other = BlockingOf(name, entry, now);
    }
  }
  if (!state.other) {
    state.other = source_.LiveOnFence(op, now);
    if (state.other && state_.leases.count(state.other->name) > 0) {
      state.other.reset();
    }
  }
  return state;
}

void Fold::Decide(const LeaseOp& op, std::int64_t now_ns,
                  std::int64_t steady_now, WriteOutcome* outcome) {
  FenceNow fence;
  if (std::error_code e = FenceOf(state_, op.fence, &fence)) {
    outcome->error = e;
    return;
  }
  std::optional<LeaseRecord> expired;
  LeaseState state = LeaseOf(op, steady_now, &expired);
  state.over_limit = source_.OverLeaseLimit(op, state, steady_now);
  LeaseDecision decision = DecideLease(op, fence.token, state, now_ns);
  *outcome = std::move(decision.outcome);
  if (!RaisesFence(*outcome)) outcome->updated_at_ns = fence.updated_at_ns;
  if (expired) {
    if (!outcome->lease) outcome->lease.emplace();
    outcome->lease->expired = std::move(expired);
  }
  if (!decision.next) {
    // Denied (another lease live on its fence, not held, no token left).
    source_.LeaseDecided(false);
    return;
  }
  Change change;
  change.fence = op.fence;
  change.fence_created = fence.created;
  if (RaisesFence(*outcome)) {
    change.fence_token = outcome->current;
    change.updated_at_ns = now_ns;
  }
  change.op = Change::Op::kLease;
  change.key = op.name;
  change.lease = *decision.next;
  if (std::error_code e = source_.Admit(change, changes_.size(), outcome)) {
    source_.LeaseDecided(false);
    Fail(outcome, e);
    return;
  }
  source_.LeaseDecided(true);
  if (change.fence_token) {
    state_.fences[change.fence] = {change.fence_token, change.updated_at_ns};
  }
  LeaseEntry& next = state_.leases[op.name];
  next.record = std::move(*decision.next);
  next.deadline_ns =
      next.record.released
          ? 0
          : steady_now +
                static_cast<std::int64_t>(next.record.ttl_ms) * 1000000;
  next.expiry_noticed = false;
  changes_.push_back(std::move(change));
}

}  // namespace fencepost::fence
