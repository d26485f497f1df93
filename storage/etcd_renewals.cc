// EtcdRenewals: renewals of known leases, a group to a transaction (see the
// class comment). The rules are fence::DecideLease's, as for every lease
// operation (EtcdLeases).

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/etcd_renewals.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <memory>

#include "fence/errc.h"
#include "fence/rules.h"
#include "storage/errc.h"
#include "storage/etcd_json.h"
#include "storage/etcd_txn.h"

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;
using Json = http::JsonValue;

struct EtcdRenewals::Planned {
  Pending pending;
  StoredLease state;        // as decided on
  fence::LeaseRecord next;  // the record renewed
  std::int64_t now_ns = 0;  // when it was decided (wall clock)
  WriteOutcome outcome;     // the renewal's answer
  etcd::Settled kept = etcd::Settled::kFailed;  // its etcd lease's keep-alive

  const fence::LeaseOp& op() const {
    return std::get<fence::LeaseOp>(pending.write);
  }
  std::int64_t etcd_lease() const { return state.hold->etcd_lease; }
};

void EtcdRenewals::Enqueue(Pending pending) {
  queue_.push_back(std::move(pending));
  if (runners_ < kRunners) {
    ++runners_;
    asio::co_spawn(session_.io(), Run(), asio::detached);
  }
}

void EtcdRenewals::Remember(const std::string& name, StoredLease state) {
  // Bounded: past it, one lease known is forgotten (read again).
  if (known_.size() >= kKnownLeases && !known_.count(name)) {
    known_.erase(known_.begin());
  }
  state.holds.reset();
  known_[name] = std::move(state);
}

Awaitable<void> EtcdRenewals::Run() {
  while (!queue_.empty()) {
    std::vector<Pending> group =
        etcd::TakeLeaseGroup(queue_, kGroupLeases, kGroupScan, in_flight_);
    if (group.empty()) break;  // the rest wait for the group in flight
    std::vector<std::pair<std::string, std::string>> taken;
    for (const Pending& pending : group) {
      const auto& op = std::get<fence::LeaseOp>(pending.write);
      taken.emplace_back(op.name, op.fence);
      in_flight_.names.insert(op.name);
      in_flight_.fences.insert(op.fence);
    }
    co_await Settle(std::move(group));
    for (const auto& [name, fence] : taken) {
      in_flight_.names.erase(name);
      in_flight_.fences.erase(fence);
    }
  }
  --runners_;
}

Awaitable<void> EtcdRenewals::Settle(std::vector<Pending> group) {
  for (int attempt = 0; attempt < kGroupAttempts && !group.empty(); ++attempt) {
    const std::optional<etcd::Conflict> conflict = co_await TryOnce(group);
    if (conflict) session_.Retried(*conflict);
  }
  // Contended: each alone, read afresh.
  for (Pending& pending : group) alone_(std::move(pending));
}

std::optional<EtcdRenewals::Planned> EtcdRenewals::Decide(
    const Pending& pending, std::int64_t now_ns) {
  const auto& op = std::get<fence::LeaseOp>(pending.write);
  auto it = known_.find(op.name);
  if (it == known_.end()) return std::nullopt;
  const StoredLease& state = it->second;
  if (!state.record || state.record->fence != op.fence) return std::nullopt;
  // A renewal never counts against --max-leases: no count is needed.
  WriteOutcome outcome;
  const EtcdLeaseRecords::Decision decision =
      EtcdLeaseRecords::Decide(op, state, 0, now_ns, &outcome);
  if (!decision.next ||
      outcome.lease->verdict != fence::LeaseOutcome::Verdict::kRenewed) {
    return std::nullopt;
  }
  if (!EtcdLeaseRecords::KeepsHold(op, state, *decision.next)) {
    return std::nullopt;
  }
  Planned planned;
  planned.state = state;
  planned.next = *decision.next;
  planned.now_ns = now_ns;
  planned.outcome = std::move(outcome);
  return planned;
}

Awaitable<std::optional<etcd::Conflict>> EtcdRenewals::TryOnce(
    std::vector<Pending>& group) {
  std::vector<Planned> planned = Plan(group);
  if (planned.empty()) co_return std::nullopt;
  // The keep-alives go beside the transaction: each etcd lease is its
  // lease's own, so one whose compare fails extends nobody else's.
  EtcdApi::Reply reply;
  std::vector<Awaitable<void>> calls;
  calls.push_back(Commit(session_, TxnOf(planned), reply));
  for (Planned& p : planned) calls.push_back(KeepAlive(session_, p));
  co_await session_.AllAtOnce(std::move(calls));
  co_return Answer(planned, reply, group);
}

