// EtcdFences: a group of writes decided together and applied in one etcd
// transaction (see the class comment), and the cache of fences it is
// decided against.

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
#include "storage/etcd_txn.h"

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;
using Verdict = fence::WriteOutcome::Verdict;
using Json = http::JsonValue;

namespace {

// The tag of a value put earlier in the group: the transaction's revision,
// not known until it commits. No tag a request names matches it: a '"' is
// never inside the tags of If-Match and If-None-Match, and a batch names
// each key once.
const std::string kTagNotKnownYet = "\"written in this transaction\"";

// Whether `write` is decided against its value as etcd holds it.
bool ReadsValue(const fence::FencedWrite& write) {
  return write.value && !write.value_now && !write.precondition.empty();
}

void AddOnce(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) {
    list.push_back(item);
  }
}

}  // namespace

EtcdFences::Reads EtcdFences::ReadsOf(const std::vector<Pending>& group,
                                      bool all_or_nothing) const {
  // A 412 is answered without a transaction, so the token it passed must
  // pass against the fence as it is: the fences of the writes with a
  // precondition are read afresh (for a batch, whose answer is its first
  // stale write if any, every fence of it).
  Reads reads;
  bool every_fence = false;
  for (const Pending& p : group) {
    const auto* write = std::get_if<fence::FencedWrite>(&p.write);
    if (write == nullptr || write->precondition.empty()) continue;
    AddOnce(reads.fences, write->fence);
    if (ReadsValue(*write)) AddOnce(reads.values, write->value->key);
    every_fence = all_or_nothing;
  }
  for (const Pending& p : group) {
    const std::string& fence = fence::RoutingFence(p.write);
    if (every_fence || !cache_.count(fence)) AddOnce(reads.fences, fence);
  }
  return reads;
}

void EtcdFences::CacheRead(const std::string& name, const Seen& seen) {
  auto it = cache_.find(name);
  if (it == cache_.end() || it->second.mod_revision <= seen.mod_revision) {
    cache_[name] = seen;
  }
}

Awaitable<bool> EtcdFences::Load(const std::vector<Pending>& group,
                                 bool all_or_nothing, ValuesRead* values,
                                 std::string* error) {
  const Reads want = ReadsOf(group, all_or_nothing);
  if (want.fences.empty() && want.values.empty()) co_return true;
  etcd::Txn reads;
  for (const std::string& name : want.fences) {
    reads.Then(etcd::RangeOp(FenceKey(name)));
  }
  for (const std::string& key : want.values) {
    reads.Then(etcd::RangeOp(ValueKey(key), true));
  }
  // Reads only: safe to ask another member.
  EtcdApi::Reply reply = co_await Call("/v3/kv/txn", reads.Json(), true);
  if (!reply.ok) {
    *error = reply.error;
    co_return false;
  }
  const std::size_t n = want.fences.size();
  const Json* responses = etcd::ResponsesOf(reply.json, n + want.values.size());
  if (responses == nullptr) {
    *error = "etcd answered a read of fences with something else";
    co_return false;
  }
  if (cache_.size() + n > kMaxCache) cache_.clear();
  for (std::size_t i = 0; i < n + want.values.size(); ++i) {
    const std::vector<Json>* kvs = etcd::RangeKvsAt(*responses, i);
    if (kvs == nullptr || kvs->size() > 1) {
      *error = "etcd answered a read of fences with something else";
      co_return false;
    }
    if (i >= n) {
      const std::int64_t revision =
          kvs->empty() ? 0 : etcd::Int64Of((*kvs)[0].Find("mod_revision"));
      if (revision < 0 || (!kvs->empty() && revision == 0)) {
        *error = "etcd answered a read of values with something else";
        co_return false;
      }
      (*values)[want.values[i - n]] = revision;
      continue;
    }
    Seen seen;
    if (!kvs->empty() && !etcd::SeenOf((*kvs)[0], &seen)) {
      *error = "the fence record of '" + want.fences[i] +
               "' in etcd is not fencepost's";
      co_return false;
    }
    CacheRead(want.fences[i], seen);
  }
  co_return true;
}

