// EtcdFences: leases (see the class comment). The rules are
// fence::DecideLease's; here the hold in etcd decides whether a lease is
// live, and each decision becomes one transaction that compares
// everything it was decided on.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "fence/errc.h"
#include "fence/fold.h"
#include "fence/rules.h"
#include "storage/errc.h"
#include "storage/etcd_fences.h"
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

// What the fold of one lease operation reads: the fence read with the lease,
// the lease as its hold tells it (`rules`), and --max-leases over the holds
// counted with it (`holds`, set for an acquire when there is a limit).
// Nothing to take: the transaction compares everything it was decided on.
class LeaseLoads : public fence::Fold::Source {
 public:
  LeaseLoads(const etcd::Seen& fence, const fence::LeaseState& rules,
             std::optional<std::size_t> holds, std::size_t max_leases)
      : fence_(fence), rules_(rules), holds_(holds), max_leases_(max_leases) {}

  // Whether the operation counted against --max-leases (OverLeaseLimit).
  bool limited() const { return limited_; }

  std::error_code LoadFence(const std::string&, fence::FenceNow* now) override {
    *now = {fence_.token, fence_.updated_at_ns};
    return {};
  }
  std::error_code LoadValue(const std::string&, bool,
                            fence::ValueNow*) override {
    return {};  // a lease operation has no value
  }
  fence::LeaseState LoadLease(const fence::LeaseOp&, std::int64_t,
                              std::optional<fence::LeaseRecord>*) override {
    fence::LeaseState state = rules_;
    state.other.reset();
    return state;
  }
  std::optional<fence::LeaseState::Blocking> LiveOnFence(
      const fence::LeaseOp&, std::int64_t) override {
    return rules_.other;
  }
  bool OverLeaseLimit(const fence::LeaseOp& op, const fence::LeaseState& state,
                      std::int64_t) override {
    limited_ = holds_ && fence::CountsAgainstLeaseLimit(op, state);
    return limited_ && fence::OverLeaseLimit(op, state, *holds_, max_leases_);
  }
  std::error_code Admit(fence::Change&, std::size_t, WriteOutcome*) override {
    return {};
  }

 private:
  const etcd::Seen& fence_;
  const fence::LeaseState& rules_;
  const std::optional<std::size_t> holds_;
  const std::size_t max_leases_;
  bool limited_ = false;
};

}  // namespace

Awaitable<std::error_code> EtcdFences::ReadLease(const std::string& name,
                                                 const std::string& fence_name,
                                                 StoredLease* state,
                                                 bool count_holds) {
  etcd::Txn reads;
  reads.Then(etcd::RangeOp(LeaseKey(name)))
      .Then(etcd::RangeOp(HoldKey(fence_name)))
      .Then(etcd::RangeOp(FenceKey(fence_name)));
  if (count_holds) {
    reads.Then(etcd::CountOp(HoldKey(""), etcd::PrefixEnd(HoldKey(""))));
  }
  EtcdApi::Reply reply = co_await Call("/v3/kv/txn", reads.Json(), true);
  if (!reply.ok) co_return Errc::kStoreUnavailable;
  const Json* responses = etcd::ResponsesOf(reply.json, reads.success_ops());
  if (responses == nullptr) co_return fence::Errc::kStorage;
  if (count_holds) {
    const std::int64_t holds = etcd::RangeCountAt(*responses, 3);
    if (holds < 0) co_return fence::Errc::kStorage;
    state->holds = static_cast<std::size_t>(holds);
    state->read_revision = etcd::RevisionOf(reply.json);
  }
  const Json* kv[3] = {nullptr, nullptr, nullptr};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::vector<Json>* kvs = etcd::RangeKvsAt(*responses, i);
    if (kvs == nullptr || kvs->size() > 1) co_return fence::Errc::kStorage;
    if (!kvs->empty()) kv[i] = &(*kvs)[0];
  }
  std::string text;
  if (kv[0] != nullptr) {
    fence::LeaseRecord record;
    if (!etcd::BytesOf(*kv[0], "value", &text) ||
        !etcd::ParseLease(text, &record, &state->noticed)) {
      co_return fence::Errc::kStorage;
    }
    state->record = std::move(record);
    state->record_revision = etcd::Int64Of(kv[0]->Find("mod_revision"));
  }
  if (kv[1] != nullptr) {
    Hold hold;
    if (!etcd::HoldOf(*kv[1], &hold)) co_return fence::Errc::kStorage;
    state->hold = std::move(hold);
    state->hold_revision = etcd::Int64Of(kv[1]->Find("mod_revision"));
  }
  if (kv[2] != nullptr && !etcd::SeenOf(*kv[2], &state->fence)) {
    co_return fence::Errc::kStorage;
  }
  co_return std::error_code();
}

