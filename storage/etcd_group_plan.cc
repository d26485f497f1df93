// EtcdGroupPlan: a group of writes decided together and applied in one etcd
// transaction (see EtcdGroups), against the fences as EtcdFenceCache has
// them.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/etcd_group_plan.h"

#include <algorithm>

#include "fence/fold.h"
#include "fence/rules.h"
#include "storage/errc.h"
#include "storage/etcd_json.h"
#include "storage/etcd_txn.h"

namespace fencepost::storage {

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

EtcdFenceCache::Reads EtcdGroupPlan::ReadsOf(const std::vector<Pending>& group,
                                             bool all_or_nothing,
                                             const EtcdFenceCache& cache) {
  // A 412 is answered without a transaction, so the token it passed must
  // pass against the fence as it is: the fences of the writes with a
  // precondition are read afresh (for a batch, whose answer is its first
  // stale write if any, every fence of it).
  EtcdFenceCache::Reads reads;
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
    if (every_fence || !cache.Has(fence)) AddOnce(reads.fences, fence);
  }
  return reads;
}

// What a group's fold reads: the fences as this replica's cache has them
// (Load read those it lacked) and the values Load read for preconditions.
// A put's tag is the transaction's revision, not known until it commits;
// an applied write decided on a value Load read makes the transaction
// compare that value's mod_revision with the one read.
class EtcdGroupPlan::GroupLoads : public fence::Fold::Source {
 public:
  GroupLoads(EtcdGroupPlan& plan, const ValuesRead& read)
      : plan_(plan), read_(read) {}

  std::error_code LoadFence(const std::string& name,
                            fence::FenceNow* now) override {
    const Seen& seen = plan_.cache_.Get(name);
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
      plan_.value_compares_.try_emplace(change.key, read_.at(change.key));
    }
    if (change.op == fence::Change::Op::kPut) change.tag = kTagNotKnownYet;
    return {};
  }

 private:
  EtcdGroupPlan& plan_;
  const ValuesRead& read_;
};

EtcdGroupPlan::EtcdGroupPlan(EtcdSession& session, EtcdFenceCache& cache,
                             EtcdTurns& turns, std::vector<Pending>& group,
                             bool all_or_nothing, std::int64_t now_ns,
                             const ValuesRead& read)
    : session_(session),
      cache_(cache),
      turns_(turns),
      group_(group),
      all_or_nothing_(all_or_nothing) {
  outcomes_.resize(group.size());
  GroupLoads loads(*this, read);
  fence::Fold fold(loads);
  if (all_or_nothing) {
    fence::Batch batch;
    for (const Pending& p : group) batch.writes.push_back(WriteOf(p));
    std::vector<WriteOutcome> outcomes;
    rejected_ = !fold.Decide(batch, now_ns, &outcomes);
    // The writes after one that stopped the batch keep no outcome.
    std::move(outcomes.begin(), outcomes.end(), outcomes_.begin());
    if (rejected_) return;
  } else {
    for (std::size_t i = 0; i < group.size(); ++i) {
      fold.Decide(WriteOf(group[i]), now_ns, &outcomes_[i]);
    }
  }
  for (std::size_t i = 0; i < group.size(); ++i) {
    const fence::FencedWrite& write = WriteOf(group[i]);
    const WriteOutcome& outcome = outcomes_[i];
    if (!fence::Applied(outcome)) {
      if (outcome.verdict == Verdict::kPreconditionFailed &&
          outcome.etag == kTagNotKnownYet) {
        unknown_tags_.push_back(i);
      }
      rejected_ = true;
      continue;
    }
    AddOnce(changed_, write.fence);  // compared even when observed
    if (write.value) last_value_[write.value->key] = i;
    if (group[i].turn) turn_writes_.push_back(i);
  }
  // The changed fences as the group left them.
  for (const std::string& name : changed_) {
    Seen& seen = view_[name] = cache_.Get(name);
    const auto& raised = fold.state().fences;
    if (auto it = raised.find(name); it != raised.end()) {
      seen.token = it->second.token;
      seen.updated_at_ns = it->second.updated_at_ns;
    }
  }
}

void EtcdGroupPlan::Answer() {
  // Nothing applied (a batch names each key once: no tag to learn).
  for (std::size_t i : unknown_tags_) outcomes_[i].etag.clear();
  for (std::size_t i = 0; i < group_.size(); ++i) {
    group_[i].done(std::move(outcomes_[i]));
  }
}