Awaitable<EtcdFences::Settled> EtcdFences::TryOnce(std::vector<Pending>& group,
                                                   bool all_or_nothing) {
  std::string error;
  ValuesRead values;
  if (!co_await Load(group, all_or_nothing, &values, &error)) {
    FailAll(group, Errc::kStoreUnavailable);
    co_return Settled::kFailed;
  }
  GroupPlan plan = DecideGroup(group, all_or_nothing, WallNowNs(), values);
  if (!plan.turns.empty() && lease_ == 0) {
    // The lease ran out since the turn was asked for: no turn without it.
    DropTurns(group);
    co_return Settled::kConflict;  // decide the others again
  }
  if (plan.changed.empty() || (all_or_nothing && plan.rejected)) {
    // Nothing applied (a batch names each key once: no tag to learn).
    for (std::size_t i : plan.unknown_tags) plan.outcomes[i].etag.clear();
    for (std::size_t i = 0; i < group.size(); ++i) {
      group[i].done(std::move(plan.outcomes[i]));
    }
    co_return Settled::kDone;
  }
  EtcdApi::Reply reply =
      co_await Call("/v3/kv/txn", BuildGroupTxn(group, plan));
  if (!reply.ok) {
    ForgetTurns(group, plan);
    FailAll(group, Errc::kStoreUnavailable);
    co_return Settled::kFailed;
  }
  const bool success = etcd::Succeeded(reply.json);
  const Json* responses = etcd::ResponsesOf(
      reply.json, success ? plan.success_ops : plan.failure_ops);
  if (responses == nullptr) {
    FailAll(group, fence::Errc::kStorage);
    co_return Settled::kFailed;
  }
  if (!success) {
    TakeConflict(group, plan, *responses);
    co_return Settled::kConflict;
  }
  AnswerCommitted(group, plan, reply.json, *responses);
  co_return Settled::kDone;
}

// What a group's fold reads: the fences as this replica's cache has them
// (Load read those it lacked) and the values Load read for preconditions.
// A put's tag is the transaction's revision, not known until it commits;
// an applied write decided on a value Load read makes the transaction
// compare that value's mod_revision with the one read.
class EtcdFences::GroupLoads : public fence::Fold::Source {
 public:
  GroupLoads(EtcdFences& store, const ValuesRead& read, GroupPlan& plan)
      : store_(store), read_(read), plan_(plan) {}

  std::error_code LoadFence(const std::string& name,
                            fence::FenceNow* now) override {
    const Seen& seen = store_.cache_[name];
    *now = {seen.token, seen.updated_at_ns};
    return {};
  }

  std::error_code LoadValue(const std::string& key, bool with_tag,
                            fence::ValueNow* now) override {
    // Without a precondition its value is not read: created or not is
    // told by the transaction (prev_kv).
    if (!with_tag) return {};
    // Load read every key of a write that ReadsValue.
    if (const std::int64_t revision = read_.at(key); revision != 0) {
      *now = fence::ValueNow{true, etcd::TagOf(revision)};
    }
    return {};
  }

  std::error_code Admit(fence::Change& change, std::size_t,
                        WriteOutcome*) override {
    if (change.value_loaded) {
      plan_.value_compares.try_emplace(change.key, read_.at(change.key));
    }
    if (change.op == fence::Change::Op::kPut) change.tag = kTagNotKnownYet;
    return {};
  }

 private:
  EtcdFences& store_;
  const ValuesRead& read_;
  GroupPlan& plan_;
};