Awaitable<std::int64_t> EtcdFences::GrantEtcdLease(std::uint64_t ttl_ms) {
  EtcdApi::Reply reply = co_await Call(
      "/v3/lease/grant", etcd::LeaseTtl(etcd::EtcdSeconds(ttl_ms)));
  if (!reply.ok) co_return 0;
  const std::int64_t id = etcd::Int64Of(reply.json.Find("ID"));
  co_return id > 0 ? id : 0;
}

void EtcdFences::RevokeEtcdLease(std::int64_t id) {
  if (id <= 0) return;
  // Best effort: an etcd lease left behind runs out by itself.
  asio::co_spawn(io_, Call("/v3/lease/revoke", etcd::LeaseId(id)),
                 asio::detached);
}

Awaitable<void> EtcdFences::SettleLeases() {
  while (!leases_.empty()) {
    Pending pending = std::move(leases_.front());
    leases_.pop_front();
    co_await SettleLease(std::move(pending));
  }
  --lease_workers_;
}

Awaitable<void> EtcdFences::SettleLease(Pending pending) {
  WriteOutcome outcome;
  Settled settled = Settled::kConflict;
  for (int attempt = 0;
       attempt < kAloneAttempts && settled == Settled::kConflict; ++attempt) {
    if (attempt > 0 && options_.on_retry) options_.on_retry();
    outcome = WriteOutcome();
    settled =
        co_await TryLease(std::get<fence::LeaseOp>(pending.write), &outcome);
  }
  if (settled == Settled::kConflict) {
    outcome = WriteOutcome();
    outcome.error = fence::Errc::kOverloaded;
  }
  pending.done(std::move(outcome));
}

Awaitable<EtcdFences::Settled> EtcdFences::TryLease(const fence::LeaseOp& op,
                                                    WriteOutcome* outcome) {
  StoredLease state;
  const bool count_holds =
      options_.max_leases > 0 && op.kind == fence::LeaseOp::Kind::kAcquire;
  if (std::error_code error =
          co_await ReadLease(op.name, op.fence, &state, count_holds)) {
    outcome->error = error;
    co_return Settled::kFailed;
  }
  if (state.record && state.record->fence != op.fence) {
    // Another replica granted it under other --fence-scope settings: its
    // hold is under that fence, so this replica would not see it live.
    outcome->error = Errc::kScopeMismatch;
    co_return Settled::kFailed;
  }
  const std::int64_t now_ns = WallNowNs();
  const fence::LeaseState rules = RulesView(op, state, now_ns);
  // The lease ran out and no replica has counted it yet: the transaction
  // that changes its record counts it (its compare makes that one).
  const bool unnoticed =
      state.record && !state.record->released && !rules.live && !state.noticed;
  // --max-leases, decided on the count read with the lease; the grant's
  // transaction compares that no hold was created since.
  LeaseLoads loads(state.fence, rules, state.holds, options_.max_leases);
  fence::Fold fold(loads);
  fold.Decide(op, now_ns, SteadyNow(), outcome);
  if (fold.changes().empty()) {
    if (outcome->error) co_return Settled::kFailed;
    // A refusal changes nothing, but notices a lease that ran out.
    if (unnoticed && co_await NoticeExpiry(op.name, state)) {
      outcome->lease->expired = *state.record;
    }
    co_return Settled::kDone;
  }
  const Settled settled =
      co_await CommitLease(op, state, *fold.changes().front().lease, outcome,
                           now_ns, loads.limited());
  if (settled == Settled::kDone && unnoticed) {
    outcome->lease->expired = *state.record;
  }
  co_return settled;
}

fence::LeaseState EtcdFences::RulesView(const fence::LeaseOp& op,
                                        const StoredLease& state,
                                        std::int64_t now_ns) {
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  const bool ours = hold != nullptr && hold->name == op.name;
  fence::LeaseState view;
  view.record = state.record;
  view.live = state.record && !state.record->released && ours &&
              hold->token == state.record->token;
  const std::int64_t left_ms =
      hold == nullptr ? 0
                      : std::max<std::int64_t>(
                            1, (hold->deadline_ns - now_ns + 999999) / 1000000);
  view.expires_in_ms = left_ms;
  if (hold != nullptr && !ours) {
    // The blocking lease, as its hold tells it (what the 409 shows).
    fence::LeaseRecord blocking;
    blocking.holder = hold->holder;
    blocking.fence = op.fence;
    blocking.token = hold->token;
    view.other =
        fence::LeaseState::Blocking{hold->name, std::move(blocking), left_ms};
  }
  return view;
}

