// EtcdLeaseRecords: a lease as etcd holds it, and what its hold says of it
// (see the class comment).

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/etcd_lease_records.h"

#include <algorithm>

#include "fence/errc.h"
#include "fence/fold.h"
#include "fence/rules.h"
#include "storage/errc.h"
#include "storage/etcd_json.h"
#include "storage/etcd_paging.h"
#include "storage/etcd_txn.h"

namespace fencepost::storage {

using Json = http::JsonValue;

namespace {

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
  std::error_code Admit(fence::Change&, std::size_t,
                        fence::WriteOutcome*) override {
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

Awaitable<std::error_code> EtcdLeaseRecords::ReadLease(
    const std::string& name, const std::string& fence_name, StoredLease* state,
    bool count_holds) {
  std::vector<std::pair<std::string, std::string>> leases;
  leases.emplace_back(name, fence_name);
  std::vector<StoredLease> states;
  const std::error_code error =
      co_await ReadLeases(leases, &states, count_holds);
  if (!error) *state = std::move(states.front());
  co_return error;
}

Awaitable<std::error_code> EtcdLeaseRecords::ReadLeases(
    const std::vector<std::pair<std::string, std::string>>& leases,
    std::vector<StoredLease>* states, bool count_holds,
    std::vector<std::error_code>* each) {
  etcd::Txn reads;
  for (const auto& [name, fence_name] : leases) {
    reads.Then(etcd::RangeOp(session_.LeaseKey(name)))
        .Then(etcd::RangeOp(session_.HoldKey(fence_name)))
        .Then(etcd::RangeOp(session_.FenceKey(fence_name)));
  }
  if (count_holds) {
    reads.Then(etcd::CountOp(session_.HoldKey(""),
                             etcd::PrefixEnd(session_.HoldKey(""))));
  }
  EtcdApi::Reply reply =
      co_await session_.Call("/v3/kv/txn", reads.Json(), true);
  if (!reply.ok) co_return Errc::kStoreUnavailable;
  const Json* responses = etcd::ResponsesOf(reply.json, reads.success_ops());
  if (responses == nullptr) co_return fence::Errc::kStorage;
  std::optional<std::size_t> holds;
  if (count_holds) {
    const std::int64_t count =
        etcd::RangeCountAt(*responses, 3 * leases.size());
    if (count < 0) co_return fence::Errc::kStorage;
    holds = static_cast<std::size_t>(count);
  }
  states->assign(leases.size(), StoredLease());
  if (each != nullptr) each->assign(leases.size(), std::error_code());
  for (std::size_t i = 0; i < leases.size(); ++i) {
    StoredLease& state = (*states)[i];
    if (std::error_code error = StateOf(*responses, 3 * i, &state)) {
      if (each == nullptr) co_return error;
      (*each)[i] = error;
    }
    state.holds = holds;
    state.read_revision = etcd::RevisionOf(reply.json);
  }
  co_return std::error_code();
}

std::error_code EtcdLeaseRecords::StateOf(const Json& responses,
                                          std::size_t first,
                                          StoredLease* state) {
  const Json* kv[3] = {nullptr, nullptr, nullptr};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::vector<Json>* kvs = etcd::RangeKvsAt(responses, first + i);
    if (kvs == nullptr || kvs->size() > 1) return fence::Errc::kStorage;
    if (!kvs->empty()) kv[i] = &(*kvs)[0];
  }
  std::string text;
  if (kv[0] != nullptr) {
    fence::LeaseRecord record;
    if (!etcd::BytesOf(*kv[0], "value", &text) ||
        !etcd::ParseLease(text, &record, &state->noticed)) {
      return fence::Errc::kStorage;
    }
    state->record = std::move(record);
    state->record_revision = etcd::Int64Of(kv[0]->Find("mod_revision"));
  }
  if (kv[1] != nullptr) {
    Hold hold;
    if (!etcd::HoldOf(*kv[1], &hold)) return fence::Errc::kStorage;
    state->hold = std::move(hold);
    state->hold_revision = etcd::Int64Of(kv[1]->Find("mod_revision"));
  }
  if (kv[2] != nullptr && !etcd::SeenOf(*kv[2], &state->fence)) {
    return fence::Errc::kStorage;
  }
  return {};
}

fence::LeaseState EtcdLeaseRecords::RulesView(const fence::LeaseOp& op,
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

Awaitable<bool> EtcdLeaseRecords::NoticeExpiry(const std::string& name,
                                               const StoredLease& state) {
  const std::string key = session_.LeaseKey(name);
  etcd::Txn txn;
  txn.If(etcd::CompareMod(key, state.record_revision))
      .Then(etcd::PutOp(key, etcd::FormatLease(*state.record, true)));
  EtcdApi::Reply reply = co_await session_.Call("/v3/kv/txn", txn.Json());
  co_return reply.ok&& etcd::Succeeded(reply.json);
}

fence::LeaseEntry EtcdLeaseRecords::EntryOf(const StoredLease& state,
                                            std::int64_t now) {
  fence::LeaseEntry entry;
  entry.record = *state.record;
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  if (!entry.record.released && hold != nullptr &&
      hold->token == entry.record.token) {
    // Live while the hold exists; how long for is the granting replica's
    // estimate (at least 1 ms).
    const std::int64_t left_ns = hold->deadline_ns - EtcdSession::WallNowNs();
    entry.deadline_ns = now + std::max<std::int64_t>(1000000, left_ns);
  }
  entry.expiry_noticed = state.noticed;
  return entry;
}

std::optional<etcd::Conflict> EtcdLeaseRecords::Changed(
    const fence::LeaseOp& op, const StoredLease& read, const StoredLease* now) {
  if (now == nullptr || now->record_revision != read.record_revision ||
      now->hold_revision != read.hold_revision) {
    return etcd::Conflict::kLease;
  }
  if (op.kind == fence::LeaseOp::Kind::kAcquire &&
      now->fence.mod_revision != read.fence.mod_revision) {
    return etcd::Conflict::kFence;
  }
  return std::nullopt;
}

EtcdLeaseRecords::Decision EtcdLeaseRecords::Decide(
    const fence::LeaseOp& op, const StoredLease& state, std::size_t max_leases,
    std::int64_t now_ns, fence::WriteOutcome* outcome) {
  const fence::LeaseState rules = RulesView(op, state, now_ns);
  Decision decision;
  // The lease ran out and no replica has counted it yet: the transaction
  // that changes its record counts it (its compare makes that one).
  decision.unnoticed =
      state.record && !state.record->released && !rules.live && !state.noticed;
  // --max-leases, decided on the count read with the lease; the grant's
  // transaction compares that no hold was created since.
  LeaseLoads loads(state.fence, rules, state.holds, max_leases);
  fence::Fold fold(loads);
  fold.Decide(op, now_ns, fence::SteadyNowNs(), outcome);
  if (!fold.changes().empty()) {
    decision.next = *fold.changes().front().lease;
    decision.limited = loads.limited();
  }
  return decision;
}

namespace {

std::int64_t DeadlineNs(const fence::LeaseRecord& next, std::int64_t now_ns) {
  return now_ns + static_cast<std::int64_t>(next.ttl_ms) * 1000000;
}

}  // namespace

void EtcdLeaseRecords::AddChange(etcd::Txn& txn, const fence::LeaseOp& op,
                                 const StoredLease& state,
                                 const fence::LeaseRecord& next,
                                 fence::LeaseOutcome::Verdict verdict,
                                 std::int64_t hold_id,
                                 std::int64_t now_ns) const {
  using Verdict = fence::LeaseOutcome::Verdict;
  const std::string lease_key = session_.LeaseKey(op.name);
  const std::string hold_key = session_.HoldKey(op.fence);
  const std::string fence_key = session_.FenceKey(op.fence);
  txn.If(etcd::CompareMod(lease_key, state.record_revision))
      .If(etcd::CompareMod(hold_key, state.hold_revision));
  if (op.kind == fence::LeaseOp::Kind::kAcquire) {
    txn.If(etcd::CompareMod(fence_key, state.fence.mod_revision));
  }
  txn.Then(etcd::PutOp(lease_key, etcd::FormatLease(next, false)));
  if (verdict == Verdict::kReleased) {
    txn.Then(etcd::DeleteOp(hold_key));
  } else {
    if (verdict == Verdict::kGranted) {
      txn.Then(etcd::PutOp(fence_key, etcd::FormatFence(next.token, now_ns)));
    }
    txn.Then(etcd::PutOp(hold_key,
                         etcd::FormatHold(next.token, DeadlineNs(next, now_ns),
                                          op.name, next.holder),
                         {.lease = hold_id}));
  }
  txn.Else(etcd::RangeOp(lease_key))
      .Else(etcd::RangeOp(hold_key))
      .Else(etcd::RangeOp(fence_key));
}

EtcdLeaseRecords::StoredLease EtcdLeaseRecords::After(
    const fence::LeaseOp& op, const StoredLease& state,
    const fence::LeaseRecord& next, bool granted, std::int64_t hold_id,
    std::int64_t now_ns, std::int64_t revision) {
  StoredLease after = state;
  after.record = next;
  after.noticed = false;
  after.hold =
      Hold{next.token, DeadlineNs(next, now_ns), op.name, next.holder, hold_id};
  after.record_revision = after.hold_revision = revision;
  if (granted) after.fence = {next.token, now_ns, revision};
  return after;
}

bool EtcdLeaseRecords::KeepsHold(const fence::LeaseOp& op,
                                 const StoredLease& state,
                                 const fence::LeaseRecord& next) {
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  return hold != nullptr && state.record && hold->name == op.name &&
         hold->token == state.record->token &&
         etcd::EtcdSeconds(state.record->ttl_ms) ==
             etcd::EtcdSeconds(next.ttl_ms);
}

Awaitable<std::error_code> EtcdLeaseRecords::ReadHolds(NamedLeases& leases) {
  // 64 reads to a transaction.
  for (std::size_t first = 0; first < leases.size(); first += 64) {
    const std::size_t last = std::min(leases.size(), first + 64);
    etcd::Txn reads;
    for (std::size_t i = first; i < last; ++i) {
      reads.Then(
          etcd::RangeOp(session_.HoldKey(leases[i].second.record->fence)));
    }
    EtcdApi::Reply holds =
        co_await session_.Call("/v3/kv/txn", reads.Json(), true);
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