EtcdFences::GroupPlan EtcdFences::DecideGroup(const std::vector<Pending>& group,
                                              bool all_or_nothing,
                                              std::int64_t now_ns,
                                              const ValuesRead& read) {
  GroupPlan plan;
  plan.outcomes.resize(group.size());
  GroupLoads loads(*this, read, plan);
  fence::Fold fold(loads);
  if (all_or_nothing) {
    fence::Batch batch;
    for (const Pending& p : group) batch.writes.push_back(WriteOf(p));
    std::vector<WriteOutcome> outcomes;
    plan.rejected = !fold.Decide(batch, now_ns, &outcomes);
    // The writes after one that stopped the batch keep no outcome.
    std::move(outcomes.begin(), outcomes.end(), plan.outcomes.begin());
    if (plan.rejected) return plan;
  } else {
    for (std::size_t i = 0; i < group.size(); ++i) {
      fold.Decide(WriteOf(group[i]), now_ns, &plan.outcomes[i]);
    }
  }
  for (std::size_t i = 0; i < group.size(); ++i) {
    const fence::FencedWrite& write = WriteOf(group[i]);
    const WriteOutcome& outcome = plan.outcomes[i];
    if (!fence::Applied(outcome)) {
      if (outcome.verdict == Verdict::kPreconditionFailed &&
          outcome.etag == kTagNotKnownYet) {
        plan.unknown_tags.push_back(i);
      }
      plan.rejected = true;
      continue;
    }
    AddOnce(plan.changed, write.fence);  // compared even when observed
    if (write.value) plan.last_value[write.value->key] = i;
    if (group[i].turn) plan.turns.push_back(i);
  }
  // The changed fences as the group left them.
  for (const std::string& name : plan.changed) {
    Seen& seen = plan.view[name] = cache_[name];
    const auto& raised = fold.state().fences;
    if (auto it = raised.find(name); it != raised.end()) {
      seen.token = it->second.token;
      seen.updated_at_ns = it->second.updated_at_ns;
    }
  }
  return plan;
}

void EtcdFences::DropTurns(std::vector<Pending>& group) {
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

std::string EtcdFences::BuildGroupTxn(const std::vector<Pending>& group,
                                      GroupPlan& plan) {
  etcd::Txn txn;
  for (const std::string& name : plan.changed) {
    txn.If(etcd::CompareMod(FenceKey(name), cache_[name].mod_revision));
    txn.Else(etcd::RangeOp(FenceKey(name)));
  }
  // The values preconditions were decided on, as read (0: none).
  for (const auto& [key, revision] : plan.value_compares) {
    txn.If(etcd::CompareMod(ValueKey(key), revision));
  }
  for (const std::string& name : plan.changed) {
    const Seen& now = plan.view[name];
    if (now.token == cache_[name].token &&
        now.updated_at_ns == cache_[name].updated_at_ns) {
      continue;  // only observed writes: the fence stays
    }
    plan.moved.push_back(name);
    txn.Then(etcd::PutOp(FenceKey(name),
                         etcd::FormatFence(*now.token, now.updated_at_ns)));
  }
  for (const auto& [key, i] : plan.last_value) {
    const fence::FencedWrite& write = WriteOf(group[i]);
    if (write.value->kind == fence::ValueOp::Kind::kDelete) {
      txn.Then(etcd::DeleteOp(ValueKey(key), true));
    } else {
      txn.Then(
          etcd::PutOp(ValueKey(key),
                      etcd::FormatValue(write.token, write.value->content_type,
                                        write.value->body),
                      {.prev_kv = true}));
    }
    plan.value_keys.push_back(key);
  }
  // Each turn's value is unique, so a turn whose transaction's outcome is
  // unknown can be removed without touching a later one.
  for (std::size_t i : plan.turns) {
    const std::string key = TurnKey(WriteOf(group[i]).fence);
    plan.turn_values.push_back(options_.replica + " #" +
                               std::to_string(++turn_serial_));
    txn.If(etcd::CompareCreate(key, 0));
    txn.Then(etcd::PutOp(key, plan.turn_values.back(), {.lease = lease_}));
    txn.Else(etcd::RangeOp(key));
  }
  plan.success_ops = txn.success_ops();
  plan.failure_ops = txn.failure_ops();
  return txn.Json();
}

void EtcdFences::ForgetTurns(const std::vector<Pending>& group,
                             const GroupPlan& plan) {
  // etcd may still apply it: the turns it would take must not outlive
  // this failure (nothing is forwarded under them), or the fences would
  // stay held while this replica's lease lives.
  for (std::size_t t = 0; t < plan.turns.size(); ++t) {
    const std::string key = TurnKey(WriteOf(group[plan.turns[t]]).fence);
    asio::co_spawn(
        io_, RemoveTurn(key, etcd::CompareValue(key, plan.turn_values[t])),
        asio::detached);
  }
}

void EtcdFences::TakeConflict(std::vector<Pending>& group,
                              const GroupPlan& plan, const Json& responses) {
  // Another replica moved a fence: take them as they are now (the failure
  // branch read them), and decide again.
  for (std::size_t i = 0; i < plan.changed.size(); ++i) {
    cache_.erase(plan.changed[i]);
    const std::vector<Json>* kvs = etcd::RangeKvsAt(responses, i);
    if (kvs == nullptr || kvs->size() != 1) continue;  // Load reads it
    Seen seen;
    if (etcd::SeenOf((*kvs)[0], &seen)) cache_[plan.changed[i]] = seen;
  }
  // A turn another replica holds: that write waits (503, retry).
  std::vector<bool> held(group.size(), false);
  for (std::size_t t = 0; t < plan.turns.size(); ++t) {
    const std::vector<Json>* kvs =
        etcd::RangeKvsAt(responses, plan.changed.size() + t);
    held[plan.turns[t]] = kvs == nullptr || !kvs->empty();
  }
  std::vector<Pending> rest;
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (held[i]) {
      WriteOutcome outcome;
      outcome.error = Errc::kFenceHeld;
      group[i].done(std::move(outcome));
    } else {
      rest.push_back(std::move(group[i]));
    }
  }
  group = std::move(rest);
}