Awaitable<EtcdFences::Settled> EtcdFences::CommitLease(
    const fence::LeaseOp& op, const StoredLease& state,
    const fence::LeaseRecord& next, WriteOutcome* outcome, std::int64_t now_ns,
    bool limited) {
  const LeaseVerdict verdict = outcome->lease->verdict;
  const std::string lease_key = LeaseKey(op.name);
  const std::string hold_key = HoldKey(op.fence);
  // Every transaction compares the record and the hold as read; an acquire
  // also the fence, since a renewal keeps its token only while the fence
  // is not above it.
  etcd::Txn txn;
  txn.If(etcd::CompareMod(lease_key, state.record_revision))
      .If(etcd::CompareMod(hold_key, state.hold_revision));
  if (op.kind == fence::LeaseOp::Kind::kAcquire) {
    txn.If(etcd::CompareMod(FenceKey(op.fence), state.fence.mod_revision));
  }
  if (limited) {
    txn.If(etcd::CompareCreatedBefore(HoldKey(""), etcd::PrefixEnd(HoldKey("")),
                                      state.read_revision + 1));
  }
  txn.Then(etcd::PutOp(lease_key, etcd::FormatLease(next, false)));
  HoldLease hold;
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
      txn.Then(etcd::PutOp(FenceKey(op.fence),
                           etcd::FormatFence(next.token, now_ns)));
    }
    const std::int64_t deadline_ns =
        now_ns + static_cast<std::int64_t>(next.ttl_ms) * 1000000;
    txn.Then(etcd::PutOp(
        hold_key,
        etcd::FormatHold(next.token, deadline_ns, op.name, next.holder),
        {.lease = hold.id}));
  }
  EtcdApi::Reply reply = co_await Call("/v3/kv/txn", txn.Json());
  if (!reply.ok) {
    // Unknown: it may be applied. A holder that asks again renews it.
    *outcome = Unavailable();
    co_return Settled::kFailed;
  }
  if (!etcd::Succeeded(reply.json)) {
    RevokeEtcdLease(hold.granted);
    co_return Settled::kConflict;
  }
  ++transactions_;
  RevokeEtcdLease(hold.revoke);
  if (verdict == LeaseVerdict::kGranted) {
    CacheFence(op.fence, next.token, now_ns, etcd::RevisionOf(reply.json));
  }
  co_return Settled::kDone;
}

Awaitable<EtcdFences::HoldLease> EtcdFences::AttachHold(
    const fence::LeaseOp& op, const StoredLease& state,
    const fence::LeaseRecord& next, bool renewed) {
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  HoldLease out;
  const bool live = renewed && hold != nullptr && hold->name == op.name &&
                    hold->token == state.record->token;
  if (live && etcd::EtcdSeconds(state.record->ttl_ms) ==
                  etcd::EtcdSeconds(next.ttl_ms)) {
    // etcd restarts the lease's TTL from when it sees this. The etcd
    // lease is this lease's own (each grant gets a new one), so the
    // keep-alive extends nobody else's; if the hold changed meanwhile,
    // the compare fails and nothing is renewed.
    out.settled = co_await KeepHoldAlive(hold->etcd_lease);
    out.id = hold->etcd_lease;
    co_return out;
  }
  out.id = out.granted = co_await GrantEtcdLease(next.ttl_ms);
  if (out.id == 0) {
    out.settled = Settled::kFailed;
    co_return out;
  }
  if (hold != nullptr) out.revoke = hold->etcd_lease;
  co_return out;
}

Awaitable<EtcdFences::Settled> EtcdFences::KeepHoldAlive(
    std::int64_t etcd_lease) {
  EtcdApi::Reply reply =
      co_await Call("/v3/lease/keepalive", etcd::LeaseId(etcd_lease));
  if (!reply.ok) co_return Settled::kFailed;
  const Json* result = reply.json.Find("result");
  if (result == nullptr || etcd::Int64Of(result->Find("TTL")) <= 0) {
    co_return Settled::kConflict;  // it ran out just now: read again
  }
  co_return Settled::kDone;
}

