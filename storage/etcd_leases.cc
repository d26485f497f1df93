// EtcdLeases: leases (see the class comment). The rules are
// fence::DecideLease's; here the hold in etcd decides whether a lease is
// live, and each decision becomes one transaction that compares
// everything it was decided on.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/etcd_leases.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <functional>

#include "fence/errc.h"
#include "fence/fold.h"
#include "fence/rules.h"
#include "storage/errc.h"
#include "storage/etcd_json.h"
#include "storage/etcd_paging.h"
#include "storage/etcd_txn.h"

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;
using Json = http::JsonValue;
using LeaseVerdict = fence::LeaseOutcome::Verdict;

namespace {

// A failure of a lease operation's transaction: nothing is decided.
WriteOutcome Unavailable() {
  WriteOutcome outcome;
  outcome.error = Errc::kStoreUnavailable;
  return outcome;
}

// What a lease operation's failed compare found changed since `state` was
// read, from its failure branch's reads (the record, the hold, the fence);
// else the compare that failed was the count's (`limited`).
etcd::Conflict ConflictOf(const fence::LeaseOp& op,
                          const EtcdLeaseRecords::StoredLease& state,
                          const Json& answer, bool limited) {
  EtcdLeaseRecords::StoredLease now;
  const Json* responses = etcd::ResponsesOf(answer, 3);
  const bool read =
      responses != nullptr && !EtcdLeaseRecords::StateOf(*responses, 0, &now);
  return EtcdLeaseRecords::Changed(op, state, read ? &now : nullptr)
      .value_or(limited ? etcd::Conflict::kLeaseLimit : etcd::Conflict::kLease);
}

// The state a granting or renewing transaction left: `next`, its hold
// attached to the etcd lease `at.etcd_lease`, at the transaction's revision
// (and a grant's fence raised to its token).
struct CommitPoint {
  std::int64_t etcd_lease, deadline_ns, now_ns, revision;
};
EtcdLeaseRecords::StoredLease Committed(
    const fence::LeaseOp& op, const EtcdLeaseRecords::StoredLease& state,
    const fence::LeaseRecord& next, bool granted, const CommitPoint& at) {
  EtcdLeaseRecords::StoredLease after = state;
  after.record = next;
  after.hold = etcd::Hold{next.token, at.deadline_ns, op.name, next.holder,
                          at.etcd_lease};
  after.record_revision = after.hold_revision = at.revision;
  after.noticed = false;
  if (granted) after.fence = {next.token, at.now_ns, at.revision};
  return after;
}

}  // namespace

void EtcdLeases::Enqueue(Pending pending) {
  const auto& op = std::get<fence::LeaseOp>(pending.write);
  if (op.kind == fence::LeaseOp::Kind::kAcquire && renewals_.Knows(op.name)) {
    renewals_.Enqueue(std::move(pending));
  } else {
    SettleAlone(std::move(pending));
  }
}

void EtcdLeases::SettleAlone(Pending pending) {
  // Beside the writes' transactions: each lease operation is settled
  // alone, by one of a few workers (their compares order them).
  leases_.push_back(std::move(pending));
  if (lease_workers_ < kLeaseWorkers) {
    ++lease_workers_;
    asio::co_spawn(session_.io(), SettleLeases(), asio::detached);
  }
}

Awaitable<void> EtcdLeases::SettleLeases() {
  while (!leases_.empty()) {
    Pending pending = std::move(leases_.front());
    leases_.pop_front();
    co_await SettleLease(std::move(pending));
  }
  --lease_workers_;
}

Awaitable<void> EtcdLeases::SettleLimited() {
  while (!grant_lane_.empty()) {
    Pending pending = std::move(grant_lane_.front());
    grant_lane_.pop_front();
    co_await SettleLease(std::move(pending), /*in_lane=*/true);
  }
  lane_running_ = false;
}

Awaitable<void> EtcdLeases::SettleLease(Pending pending, bool in_lane) {
  const std::function<void(std::string_view)>& on_retry =
      session_.options().on_retry;
  WriteOutcome outcome;
  Settled settled = Settled::kConflict;
  Tried tried;
  for (int attempt = 0;
       attempt < kAloneAttempts && settled == Settled::kConflict; ++attempt) {
    if (attempt > 0 && on_retry) on_retry(etcd::ConflictName(tried.conflict));
    outcome = WriteOutcome();
    tried = Tried();
    // While the lane runs, every grant it would race goes there instead.
    const bool defer = !in_lane && lane_running_;
    settled = co_await TryLease(std::get<fence::LeaseOp>(pending.write),
                                &outcome, defer, &tried);
    if (settled == Settled::kConflict && tried.limited && !in_lane) {
      // A failed compare: the lane's first attempt is its retry.
      if (!defer && on_retry) on_retry(etcd::ConflictName(tried.conflict));
      // Grants racing here for the holds' compare: one at a time from now.
      grant_lane_.push_back(std::move(pending));
      if (!lane_running_) {
        lane_running_ = true;
        asio::co_spawn(session_.io(), SettleLimited(), asio::detached);
      }
      co_return;
    }
  }
  if (settled == Settled::kConflict) {
    outcome = WriteOutcome();
    outcome.error = fence::Errc::kOverloaded;
  }
  pending.done(std::move(outcome));
}

