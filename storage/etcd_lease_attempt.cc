// EtcdLeaseAttempt: a group of lease operations read, decided and applied
// together (see the class comment).

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/etcd_lease_attempt.h"

#include "fence/errc.h"
#include "fence/rules.h"
#include "storage/errc.h"
#include "storage/etcd_json.h"
#include "storage/etcd_txn.h"

namespace fencepost::storage {

using fence::WriteOutcome;
using Json = http::JsonValue;
using LeaseVerdict = fence::LeaseOutcome::Verdict;

struct EtcdLeaseAttempt::HoldLease {
  etcd::Settled settled = etcd::Settled::kFailed;
  std::int64_t id = 0;       // the hold's etcd lease
  std::int64_t granted = 0;  // a new etcd lease for the hold
  std::int64_t revoke = 0;   // the etcd lease the hold leaves
};

struct EtcdLeaseAttempt::Op {
  Pending pending;
  StoredLease state;  // as read
  WriteOutcome outcome;
  EtcdLeaseRecords::Decision decision;
  HoldLease hold;
  std::int64_t now_ns = 0;

  const fence::LeaseOp& op() const {
    return std::get<fence::LeaseOp>(pending.write);
  }
  LeaseVerdict verdict() const { return outcome.lease->verdict; }
};

namespace {

void AnswerError(etcd::Pending& pending, std::error_code error) {
  WriteOutcome outcome;
  outcome.error = error;
  pending.done(std::move(outcome));
}

}  // namespace

EtcdLeaseAttempt::EtcdLeaseAttempt(EtcdSession& session,
                                   EtcdLeaseRecords& records,
                                   EtcdFenceCache& cache,
                                   EtcdRenewals& renewals)
    : session_(session),
      records_(records),
      cache_(cache),
      renewals_(renewals) {}

EtcdLeaseAttempt::~EtcdLeaseAttempt() = default;

Awaitable<std::optional<etcd::Conflict>> EtcdLeaseAttempt::Run(
    std::vector<Pending>& group, bool defer_limited, bool* limited) {
  co_await Decide(group, defer_limited, limited);
  if (!ops_.empty()) co_await AttachHolds(group);
  std::optional<etcd::Conflict> conflict;
  std::size_t counted_committed = 0;
  if (!ops_.empty()) {
    EtcdApi::Reply reply = co_await session_.Call("/v3/kv/txn", Txn());
    conflict = Answer(reply, group, &counted_committed);
  }
  // A refusal past the limit counted after grants of this group stands
  // once they all committed; else it is decided again.
  for (Op& op : over_limit_) {
    if (committed_ && counted_committed == counted_) {
      co_await Refuse(op);
    } else {
      group.push_back(std::move(op.pending));
      waiting_ = true;
    }
  }
  // Also left: grants deferred or waiting for the count, and renewals whose
  // etcd lease ran out.
  if (!group.empty() && !conflict) {
    conflict = waiting_ ? etcd::Conflict::kLeaseLimit : etcd::Conflict::kLease;
  }
  co_return conflict;
}

Awaitable<void> EtcdLeaseAttempt::Decide(std::vector<Pending>& group,
                                         bool defer_limited, bool* limited) {
  const std::size_t max_leases = session_.options().max_leases;
  std::vector<std::pair<std::string, std::string>> keys;
  bool count = false;
  for (const Pending& pending : group) {
    const auto& op = std::get<fence::LeaseOp>(pending.write);
    keys.emplace_back(op.name, op.fence);
    count =
        count || (max_leases > 0 && op.kind == fence::LeaseOp::Kind::kAcquire);
  }
  std::vector<StoredLease> states;
  std::vector<std::error_code> errors;
  const std::error_code error =
      co_await records_.ReadLeases(keys, &states, count, &errors);
  if (error) {
    for (Pending& pending : group) AnswerError(pending, error);
    group.clear();
    co_return;
  }
  const std::int64_t now_ns = EtcdSession::WallNowNs();
  std::vector<Pending> deferred;
  for (std::size_t i = 0; i < group.size(); ++i) {
    Op op;
    op.pending = std::move(group[i]);
    op.state = std::move(states[i]);
    op.now_ns = now_ns;
    const fence::LeaseOp& lease_op = op.op();
    if (errors[i] ||
        (op.state.record && op.state.record->fence != lease_op.fence)) {
      // Unreadable; or another replica granted it under other --fence-scope
      // settings: its hold is under that fence, so this replica would not
      // see it live.
      AnswerError(op.pending, errors[i] ? errors[i] : Errc::kScopeMismatch);
      continue;
    }
    // Known from now on when it holds its fence (EtcdRenewals).
    if (op.state.hold && op.state.hold->name == lease_op.name) {
      renewals_.Remember(lease_op.name, op.state);
    }
    // A grant counts after the grants of the group decided before it.
    if (op.state.holds) *op.state.holds += counted_;
    op.decision = EtcdLeaseRecords::Decide(lease_op, op.state, max_leases,
                                           now_ns, &op.outcome);
    if (!op.decision.next) {
      if (counted_ > 0 && op.outcome.lease &&
          op.outcome.lease->verdict == LeaseVerdict::kTooManyLeases) {
        over_limit_.push_back(std::move(op));
      } else {
        co_await Refuse(op);
      }
      continue;
    }
    if (op.decision.limited) {
      *limited = true;
      if (defer_limited) {
        deferred.push_back(std::move(op.pending));
        waiting_ = true;
        continue;
      }
      ++counted_;
      read_revision_ = op.state.read_revision;
    }
    ops_.push_back(std::move(op));
  }
  group = std::move(deferred);
}

Awaitable<void> EtcdLeaseAttempt::Refuse(Op& op) {
  // A refusal changes nothing, but notices a lease that ran out.
  if (!op.outcome.error && op.decision.unnoticed) {
    const bool noticed = co_await records_.NoticeExpiry(op.op().name, op.state);
    if (noticed) op.outcome.lease->expired = *op.state.record;
  }
  op.pending.done(std::move(op.outcome));
}

Awaitable<void> EtcdLeaseAttempt::AttachHolds(std::vector<Pending>& group) {
  std::vector<Awaitable<void>> calls;
  for (Op& op : ops_) {
    if (op.verdict() == LeaseVerdict::kReleased) {
      op.hold.settled = etcd::Settled::kDone;  // it leaves its hold
    } else
      calls.push_back(AttachHold(op));
  }
  co_await session_.AllAtOnce(std::move(calls));
  std::vector<Op> attached;
  for (Op& op : ops_) {
    if (op.hold.settled == etcd::Settled::kFailed) {
      AnswerError(op.pending, Errc::kStoreUnavailable);
    } else if (op.hold.settled == etcd::Settled::kConflict) {
      group.push_back(std::move(op.pending));  // its etcd lease ran out
    } else {
      attached.push_back(std::move(op));
    }
  }
  ops_ = std::move(attached);
}

Awaitable<void> EtcdLeaseAttempt::AttachHold(Op& op) {
  const etcd::Hold* hold = op.state.hold ? &*op.state.hold : nullptr;
  const fence::LeaseRecord& next = *op.decision.next;
  if (op.verdict() == LeaseVerdict::kRenewed &&
      EtcdLeaseRecords::KeepsHold(op.op(), op.state, next)) {
    // etcd restarts the lease's TTL from when it sees this. The etcd
    // lease is this lease's own (each grant gets a new one), so the
    // keep-alive extends nobody else's; if the hold changed meanwhile,
    // the compare fails and nothing is renewed.
    op.hold.settled = co_await session_.KeepLeaseAlive(hold->etcd_lease);
    op.hold.id = hold->etcd_lease;
    co_return;
  }
  op.hold.id = op.hold.granted =
      co_await session_.GrantLease(etcd::EtcdSeconds(next.ttl_ms));
  if (op.hold.id == 0) co_return;  // kFailed
  op.hold.settled = etcd::Settled::kDone;
  if (hold != nullptr) op.hold.revoke = hold->etcd_lease;
}

std::string EtcdLeaseAttempt::Txn() const {
  etcd::Txn txn;
  for (const Op& op : ops_) {
    records_.AddChange(txn, op.op(), op.state, *op.decision.next, op.verdict(),
                       op.hold.id, op.now_ns);
  }
  // --max-leases: no hold created since the count.
  if (counted_ > 0) {
    txn.If(etcd::CompareCreatedBefore(session_.HoldKey(""),
                                      etcd::PrefixEnd(session_.HoldKey("")),
                                      read_revision_ + 1));
  }
  return txn.Json();
}

std::optional<etcd::Conflict> EtcdLeaseAttempt::Answer(
    const EtcdApi::Reply& reply, std::vector<Pending>& group,
    std::size_t* counted_committed) {
  if (!reply.ok) {
    // Unknown: it may be applied. A holder that asks again renews it.
    for (Op& op : ops_) {
      renewals_.Forget(op.op().name);
      AnswerError(op.pending, Errc::kStoreUnavailable);
    }
    return std::nullopt;
  }
  if (!etcd::Succeeded(reply.json)) {
    const Json* responses = etcd::ResponsesOf(reply.json, 3 * ops_.size());
    std::optional<etcd::Conflict> conflict;
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      Op& op = ops_[i];
      session_.RevokeLease(op.hold.granted);
      renewals_.Forget(op.op().name);
      StoredLease now;
      const bool read = responses != nullptr &&
                        !EtcdLeaseRecords::StateOf(*responses, 3 * i, &now);
      const std::optional<etcd::Conflict> changed =
          EtcdLeaseRecords::Changed(op.op(), op.state, read ? &now : nullptr);
      // A lease changed, else a fence, else the count's compare failed.
      if (changed && conflict != etcd::Conflict::kLease) conflict = changed;
      group.push_back(std::move(op.pending));
    }
    return conflict.value_or(counted_ > 0 ? etcd::Conflict::kLeaseLimit
                                          : etcd::Conflict::kLease);
  }
  committed_ = true;
  const std::int64_t revision = etcd::RevisionOf(reply.json);
  for (Op& op : ops_) {
    if (op.decision.limited) ++*counted_committed;
    const fence::LeaseOp& lease_op = op.op();
    const fence::LeaseRecord& next = *op.decision.next;
    session_.RevokeLease(op.verdict() == LeaseVerdict::kReleased
                             ? op.state.hold->etcd_lease
                             : op.hold.revoke);
    // What this replica now knows of the lease (EtcdRenewals).
    if (op.verdict() == LeaseVerdict::kReleased) {
      renewals_.Forget(lease_op.name);
    } else {
      const bool granted = op.verdict() == LeaseVerdict::kGranted;
      if (granted) {
        cache_.CacheFence(lease_op.fence, next.token, op.now_ns, revision);
      }
      StoredLease after = EtcdLeaseRecords::After(
          lease_op, op.state, next, granted, op.hold.id, op.now_ns, revision);
      renewals_.Remember(lease_op.name, std::move(after));
    }
    if (op.decision.unnoticed) op.outcome.lease->expired = *op.state.record;
    op.pending.done(std::move(op.outcome));
  }
  return std::nullopt;
}

}  // namespace fencepost::storage