Awaitable<bool> EtcdFences::NoticeExpiry(const std::string& name,
                                         const StoredLease& state) {
  const std::string key = LeaseKey(name);
  etcd::Txn txn;
  txn.If(etcd::CompareMod(key, state.record_revision))
      .Then(etcd::PutOp(key, etcd::FormatLease(*state.record, true)));
  EtcdApi::Reply reply = co_await Call("/v3/kv/txn", txn.Json());
  co_return reply.ok&& etcd::Succeeded(reply.json);
}

fence::LeaseEntry EtcdFences::EntryOf(const StoredLease& state,
                                      std::int64_t now) const {
  fence::LeaseEntry entry;
  entry.record = *state.record;
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  if (!entry.record.released && hold != nullptr &&
      hold->token == entry.record.token) {
    // Live while the hold exists; how long for is the granting replica's
    // estimate (at least 1 ms).
    const std::int64_t left_ns = hold->deadline_ns - WallNowNs();
    entry.deadline_ns = now + std::max<std::int64_t>(1000000, left_ns);
  }
  entry.expiry_noticed = state.noticed;
  return entry;
}

Awaitable<Fences::LeaseRead> EtcdFences::GetLease(std::string name,
                                                  std::string fence) {
  LeaseRead out;
  StoredLease state;
  out.error = co_await ReadLease(name, fence, &state);
  if (state.hold && state.hold->name != name) state.hold.reset();
  out.now_ns = SteadyNow();
  if (out.error || !state.record) co_return out;
  if (state.record->fence != fence) {
    out.error = Errc::kScopeMismatch;
    co_return out;
  }
  out.entry = EntryOf(state, out.now_ns);
  if (fence::IsLive(*out.entry, out.now_ns) || state.record->released ||
      state.noticed) {
    co_return out;
  }
  const bool noticed = co_await NoticeExpiry(name, state);
  if (noticed) {
    out.expired = *state.record;
    Tell(LeaseExpired(name, *out.expired, out.now_ns));
  }
  co_return out;
}

Awaitable<Fences::LeaseList> EtcdFences::ListLeases(std::string prefix,
                                                    std::string after,
                                                    std::size_t limit) {
  LeaseList out;
  const std::string base = LeaseKey("");
  std::optional<etcd::Page> page =
      co_await ReadPage(base, prefix, after, limit, &out.error);
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
  out.error = co_await ReadHolds(leases);
  if (out.error) co_return out;
  out.now_ns = SteadyNow();
  // A listing notices a few expiries (one transaction each), and none after
  // one that did not take: a read must not wait on many writes.
  int notices = 16;
  for (auto& [name, state] : leases) {
    fence::LeaseEntry entry = EntryOf(state, out.now_ns);
    if (!fence::IsLive(entry, out.now_ns) && !entry.record.released &&
        !state.noticed && notices > 0) {
      const bool noticed = co_await NoticeExpiry(name, state);
      if (noticed) {
        Tell(LeaseExpired(name, entry.record, out.now_ns));
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

Awaitable<std::error_code> EtcdFences::ReadHolds(NamedLeases& leases) {
  // 64 reads to a transaction.
  for (std::size_t first = 0; first < leases.size(); first += 64) {
    const std::size_t last = std::min(leases.size(), first + 64);
    etcd::Txn reads;
    for (std::size_t i = first; i < last; ++i) {
      reads.Then(etcd::RangeOp(HoldKey(leases[i].second.record->fence)));
    }
    EtcdApi::Reply holds = co_await Call("/v3/kv/txn", reads.Json(), true);
    if (!holds.ok) co_return Errc::kStoreUnavailable;
    const Json* responses = etcd::ResponsesOf(holds.json, last - first);
    if (responses == nullptr) co_return fence::Errc::kStorage;
    for (std::size_t i = first; i < last; ++i) {
      const std::vector<Json>* found = etcd::RangeKvsAt(*responses, i - first);
      if (found == nullptr || found->size() > 1) {
        co_return fence::Errc::kStorage;
      }
      if (found->empty()) continue;
      Hold hold;
      if (!etcd::HoldOf((*found)[0], &hold)) co_return fence::Errc::kStorage;
      if (hold.name == leases[i].first) leases[i].second.hold = std::move(hold);
    }
  }
  co_return std::error_code();
}

}  // namespace fencepost::storage