Awaitable<etcd::Settled> EtcdLeases::TryLease(const fence::LeaseOp& op,
                                              WriteOutcome* outcome,
                                              bool defer_limited,
                                              Tried* tried) {
  StoredLease state;
  const bool count_holds = session_.options().max_leases > 0 &&
                           op.kind == fence::LeaseOp::Kind::kAcquire;
  if (std::error_code error =
          co_await records_.ReadLease(op.name, op.fence, &state, count_holds)) {
    outcome->error = error;
    co_return Settled::kFailed;
  }
  if (state.record && state.record->fence != op.fence) {
    // Another replica granted it under other --fence-scope settings: its
    // hold is under that fence, so this replica would not see it live.
    outcome->error = Errc::kScopeMismatch;
    co_return Settled::kFailed;
  }
  // Known from now on when it holds its fence (EtcdRenewals).
  if (state.hold && state.hold->name == op.name) {
    renewals_.Remember(op.name, state);
  }
  const std::int64_t now_ns = EtcdSession::WallNowNs();
  const EtcdLeaseRecords::Decision decision = EtcdLeaseRecords::Decide(
      op, state, session_.options().max_leases, now_ns, outcome);
  if (!decision.next) {
    if (outcome->error) co_return Settled::kFailed;
    // A refusal changes nothing, but notices a lease that ran out.
    if (decision.unnoticed && co_await records_.NoticeExpiry(op.name, state)) {
      outcome->lease->expired = *state.record;
    }
    co_return Settled::kDone;
  }
  tried->limited = decision.limited;
  if (tried->limited && defer_limited) co_return Settled::kConflict;
  const Settled settled =
      co_await CommitLease(op, state, *decision.next, outcome, now_ns, tried);
  if (settled == Settled::kDone && decision.unnoticed) {
    outcome->lease->expired = *state.record;
  }
  co_return settled;
}

Awaitable<etcd::Settled> EtcdLeases::CommitLease(const fence::LeaseOp& op,
                                                 const StoredLease& state,
                                                 const fence::LeaseRecord& next,
                                                 WriteOutcome* outcome,
                                                 std::int64_t now_ns,
                                                 Tried* tried) {
  const LeaseVerdict verdict = outcome->lease->verdict;
  const std::string lease_key = session_.LeaseKey(op.name);
  const std::string hold_key = session_.HoldKey(op.fence);
  // Every transaction compares the record and the hold as read; an acquire
  // also the fence, since a renewal keeps its token only while the fence
  // is not above it.
  etcd::Txn txn;
  txn.If(etcd::CompareMod(lease_key, state.record_revision))
      .If(etcd::CompareMod(hold_key, state.hold_revision));
  if (op.kind == fence::LeaseOp::Kind::kAcquire) {
    txn.If(etcd::CompareMod(session_.FenceKey(op.fence),
                            state.fence.mod_revision));
  }
  if (tried->limited) {
    txn.If(etcd::CompareCreatedBefore(session_.HoldKey(""),
                                      etcd::PrefixEnd(session_.HoldKey("")),
                                      state.read_revision + 1));
  }
  txn.Then(etcd::PutOp(lease_key, etcd::FormatLease(next, false)));
  // On failure, what changed (the retry's cause).
  txn.Else(etcd::RangeOp(lease_key))
      .Else(etcd::RangeOp(hold_key))
      .Else(etcd::RangeOp(session_.FenceKey(op.fence)));
  HoldLease hold;
  const std::int64_t deadline_ns =
      now_ns + static_cast<std::int64_t>(next.ttl_ms) * 1000000;
  if (verdict == LeaseVerdict::kReleased) {
    txn.Then(etcd::DeleteOp(hold_key));
    hold.revoke = state.hold->etcd_lease;
  } else {
    hold =
        co_await AttachHold(op, state, next, verdict == LeaseVerdict::kRenewed);
    if (hold.settled != Settled::kDone) {
      if (hold.settled == Settled::kFailed) *outcome = Unavailable();
      co_return hold.settled;
    }
    if (verdict == LeaseVerdict::kGranted) {
      txn.Then(etcd::PutOp(session_.FenceKey(op.fence),
                           etcd::FormatFence(next.token, now_ns)));
    }
    txn.Then(etcd::PutOp(
        hold_key,
        etcd::FormatHold(next.token, deadline_ns, op.name, next.holder),
        {.lease = hold.id}));
  }
  EtcdApi::Reply reply = co_await session_.Call("/v3/kv/txn", txn.Json());
  if (!reply.ok || !etcd::Succeeded(reply.json)) renewals_.Forget(op.name);
  if (!reply.ok) {
    // Unknown: it may be applied. A holder that asks again renews it.
    *outcome = Unavailable();
    co_return Settled::kFailed;
  }
  if (!etcd::Succeeded(reply.json)) {
    session_.RevokeLease(hold.granted);
    tried->conflict = ConflictOf(op, state, reply.json, tried->limited);
    co_return Settled::kConflict;
  }
  ++transactions_;
  session_.RevokeLease(hold.revoke);
  const std::int64_t revision = etcd::RevisionOf(reply.json);
  if (verdict == LeaseVerdict::kGranted) {
    cache_.CacheFence(op.fence, next.token, now_ns, revision);
  }
  // What this replica now knows of the lease (EtcdRenewals).
  if (verdict == LeaseVerdict::kReleased) {
    renewals_.Forget(op.name);
  } else {
    renewals_.Remember(
        op.name, Committed(op, state, next, verdict == LeaseVerdict::kGranted,
                           {hold.id, deadline_ns, now_ns, revision}));
  }
  co_return Settled::kDone;
}

