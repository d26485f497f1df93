// EtcdGroups: the queue of writes, the groups it makes and their attempts
// (see the class comment); what one attempt decides is EtcdGroupPlan's.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/etcd_groups.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <memory>
#include <set>

#include "fence/errc.h"
#include "fence/rules.h"
#include "storage/errc.h"
#include "storage/etcd_group_plan.h"
#include "storage/etcd_json.h"

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;
using Json = http::JsonValue;

bool EtcdGroups::FitsOneTransaction(const fence::Batch& batch) {
  std::set<std::string_view> fences, values;
  std::size_t bytes = 0;
  for (const fence::FencedWrite& w : batch.writes) {
    fences.insert(w.fence);
    if (w.value) {
      values.insert(w.value->key);
      if (w.value->body.size() > kMaxValueBytes) return false;
      bytes += w.value->body.size();
    }
  }
  return fences.size() <= kMaxGroupFences && values.size() <= kMaxGroupValues &&
         bytes <= kMaxGroupBytes;
}

std::error_code EtcdGroups::Refuse(const fence::FenceWrite& write) {
  const auto* batch = std::get_if<fence::Batch>(&write);
  const auto* one = std::get_if<fence::FencedWrite>(&write);
  if (batch != nullptr && !FitsOneTransaction(*batch)) {
    return Errc::kBatchTooLarge;
  }
  if (one != nullptr && one->value &&
      one->value->body.size() > kMaxValueBytes) {
    return Errc::kValueTooLarge;
  }
  return {};
}

void EtcdGroups::Enqueue(Pending pending) {
  queue_.push_back(std::move(pending));
  if (!running_) {
    running_ = true;
    asio::co_spawn(session_.io(), Run(), asio::detached);
  }
}

Awaitable<void> EtcdGroups::Run() {
  while (!queue_.empty()) co_await Settle(NextGroup());
  running_ = false;
}