std::vector<EtcdRenewals::Planned> EtcdRenewals::Plan(
    std::vector<Pending>& group) {
  const std::int64_t now_ns = EtcdSession::WallNowNs();
  std::vector<Planned> planned;
  for (Pending& pending : group) {
    std::optional<Planned> one = Decide(pending, now_ns);
    if (!one) {
      alone_(std::move(pending));
      continue;
    }
    one->pending = std::move(pending);
    planned.push_back(std::move(*one));
  }
  group.clear();
  return planned;
}

std::string EtcdRenewals::TxnOf(const std::vector<Planned>& planned) const {
  etcd::Txn txn;
  for (const Planned& p : planned) {
    records_.AddChange(txn, p.op(), p.state, p.next,
                       fence::LeaseOutcome::Verdict::kRenewed, p.etcd_lease(),
                       p.now_ns);
  }
  return txn.Json();
}

Awaitable<void> EtcdRenewals::Commit(EtcdSession& session, std::string txn,
                                     EtcdApi::Reply& reply) {
  reply = co_await session.Call("/v3/kv/txn", std::move(txn));
}

Awaitable<void> EtcdRenewals::KeepAlive(EtcdSession& session, Planned& p) {
  p.kept = co_await session.KeepLeaseAlive(p.etcd_lease());
}

std::optional<etcd::Conflict> EtcdRenewals::Answer(
    std::vector<Planned>& planned, const EtcdApi::Reply& reply,
    std::vector<Pending>& group) {
  const bool success = reply.ok && etcd::Succeeded(reply.json);
  const Json* responses =
      reply.ok ? etcd::ResponsesOf(reply.json, success ? 2 * planned.size()
                                                       : 3 * planned.size())
               : nullptr;
  if (responses == nullptr) {
    // Unknown: it may be applied. A holder that asks again renews it.
    for (Planned& p : planned) {
      const auto& op = std::get<fence::LeaseOp>(p.pending.write);
      known_.erase(op.name);
      WriteOutcome outcome;
      outcome.error = Errc::kStoreUnavailable;
      if (reply.ok) outcome.error = fence::Errc::kStorage;
      p.pending.done(std::move(outcome));
    }
    return std::nullopt;
  }
  if (!success) {
    // The renewals whose lease changed go alone, decided afresh; the others
    // are decided again at once.
    std::optional<etcd::Conflict> conflict;
    for (std::size_t i = 0; i < planned.size(); ++i) {
      Planned& p = planned[i];
      const auto& op = std::get<fence::LeaseOp>(p.pending.write);
      StoredLease now;
      const bool read = !EtcdLeaseRecords::StateOf(*responses, 3 * i, &now);
      const std::optional<etcd::Conflict> changed =
          EtcdLeaseRecords::Changed(op, p.state, read ? &now : nullptr);
      if (!changed) {
        group.push_back(std::move(p.pending));
        continue;
      }
      // The group's cause: a lease changed, else a fence.
      if (conflict != etcd::Conflict::kLease) conflict = changed;
      known_.erase(op.name);
      alone_(std::move(p.pending));
    }
    return conflict.value_or(etcd::Conflict::kLease);
  }
  ++transactions_;
  const std::int64_t revision = etcd::RevisionOf(reply.json);
  for (Planned& p : planned) {
    const auto& op = std::get<fence::LeaseOp>(p.pending.write);
    if (p.kept != etcd::Settled::kDone) {
      known_.erase(op.name);
      if (p.kept == etcd::Settled::kConflict) {
        // Its etcd lease ran out: the hold is gone; decided afresh.
        alone_(std::move(p.pending));
      } else {
        WriteOutcome outcome;
        outcome.error = Errc::kStoreUnavailable;
        p.pending.done(std::move(outcome));
      }
      continue;
    }
    known_[op.name] = EtcdLeaseRecords::After(
        op, p.state, p.next, false, p.etcd_lease(), p.now_ns, revision);
    p.pending.done(std::move(p.outcome));
  }
  return std::nullopt;
}

}  // namespace fencepost::storage