Awaitable<EtcdLeases::HoldLease> EtcdLeases::AttachHold(
    const fence::LeaseOp& op, const StoredLease& state,
    const fence::LeaseRecord& next, bool renewed) {
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  HoldLease out;
  if (renewed && EtcdLeaseRecords::KeepsHold(op, state, next)) {
    // etcd restarts the lease's TTL from when it sees this. The etcd
    // lease is this lease's own (each grant gets a new one), so the
    // keep-alive extends nobody else's; if the hold changed meanwhile,
    // the compare fails and nothing is renewed.
    out.settled = co_await session_.KeepLeaseAlive(hold->etcd_lease);
    out.id = hold->etcd_lease;
    co_return out;
  }
  out.id = out.granted =
      co_await session_.GrantLease(etcd::EtcdSeconds(next.ttl_ms));
  if (out.id == 0) {
    out.settled = Settled::kFailed;
    co_return out;
  }
  if (hold != nullptr) out.revoke = hold->etcd_lease;
  co_return out;
}

Awaitable<Fences::LeaseRead> EtcdLeases::GetLease(std::string name,
                                                  std::string fence) {
  Fences::LeaseRead out;
  StoredLease state;
  out.error = co_await records_.ReadLease(name, fence, &state);
  if (state.hold && state.hold->name != name) state.hold.reset();
  out.now_ns = fence::SteadyNowNs();
  if (out.error || !state.record) co_return out;
  if (state.record->fence != fence) {
    out.error = Errc::kScopeMismatch;
    co_return out;
  }
  out.entry = EtcdLeaseRecords::EntryOf(state, out.now_ns);
  if (fence::IsLive(*out.entry, out.now_ns) || state.record->released ||
      state.noticed) {
    co_return out;
  }
  const bool noticed = co_await records_.NoticeExpiry(name, state);
  if (noticed) {
    out.expired = *state.record;
    tell_(LeaseExpired(name, *out.expired, out.now_ns));
  }
  co_return out;
}

Awaitable<Fences::LeaseList> EtcdLeases::ListLeases(std::string prefix,
                                                    std::string after,
                                                    std::size_t limit) {
  Fences::LeaseList out;
  const std::string base = session_.LeaseKey("");
  std::optional<etcd::Page> page =
      co_await session_.ReadPage(base, prefix, after, limit, &out.error);
  if (!page) co_return out;
  NamedLeases leases;
  for (etcd::PageItem& item : page->items) {
    StoredLease state;
    fence::LeaseRecord record;
    if (!etcd::ParseLease(item.value, &record, &state.noticed)) {
      out.error = fence::Errc::kStorage;
      co_return out;
    }
    state.record = std::move(record);
    state.record_revision = item.mod_revision;
    leases.emplace_back(std::move(item.name), std::move(state));
  }
  out.error = co_await records_.ReadHolds(leases);
  if (out.error) co_return out;
  out.now_ns = fence::SteadyNowNs();
  // A listing notices a few expiries (one transaction each), and none after
  // one that did not take: a read must not wait on many writes.
  int notices = 16;
  for (auto& [name, state] : leases) {
    fence::LeaseEntry entry = EtcdLeaseRecords::EntryOf(state, out.now_ns);
    if (!fence::IsLive(entry, out.now_ns) && !entry.record.released &&
        !state.noticed && notices > 0) {
      const bool noticed = co_await records_.NoticeExpiry(name, state);
      if (noticed) {
        tell_(LeaseExpired(name, entry.record, out.now_ns));
        out.expired.emplace_back(name, entry.record);
        --notices;
      } else {
        notices = 0;
      }
    }
    out.leases.emplace_back(name, std::move(entry));
  }
  if (page->more && !out.leases.empty()) out.next = out.leases.back().first;
  co_return out;
}

}  // namespace fencepost::storage