std::vector<EtcdGroups::Pending> EtcdGroups::NextGroup() {
  std::vector<Pending> group;
  std::set<std::string, std::less<>> fences, values;
  std::size_t bytes = 0;
  while (!queue_.empty()) {
    // A batch is a transaction of its own.
    const bool batch =
        std::holds_alternative<fence::Batch>(queue_.front().write);
    if (!group.empty() &&
        (batch || std::holds_alternative<fence::Batch>(group.front().write))) {
      break;
    }
    if (batch) {
      group.push_back(std::move(queue_.front()));
      queue_.pop_front();
      break;
    }
    const auto& next = std::get<fence::FencedWrite>(queue_.front().write);
    const bool turn = queue_.front().turn != nullptr;
    const bool new_fence = !fences.count(next.fence);
    // A turn key counts as a value (one more put), once per fence.
    // (No key holds a NUL byte, so this names no value.)
    const std::string value_key =
        turn         ? std::string(1, '\0') + "turn/" + next.fence
        : next.value ? next.value->key
                     : "";
    if (turn && values.count(value_key)) break;
    const bool new_value = !value_key.empty() && !values.count(value_key);
    const std::size_t size = next.value ? next.value->body.size() : 0;
    if (!group.empty() && ((new_fence && fences.size() == kMaxGroupFences) ||
                           (new_value && values.size() == kMaxGroupValues) ||
                           bytes + size > kMaxGroupBytes)) {
      break;
    }
    bytes += size;
    fences.insert(next.fence);
    if (!value_key.empty()) values.insert(value_key);
    group.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return group;
}

Awaitable<void> EtcdGroups::Settle(std::vector<Pending> group) {
  if (group.size() == 1 &&
      std::holds_alternative<fence::Batch>(group.front().write)) {
    co_await SettleBatch(std::move(group.front()));
    co_return;
  }
  // Each retry counts the cause of the attempt that failed before it.
  etcd::Conflict conflict = etcd::Conflict::kFence;
  for (int attempt = 0; attempt < kGroupAttempts; ++attempt) {
    if (attempt > 0) session_.Retried(conflict);
    if (co_await TryOnce(group, &conflict) != Settled::kConflict) co_return;
  }
  // Contended: each write alone, so one replica's progress on one fence
  // cannot keep failing a whole group.
  for (Pending& pending : group) {
    std::vector<Pending> alone;
    alone.push_back(std::move(pending));
    etcd::Conflict alone_conflict = conflict;  // the group's last
    Settled settled = Settled::kConflict;
    for (int attempt = 0;
         attempt < kAloneAttempts && settled == Settled::kConflict; ++attempt) {
      session_.Retried(alone_conflict);
      settled = co_await TryOnce(alone, &alone_conflict);
    }
    if (settled == Settled::kConflict) {
      FailAll(alone, fence::Errc::kOverloaded);
    }
  }
}

Awaitable<void> EtcdGroups::SettleBatch(Pending batch) {
  std::vector<fence::FencedWrite>& writes =
      std::get<fence::Batch>(batch.write).writes;
  const std::size_t n = writes.size();
  auto outcomes = std::make_shared<std::vector<WriteOutcome>>(n);
  std::vector<Pending> items;
  for (std::size_t i = 0; i < n; ++i) {
    items.push_back(
        {std::move(writes[i]),
         [outcomes, i](WriteOutcome o) { (*outcomes)[i] = std::move(o); },
         nullptr});
  }
  etcd::Conflict conflict = etcd::Conflict::kFence;
  Settled settled = Settled::kConflict;
  for (int attempt = 0;
       attempt < kAloneAttempts && settled == Settled::kConflict; ++attempt) {
    if (attempt > 0) session_.Retried(conflict);
    settled = co_await TryOnce(items, &conflict, true);
  }
  WriteOutcome result;
  if (settled == Settled::kConflict) {
    result.error = fence::Errc::kOverloaded;
    batch.done(std::move(result));
    co_return;
  }
  // The outcomes up to the first that stopped the batch (it last).
  std::vector<WriteOutcome> decided;
  for (WriteOutcome& one : *outcomes) {
    decided.push_back(std::move(one));
    if (fence::StopsBatch(decided.back())) break;
  }
  batch.done(fence::BatchOutcome(std::move(decided)));
}

Awaitable<etcd::Settled> EtcdGroups::TryOnce(std::vector<Pending>& group,
                                             etcd::Conflict* conflict,
                                             bool all_or_nothing) {
  std::string error;
  EtcdFenceCache::ValuesRead values;
  if (!co_await cache_.Load(
          EtcdGroupPlan::ReadsOf(group, all_or_nothing, cache_), &values,
          &error)) {
    FailAll(group, Errc::kStoreUnavailable);
    co_return Settled::kFailed;
  }
  EtcdGroupPlan plan(session_, cache_, turns_, group, all_or_nothing,
                     EtcdSession::WallNowNs(), values);
  if (plan.takes_turns() && turns_.lease() == 0) {
    // The lease ran out since the turn was asked for: no turn without it.
    DropTurns(group);
    *conflict = etcd::Conflict::kTurn;
    co_return Settled::kConflict;  // decide the others again
  }
  if (plan.applies_nothing()) {
    plan.Answer();
    co_return Settled::kDone;
  }
  EtcdApi::Reply reply = co_await session_.Call("/v3/kv/txn", plan.Txn());
  if (!reply.ok) {
    plan.ForgetTurns();
    FailAll(group, Errc::kStoreUnavailable);
    co_return Settled::kFailed;
  }
  const bool success = etcd::Succeeded(reply.json);
  const Json* responses = etcd::ResponsesOf(reply.json, plan.ops(success));
  if (responses == nullptr) {
    FailAll(group, fence::Errc::kStorage);
    co_return Settled::kFailed;
  }
  if (!success) {
    *conflict = plan.TakeConflict(*responses);
    co_return Settled::kConflict;
  }
  ++transactions_;
  plan.AnswerCommitted(reply.json, *responses);
  co_return Settled::kDone;
}

void EtcdGroups::DropTurns(std::vector<Pending>& group) {
  std::vector<Pending> without;
  for (Pending& p : group) {
    if (p.turn) {
      WriteOutcome outcome;
      outcome.error = Errc::kStoreUnavailable;
      p.done(std::move(outcome));
    } else {
      without.push_back(std::move(p));
    }
  }
  group = std::move(without);
}

void EtcdGroups::FailAll(std::vector<Pending>& group, std::error_code error) {
  for (Pending& pending : group) {
    cache_.Forget(fence::RoutingFence(pending.write));
    WriteOutcome outcome;
    outcome.error = error;
    pending.done(std::move(outcome));
  }
}

}  // namespace fencepost::storage
