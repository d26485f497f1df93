#include "tests/reliability/history.h"

#include <algorithm>
#include <stdexcept>

namespace fencepost::reliability {

const std::string& Checker::FenceOf(const std::string& key) const {
  auto it = fence_of_.find(key);
  return it == fence_of_.end() ? key : it->second;
}

void Checker::Floor(const std::string& key, std::uint64_t token) {
  Fence& f = fences_[FenceOf(key)];
  f.shown = std::max(f.shown, token);
}

bool Checker::MayBeLast(const Value& v, const Landed& w) {
  if (!v.acked || w.add > v.last_add) return true;
  return w.add == v.last_add && (!w.answered || w.acked_ns > v.last_sent);
}

void Checker::Add(const Op* begin, const Op* end) {
  const std::size_t add = adds_++;
  std::int64_t last_answer = last_answer_ns_;
  std::map<std::string, std::vector<const Op*>> accepted;  // by fence
  for (const Op* op = begin; op != end; ++op) {
    if (op->sent_ns < last_answer_ns_) {
      throw std::invalid_argument(
          "reliability::Checker: a write to " + op->key +
          " was sent before an answer of an earlier Add");
    }
    if (!op->fence.empty() && op->fence != op->key) {
      fence_of_[op->key] = op->fence;
    }
    const bool answered = op->outcome != Op::Outcome::kUnknown;
    if (answered) last_answer = std::max(last_answer, op->acked_ns);
    if (op->outcome == Op::Outcome::kRefused) continue;  // it changed nothing
    const std::string& fence = FenceOf(op->key);
    fences_[fence].presented.insert(op->token);
    if (op->outcome != Op::Outcome::kRejected) {
      const Landed landed{add, answered, op->acked_ns};
      if (op->kind == Op::Kind::kPut) {
        values_[op->key].puts[op->token][op->body].push_back(landed);
      } else if (op->kind == Op::Kind::kDelete) {
        values_[op->key].deletes[op->token].push_back(landed);
      }
    }
    if (op->outcome == Op::Outcome::kAccepted) {
      accepted[fence].push_back(op);
    }
    if (op->outcome == Op::Outcome::kError) {
      pending_.push_back(op->key + ": token " + std::to_string(op->token) +
                         " was answered " + std::to_string(op->status));
    }
  }
  last_answer_ns_ = last_answer;

  for (auto& [fence, ops] : accepted) {
    Fence& f = fences_[fence];
    // Accepted below an earlier acknowledged acceptance. Sorting by ack time
    // lets one pass keep the highest token acknowledged before each send;
    // every write of an earlier Add was answered before this one's were
    // sent, so the pass starts from their highest.
    std::vector<const Op*> by_ack = ops;
    std::sort(by_ack.begin(), by_ack.end(), [](const Op* a, const Op* b) {
      return a->acked_ns < b->acked_ns;
    });
    std::sort(ops.begin(), ops.end(),
              [](const Op* a, const Op* b) { return a->sent_ns < b->sent_ns; });
    std::size_t next_ack = 0;
    bool any = f.acked.has_value();
    std::uint64_t acked_before = f.acked.value_or(0);
    for (const Op* op : ops) {
      while (next_ack < by_ack.size() &&
             by_ack[next_ack]->acked_ns < op->sent_ns) {
        acked_before = std::max(acked_before, by_ack[next_ack]->token);
        any = true;
        ++next_ack;
      }
      if (any && op->token < acked_before) {
        pending_.push_back(op->key + ": token " + std::to_string(op->token) +
                           " was accepted after token " +
                           std::to_string(acked_before) +
                           " had been acknowledged");
      }
    }
    for (const Op* op : ops) {
      f.acked = std::max(f.acked.value_or(0), op->token);
      if (op->kind == Op::Kind::kBump) continue;
      Value& v = values_[op->key];
      if (!v.acked || op->token > *v.acked) {
        v.acked = op->token;
        v.last_add = add;
        v.last_sent = op->sent_ns;
      } else if (op->token == *v.acked) {
        v.last_sent = v.last_add == add ? std::max(v.last_sent, op->sent_ns)
                                        : op->sent_ns;
        v.last_add = add;
      }
    }
  }

  for (const Op* op = begin; op != end; ++op) {
    if (op->outcome != Op::Outcome::kRejected) continue;
    Fence& f = fences_[FenceOf(op->key)];
    if (!op->current_token || f.presented.count(*op->current_token) == 0) {
      pending_.push_back(
          op->key + ": 409 names current_token " +
          (op->current_token ? std::to_string(*op->current_token) : "none") +
          ", which no writer presented");
    } else if (*op->current_token <= op->token) {
      pending_.push_back(op->key + ": 409 refused token " +
                         std::to_string(op->token) + " at current_token " +
                         std::to_string(*op->current_token));
    }
    if (op->current_token) f.shown = std::max(f.shown, *op->current_token);
  }
}

std::vector<std::string> Checker::Check(
    const std::map<std::string, KeyState>& state) {
  std::vector<std::string> violations = std::move(pending_);
  pending_.clear();
  // Each fence's token as read through the keys it guards (the lowest, if
  // they disagree): 0 when no key of it was read.
  std::map<std::string, std::uint64_t> read;
  for (const auto& [key, found] : state) {
    const std::string& fence = FenceOf(key);
    auto [it, first] = read.emplace(fence, found.fence);
    if (!first) it->second = std::min(it->second, found.fence);
  }
  for (const auto& [fence, f] : fences_) {
    auto it = read.find(fence);
    const std::uint64_t token = it == read.end() ? 0 : it->second;
    if (f.acked && token < *f.acked) {
      violations.push_back(fence + ": fence " + std::to_string(token) +
                           " is below acknowledged token " +
                           std::to_string(*f.acked));
    }
    if (token < f.shown) {
      violations.push_back(fence + ": fence " + std::to_string(token) +
                           " went below token " + std::to_string(f.shown) +
                           ", which it had shown");
    }
    if (token != 0 && f.presented.count(token) == 0) {
      violations.push_back(fence + ": fence " + std::to_string(token) +
                           " is a token nobody presented");
    }
  }

  for (const auto& [key, v] : values_) {
    auto it = state.find(key);
    const KeyState found = it == state.end() ? KeyState{} : it->second;
    if (v.acked && found.value && *found.value < *v.acked) {
      violations.push_back(
          key + ": stored value's token " + std::to_string(*found.value) +
          " is below acknowledged token " + std::to_string(*v.acked));
    } else if (v.acked && !found.value) {
      // Removed by a DELETE at or above that token that may have landed
      // last, and which set the fence at least to its own.
      bool explained = false;
      for (auto d = v.deletes.lower_bound(*v.acked);
           !explained && d != v.deletes.end() && d->first <= found.fence; ++d) {
        for (const Landed& w : d->second) explained |= MayBeLast(v, w);
      }
      if (!explained) {
        violations.push_back(
            key +
            ": the value is gone, but no DELETE between acknowledged "
            "token " +
            std::to_string(*v.acked) + " and the fence " +
            std::to_string(found.fence) +
            " could have landed after every acknowledged write at " +
            std::to_string(*v.acked));
      }
    }
  }

  static const Value kNone;
  for (const auto& [key, found] : state) {
    if (!found.value) continue;
    auto it = values_.find(key);
    const Value& v = it == values_.end() ? kNone : it->second;
    if (*found.value > found.fence) {
      violations.push_back(
          key + ": stored value's token " + std::to_string(*found.value) +
          " is above the fence " + std::to_string(found.fence));
    }
    if (v.acked && *found.value < *v.acked) continue;  // lost, above
    // A PUT with that token and body that may have landed last.
    bool explained = false;
    if (auto puts = v.puts.find(*found.value); puts != v.puts.end()) {
      if (auto same = puts->second.find(found.body);
          same != puts->second.end()) {
        for (const Landed& w : same->second) explained |= MayBeLast(v, w);
      }
    }
    if (!explained) {
      violations.push_back(key + ": stored value (token " +
                           std::to_string(*found.value) + ", body '" +
                           found.body +
                           "') is not what a PUT that may have landed last "
                           "sent");
    }
  }
  return violations;
}

std::vector<std::string> Check(
    const std::vector<Op>& history,
    const std::map<std::string, KeyState>& state,
    const std::map<std::string, std::uint64_t>& floors) {
  Checker checker;
  checker.Add(history.data(), history.data() + history.size());
  for (const auto& [key, token] : floors) checker.Floor(key, token);
  return checker.Check(state);
}

}  // namespace fencepost::reliability