std::string EtcdGroupPlan::Txn() {
  etcd::Txn txn;
  for (const std::string& name : changed_) {
    const std::string key = session_.FenceKey(name);
    compared_.push_back(cache_.Get(name).mod_revision);
    txn.If(etcd::CompareMod(key, compared_.back()));
    txn.Else(etcd::RangeOp(key));
  }
  // The values preconditions were decided on, as read (0: none).
  for (const auto& [key, revision] : value_compares_) {
    txn.If(etcd::CompareMod(session_.ValueKey(key), revision));
  }
  for (const std::string& name : changed_) {
    const Seen& now = view_[name];
    const Seen& seen = cache_.Get(name);
    if (now.token == seen.token && now.updated_at_ns == seen.updated_at_ns) {
      continue;  // only observed writes: the fence stays
    }
    moved_.push_back(name);
    txn.Then(etcd::PutOp(session_.FenceKey(name),
                         etcd::FormatFence(*now.token, now.updated_at_ns)));
  }
  for (const auto& [key, i] : last_value_) {
    const fence::FencedWrite& write = WriteOf(group_[i]);
    if (write.value->kind == fence::ValueOp::Kind::kDelete) {
      txn.Then(etcd::DeleteOp(session_.ValueKey(key), true));
    } else {
      txn.Then(
          etcd::PutOp(session_.ValueKey(key),
                      etcd::FormatValue(write.token, write.value->content_type,
                                        write.value->body),
                      {.prev_kv = true}));
    }
    value_keys_.push_back(key);
  }
  // Each turn's value is unique, so a turn whose transaction's outcome is
  // unknown can be removed without touching a later one.
  for (std::size_t i : turn_writes_) {
    const std::string key = session_.TurnKey(WriteOf(group_[i]).fence);
    turn_values_.push_back(turns_.NewTurnValue());
    txn.If(etcd::CompareCreate(key, 0));
    txn.Then(etcd::PutOp(key, turn_values_.back(), {.lease = turns_.lease()}));
    txn.Else(etcd::RangeOp(key));
  }
  success_ops_ = txn.success_ops();
  failure_ops_ = txn.failure_ops();
  return txn.Json();
}

void EtcdGroupPlan::ForgetTurns() const {
  for (std::size_t t = 0; t < turn_writes_.size(); ++t) {
    turns_.Forget(WriteOf(group_[turn_writes_[t]]).fence, turn_values_[t]);
  }
}

etcd::Conflict EtcdGroupPlan::TakeConflict(const Json& responses) {
  // Take the fences as they are now (the failure branch read them), and
  // decide again. One moved when its mod_revision (0: none) is not the one
  // Txn compared (kept: the watch may have refreshed the cache since).
  bool fence_moved = false;
  for (std::size_t i = 0; i < changed_.size(); ++i) {
    cache_.Forget(changed_[i]);
    const std::vector<Json>* kvs = etcd::RangeKvsAt(responses, i);
    const std::int64_t now =
        kvs == nullptr ? -1
        : kvs->empty() ? 0
                       : etcd::Int64Of((*kvs)[0].Find("mod_revision"));
    fence_moved = fence_moved || now != compared_[i];
    if (kvs == nullptr || kvs->size() != 1) continue;  // Load reads it
    Seen seen;
    if (etcd::SeenOf((*kvs)[0], &seen)) cache_.Take(changed_[i], seen);
  }
  // A turn another replica holds: that write waits (503, retry).
  std::vector<bool> held(group_.size(), false);
  bool any_held = false;
  for (std::size_t t = 0; t < turn_writes_.size(); ++t) {
    const std::vector<Json>* kvs =
        etcd::RangeKvsAt(responses, changed_.size() + t);
    held[turn_writes_[t]] = kvs == nullptr || !kvs->empty();
    any_held = any_held || held[turn_writes_[t]];
  }
  std::vector<Pending> rest;
  for (std::size_t i = 0; i < group_.size(); ++i) {
    if (held[i]) {
      WriteOutcome outcome;
      outcome.error = Errc::kFenceHeld;
      group_[i].done(std::move(outcome));
    } else {
      rest.push_back(std::move(group_[i]));
    }
  }
  group_ = std::move(rest);
  if (fence_moved) return etcd::Conflict::kFence;
  return any_held ? etcd::Conflict::kTurn : etcd::Conflict::kValue;
}

void EtcdGroupPlan::AnswerCommitted(const Json& answer, const Json& responses) {
  const std::int64_t revision = etcd::RevisionOf(answer);
  for (const std::string& name : moved_) {
    // (A lease grant may have cached a later state meanwhile.)
    Seen now = view_[name];
    now.mod_revision = revision;
    cache_.Wrote(name, now);
  }
  // Whether each value existed before the transaction, from its prev_kv.
  std::map<std::string, bool, std::less<>> present;
  for (std::size_t v = 0; v < value_keys_.size(); ++v) {
    const Json& response = responses.items[moved_.size() + v];
    bool existed = false;
    if (const Json* put = response.Find("response_put")) {
      existed = put->Find("prev_kv") != nullptr;
    } else if (const Json* del = response.Find("response_delete_range")) {
      existed = etcd::Int64Of(del->Find("deleted")) > 0;
    }
    present[value_keys_[v]] = existed;
  }
  // The transaction's revision is the tag of every value it put.
  for (std::size_t i : unknown_tags_) {
    const std::size_t last = last_value_.at(WriteOf(group_[i]).value->key);
    const bool put =
        WriteOf(group_[last]).value->kind == fence::ValueOp::Kind::kPut;
    outcomes_[i].etag = put ? etcd::TagOf(revision) : "";
  }
  for (std::size_t i = 0; i < group_.size(); ++i) {
    WriteOutcome& outcome = outcomes_[i];
    const fence::FencedWrite& write = WriteOf(group_[i]);
    const bool applied = fence::Applied(outcome);
    if (applied && write.value) {
      bool& exists = present[write.value->key];
      const bool put = write.value->kind == fence::ValueOp::Kind::kPut;
      outcome.created = put && !exists;
      exists = put;
      // A put replaced by a later one of the group has no tag.
      if (put && last_value_.at(write.value->key) == i) {
        outcome.etag = etcd::TagOf(revision);
      }
    }
    if (group_[i].turn && applied) *group_[i].turn = revision;
    group_[i].done(std::move(outcome));
  }
}

}  // namespace fencepost::storage
