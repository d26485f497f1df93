#include "fence/rules.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "fence/errc.h"

namespace fencepost::fence {

using Verdict = WriteOutcome::Verdict;

WriteOutcome DecideWrite(const FencedWrite& write, std::optional<Token> fence,
                         std::int64_t fence_updated_at_ns, std::int64_t now_ns,
                         const ValueNow& value) {
  WriteOutcome out;
  out.previous = fence;
  out.current = fence;
  out.updated_at_ns = fence_updated_at_ns;
  if (write.token) out.decision = Decide(fence, *write.token);
  if (!out.decision.accepted && !write.observe) {
    out.verdict = Verdict::kRejected;
    return out;
  }
  if (!PreconditionHolds(write.precondition, value)) {
    out.verdict = Verdict::kPreconditionFailed;
    out.decision.advances = false;
    if (value.exists) out.etag = value.tag;
    return out;
  }
  if (out.decision.accepted) {
    out.verdict = Verdict::kAccepted;
    out.current = *write.token;
    if (out.decision.creates || out.decision.advances)
      out.updated_at_ns = now_ns;
  } else {
    out.verdict = Verdict::kObserved;
  }
  return out;
}

namespace {

bool Listed(const std::vector<std::string>& tags, const std::string& tag) {
  return std::find(tags.begin(), tags.end(), tag) != tags.end();
}

}  // namespace

bool PreconditionHolds(const Precondition& precondition,
                       const ValueNow& value) {
  if (precondition.has_match &&
      !(value.exists &&
        (precondition.match_any || Listed(precondition.match, value.tag)))) {
    return false;
  }
  if (precondition.has_none_match && value.exists &&
      (precondition.none_match_any ||
       Listed(precondition.none_match, value.tag))) {
    return false;
  }
  return true;
}

bool NotModified(const Precondition& precondition, const ValueNow& value) {
  return precondition.has_none_match && value.exists &&
         (precondition.none_match_any ||
          Listed(precondition.none_match, value.tag));
}

WriteOutcome BatchOutcome(std::vector<WriteOutcome> outcomes) {
  WriteOutcome out;
  out.verdict = Verdict::kAccepted;
  for (const WriteOutcome& one : outcomes) {
    if (StopsBatch(one)) {
      out.verdict = one.verdict;
      out.error = one.error;
      break;
    }
    if (one.verdict == Verdict::kPreconditionFailed) {
      out.verdict = one.verdict;
    } else if (one.verdict == Verdict::kObserved &&
               out.verdict == Verdict::kAccepted) {
      out.verdict = Verdict::kObserved;
    }
  }
  out.batch = std::move(outcomes);
  return out;
}

std::size_t FirstNotApplied(const WriteOutcome& outcome) {
  if (outcome.verdict == Verdict::kRejected ||
      outcome.verdict == Verdict::kFailed) {
    return outcome.batch.empty() ? 0 : outcome.batch.size() - 1;
  }
  for (std::size_t i = 0; i < outcome.batch.size(); ++i) {
    if (!Applied(outcome.batch[i])) return i;
  }
  return outcome.batch.size();
}

int HeldSeconds(std::int64_t now_ns, std::int64_t until_ns) {
  if (now_ns >= until_ns) return 0;
  const std::int64_t ms = (until_ns - now_ns) / 1'000'000;
  return static_cast<int>(std::max<std::int64_t>((ms + 999) / 1000, 1));
}

std::optional<WriteOutcome> RejectWhileHeld(const FencedWrite& write,
                                            std::optional<Token> fence,
                                            std::int64_t fence_updated_at_ns) {
  WriteOutcome stale = DecideWrite(write, fence, fence_updated_at_ns, 0);
  if (stale.verdict != Verdict::kRejected) return std::nullopt;
  return stale;
}

WriteOutcome RecheckPrecondition(WriteOutcome committed,
                                 const Precondition& precondition,
                                 const ValueNow& now) {
  if (PreconditionHolds(precondition, now)) return committed;
  committed.verdict = Verdict::kPreconditionFailed;
  committed.etag = now.tag;
  return committed;
}

WriteOutcome AfterLanding(WriteOutcome committed, Landing landing,
                          std::error_code error) {
  if (landing == Landing::kApplied) return committed;
  committed.verdict = Verdict::kFailed;
  committed.error = error;
  return committed;
}

namespace {

bool HolderOfRecord(const LeaseOp& op, const LeaseState& state) {
  return state.record && !state.record->released &&
         state.record->holder == op.holder;
}

// A refusal: nothing changes (the fence stays at `fence`); `lease` says why.
LeaseDecision Refuse(LeaseOutcome lease, LeaseOutcome::Verdict verdict,
                     std::optional<Token> fence) {
  LeaseDecision d;
  d.outcome.previous = fence;
  d.outcome.current = fence;
  lease.verdict = verdict;
  d.outcome.verdict = Verdict::kRejected;
  d.outcome.lease = std::move(lease);
  return d;
}

// The record a grant to `op` makes, over `previous` (nullopt: the first).
LeaseRecord Granted(const LeaseOp& op,
                    const std::optional<LeaseRecord>& previous, Token token,
                    std::int64_t now_ns) {
  LeaseRecord next;
  next.holder = op.holder;
  next.fence = op.fence;
  next.token = token;
  next.ttl_ms = op.ttl_ms;
  next.acquired_at_ns = next.renewed_at_ns = now_ns;
  next.transitions = !previous ? 0
                               : previous->transitions +
                                     (previous->holder != op.holder ? 1 : 0);
  return next;
}

}  // namespace

LeaseDecision DecideLease(const LeaseOp& op, std::optional<Token> fence,
                          const LeaseState& state, std::int64_t now_ns) {
  using LeaseVerdict = LeaseOutcome::Verdict;
  const std::optional<LeaseRecord>& record = state.record;
  const bool holder_of_record = HolderOfRecord(op, state);
  LeaseOutcome lease;
  lease.existed = record.has_value();
  if (record) lease.lease = *record;

  if (state.over_limit && CountsAgainstLeaseLimit(op, state)) {
    return Refuse(std::move(lease), LeaseVerdict::kTooManyLeases, fence);
  }
  LeaseDecision d;
  d.outcome.previous = fence;
  d.outcome.current = fence;
  LeaseRecord next;
  if (op.kind == LeaseOp::Kind::kRelease) {
    if (!state.live || !holder_of_record || record->token != op.token) {
      return Refuse(std::move(lease), LeaseVerdict::kNotHeld, fence);
    }
    next = *record;
    next.released = true;
    lease.verdict = LeaseVerdict::kReleased;
  } else if (holder_of_record && fence.value_or(0) <= record->token &&
             !state.other) {
    next = *record;
    next.ttl_ms = op.ttl_ms;
    next.renewed_at_ns = now_ns;
    lease.verdict = LeaseVerdict::kRenewed;
  } else if (state.live && !holder_of_record) {
    lease.expires_in_ms = state.expires_in_ms;
    return Refuse(std::move(lease), LeaseVerdict::kDenied, fence);
  } else if (state.other) {
    lease.blocking_lease = state.other->name;
    lease.lease = state.other->record;
    lease.expires_in_ms = state.other->expires_in_ms;
    return Refuse(std::move(lease), LeaseVerdict::kDenied, fence);
  } else {
    const Token base =
        std::max(record ? record->token : Token{0}, fence.value_or(0));
    if (base == std::numeric_limits<Token>::max()) {
      d.outcome.error = Errc::kTokensExhausted;
      return d;
    }
    next = Granted(op, record, base + 1, now_ns);
    using Reason = LeaseOutcome::GrantReason;
    if (record) {
      lease.previous_holder = record->holder;
      lease.previous_expired =
          !record->released && !state.live && !holder_of_record;
      lease.reason = holder_of_record   ? Reason::kFenceAbove
                     : record->released ? Reason::kReleased
                                        : Reason::kExpired;
    }
    d.outcome.decision = Decide(fence, next.token);
    d.outcome.current = next.token;
    d.outcome.updated_at_ns = now_ns;
    lease.verdict = LeaseVerdict::kGranted;
  }
  d.outcome.verdict = Verdict::kAccepted;
  lease.lease = next;
  lease.expires_in_ms =
      next.released ? 0 : static_cast<std::int64_t>(next.ttl_ms);
  d.outcome.lease = std::move(lease);
  d.next = std::move(next);
  return d;
}

bool CountsAgainstLeaseLimit(const LeaseOp& op, const LeaseState& state) {
  return op.kind == LeaseOp::Kind::kAcquire && !HolderOfRecord(op, state) &&
         !state.live;
}

bool OverLeaseLimit(const LeaseOp& op, const LeaseState& state,
                    std::size_t held, std::size_t max_leases) {
  return CountsAgainstLeaseLimit(op, state) && held >= max_leases;
}

const std::string& RoutingFence(const FenceWrite& write) {
  static const std::string kNone;
  if (const auto* w = std::get_if<FencedWrite>(&write)) return w->fence;
  if (const auto* l = std::get_if<LeaseOp>(&write)) return l->fence;
  const auto& batch = std::get<Batch>(write);
  return batch.writes.empty() ? kNone : batch.writes.front().fence;
}

std::vector<std::string_view> LeaseChanges(const StoredLease* before,
                                           const StoredLease& after) {
  std::vector<std::string_view> changes;
  const LeaseRecord& now = after.record;
  const bool new_token = before == nullptr || now.token != before->record.token;
  const bool ended_unreleased =
      before != nullptr && !before->record.released && !before->noticed;
  if (after.noticed && !(before != nullptr && before->noticed)) {
    changes.push_back("expired");
    return changes;
  }
  if (now.released) {
    if (before == nullptr || !before->record.released) {
      changes.push_back("released");
    }
    return changes;
  }
  if (new_token) {
    if (ended_unreleased) changes.push_back("expired");
    changes.push_back("granted");
  } else if (now.renewed_at_ns != before->record.renewed_at_ns) {
    changes.push_back("renewed");
  }
  return changes;
}

}  // namespace fencepost::fence