void EtcdFences::AnswerCommitted(std::vector<Pending>& group, GroupPlan& plan,
                                 const Json& answer, const Json& responses) {
  ++transactions_;
  const std::int64_t revision = etcd::RevisionOf(answer);
  for (const std::string& name : plan.moved) {
    // (A lease grant may have cached a later state meanwhile.)
    Seen now = plan.view[name];
    now.mod_revision = revision;
    auto it = cache_.find(name);
    if (it == cache_.end() || it->second.mod_revision < revision) {
      cache_[name] = now;
    }
  }
  // Whether each value existed before the transaction, from its prev_kv.
  std::map<std::string, bool, std::less<>> present;
  for (std::size_t v = 0; v < plan.value_keys.size(); ++v) {
    const Json& response = responses.items[plan.moved.size() + v];
    bool existed = false;
    if (const Json* put = response.Find("response_put")) {
      existed = put->Find("prev_kv") != nullptr;
    } else if (const Json* del = response.Find("response_delete_range")) {
      existed = etcd::Int64Of(del->Find("deleted")) > 0;
    }
    present[plan.value_keys[v]] = existed;
  }
  // The transaction's revision is the tag of every value it put.
  for (std::size_t i : plan.unknown_tags) {
    const std::size_t last = plan.last_value.at(WriteOf(group[i]).value->key);
    const bool put =
        WriteOf(group[last]).value->kind == fence::ValueOp::Kind::kPut;
    plan.outcomes[i].etag = put ? etcd::TagOf(revision) : "";
  }
  for (std::size_t i = 0; i < group.size(); ++i) {
    WriteOutcome& outcome = plan.outcomes[i];
    const fence::FencedWrite& write = WriteOf(group[i]);
    const bool applied = fence::Applied(outcome);
    if (applied && write.value) {
      bool& exists = present[write.value->key];
      const bool put = write.value->kind == fence::ValueOp::Kind::kPut;
      outcome.created = put && !exists;
      exists = put;
      // A put replaced by a later one of the group has no tag.
      if (put && plan.last_value.at(write.value->key) == i) {
        outcome.etag = etcd::TagOf(revision);
      }
    }
    if (group[i].turn && applied) *group[i].turn = revision;
    group[i].done(std::move(outcome));
  }
}

void EtcdFences::CacheFence(const std::string& name, fence::Token token,
                            std::int64_t updated_at_ns, std::int64_t revision) {
  // Unless a group committed since (a failed compare corrects any entry
  // that is behind).
  auto it = cache_.find(name);
  if (revision <= 0) {
    cache_.erase(name);
  } else if (it == cache_.end() || it->second.mod_revision < revision) {
    cache_[name] = Seen{token, updated_at_ns, revision};
  }
}

}  // namespace fencepost::storage
