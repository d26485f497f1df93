// EtcdLeases: leases (see the class comment): the queues and lanes of lease
// operations. What one attempt decides and applies is EtcdLeaseAttempt's
// (read first) or EtcdRenewals's (renewals of known leases).

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/etcd_leases.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "fence/errc.h"
#include "fence/rules.h"
#include "storage/errc.h"
#include "storage/etcd_json.h"
#include "storage/etcd_lease_attempt.h"
#include "storage/etcd_paging.h"

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;

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
    std::vector<Pending> group = etcd::TakeLeaseGroup(
        grant_lane_, kLaneGroup, 4 * kLaneGroup, etcd::Busy());
    std::optional<etcd::Conflict> conflict;
    for (int attempt = 0; attempt < kLaneAttempts && !group.empty();
         ++attempt) {
      if (attempt > 0) session_.Retried(*conflict);
      bool limited = false;
      EtcdLeaseAttempt tried(session_, records_, cache_, renewals_);
      conflict = co_await tried.Run(group, false, &limited);
      if (tried.committed()) ++transactions_;
    }
    // Still contended: one at a time.
    if (!group.empty()) session_.Retried(*conflict);
    for (Pending& pending : group) {
      co_await SettleLease(std::move(pending), /*in_lane=*/true);
    }
  }
  lane_running_ = false;
}

void EtcdLeases::ToLane(Pending pending) {
  grant_lane_.push_back(std::move(pending));
  if (!lane_running_) {
    lane_running_ = true;
    asio::co_spawn(session_.io(), SettleLimited(), asio::detached);
  }
}

Awaitable<void> EtcdLeases::SettleLease(Pending pending, bool in_lane) {
  std::vector<Pending> group;
  group.push_back(std::move(pending));
  std::optional<etcd::Conflict> conflict;
  for (int attempt = 0; attempt < kAloneAttempts; ++attempt) {
    if (attempt > 0) session_.Retried(*conflict);
    bool limited = false;
    // While the lane runs, every grant it would race goes there instead.
    const bool defer = !in_lane && lane_running_;
    EtcdLeaseAttempt tried(session_, records_, cache_, renewals_);
    conflict = co_await tried.Run(group, defer, &limited);
    if (tried.committed()) ++transactions_;
    if (!conflict) co_return;
    if (limited && !in_lane) {
      // A failed compare: the lane's first attempt is its retry.
      if (!defer) session_.Retried(*conflict);
      // Grants racing here for the holds' compare: the lane from now.
      ToLane(std::move(group.front()));
      co_return;
    }
  }
  WriteOutcome outcome;
  outcome.error = fence::Errc::kOverloaded;
  group.front().done(std::move(outcome));
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
