#include "tests/reliability/history.h"

#include <algorithm>
#include <stdexcept>

namespace fencepost::reliability {

void Checker::Floor(const std::string& key, std::uint64_t token) {
  Key& k = keys_[key];
  k.shown = std::max(k.shown, token);
}

bool Checker::MayBeLast(const Key& k, const Landed& w) {
  if (!k.acked_value || w.add > k.last_add) return true;
  return w.add == k.last_add && (!w.answered || w.acked_ns > k.last_sent);
}

void Checker::Add(const Op* begin, const Op* end) {
  const std::size_t add = adds_++;
  std::int64_t last_answer = last_answer_ns_;
  std::map<std::string, std::vector<const Op*>> accepted;
  for (const Op* op = begin; op != end; ++op) {
    if (op->sent_ns < last_answer_ns_) {
      throw std::invalid_argument(
          "reliability::Checker: a write to " + op->key +
          " was sent before an answer of an earlier Add");
    }
    const bool answered = op->outcome != Op::Outcome::kUnknown;
    if (answered) last_answer = std::max(last_answer, op->acked_ns);
    if (op->outcome == Op::Outcome::kRefused) continue;  // it changed nothing
    Key& k = keys_[op->key];
    k.presented.insert(op->token);
    if (op->outcome != Op::Outcome::kRejected) {
      const Landed landed{add, answered, op->acked_ns};
      if (op->kind == Op::Kind::kPut) {
        k.puts[op->token][op->body].push_back(landed);
      } else if (op->kind == Op::Kind::kDelete) {
        k.deletes[op->token].push_back(landed);
      }
    }
    if (op->outcome == Op::Outcome::kAccepted) {
      accepted[op->key].push_back(op);
    }
    if (op->outcome == Op::Outcome::kError) {
      pending_.push_back(op->key + ": token " + std::to_string(op->token) +
                         " was answered " + std::to_string(op->status));
    }
  }
  last_answer_ns_ = last_answer;

  for (auto& [key, ops] : accepted) {
    Key& k = keys_[key];
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
    bool any = k.acked.has_value();
    std::uint64_t acked_before = k.acked.value_or(0);
    for (const Op* op : ops) {
      while (next_ack < by_ack.size() &&
             by_ack[next_ack]->acked_ns < op->sent_ns) {
        acked_before = std::max(acked_before, by_ack[next_ack]->token);
        any = true;
        ++next_ack;
      }
      if (any && op->token < acked_before) {
        pending_.push_back(key + ": token " + std::to_string(op->token) +
                           " was accepted after token " +
                           std::to_string(acked_before) +
                           " had been acknowledged");
      }
    }
    for (const Op* op : ops) {
      k.acked = std::max(k.acked.value_or(0), op->token);
      if (op->kind == Op::Kind::kBump) continue;
      if (!k.acked_value || op->token > *k.acked_value) {
        k.acked_value = op->token;
        k.last_add = add;
        k.last_sent = op->sent_ns;
      } else if (op->token == *k.acked_value) {
        k.last_sent = k.last_add == add ? std::max(k.last_sent, op->sent_ns)
                                        : op->sent_ns;
        k.last_add = add;
      }
    }
  }

  for (const Op* op = begin; op != end; ++op) {
    if (op->outcome != Op::Outcome::kRejected) continue;
    Key& k = keys_[op->key];
    if (!op->current_token || k.presented.count(*op->current_token) == 0) {
      pending_.push_back(
          op->key + ": 409 names current_token " +
          (op->current_token ? std::to_string(*op->current_token) : "none") +
          ", which no writer presented");
    } else if (*op->current_token <= op->token) {
      pending_.push_back(op->key + ": 409 refused token " +
                         std::to_string(op->token) + " at current_token " +
                         std::to_string(*op->current_token));
    }
    if (op->current_token) k.shown = std::max(k.shown, *op->current_token);
  }
}

std::vector<std::string> Checker::Check(
    const std::map<std::string, KeyState>& state) {
  std::vector<std::string> violations = std::move(pending_);
  pending_.clear();
  for (const auto& [key, k] : keys_) {
    auto it = state.find(key);
    const KeyState found = it == state.end() ? KeyState{} : it->second;
    // Lost acknowledgements: of the fence (every kind sets it), and of the
    // value (the highest acknowledged PUT or DELETE decides it).
    if (k.acked && found.fence < *k.acked) {
      violations.push_back(key + ": fence " + std::to_string(found.fence) +
                           " is below acknowledged token " +
                           std::to_string(*k.acked));
    }
    if (k.acked_value && found.value && *found.value < *k.acked_value) {
      violations.push_back(
          key + ": stored value's token " + std::to_string(*found.value) +
          " is below acknowledged token " + std::to_string(*k.acked_value));
    } else if (k.acked_value && !found.value) {
      // Removed by a DELETE at or above that token that may have landed
      // last, and which set the fence at least to its own.
      bool explained = false;
      for (auto d = k.deletes.lower_bound(*k.acked_value);
           !explained && d != k.deletes.end() && d->first <= found.fence; ++d) {
        for (const Landed& w : d->second) explained |= MayBeLast(k, w);
      }
      if (!explained) {
        violations.push_back(
            key +
            ": the value is gone, but no DELETE between acknowledged "
            "token " +
            std::to_string(*k.acked_value) + " and the fence " +
            std::to_string(found.fence) +
            " could have landed after every acknowledged write at " +
            std::to_string(*k.acked_value));
      }
    }
    if (found.fence < k.shown) {
      violations.push_back(key + ": fence " + std::to_string(found.fence) +
                           " went below token " + std::to_string(k.shown) +
                           ", which it had shown");
    }
  }

  static const Key kNone;
  for (const auto& [key, found] : state) {
    auto it = keys_.find(key);
    const Key& k = it == keys_.end() ? kNone : it->second;
    if (found.value && *found.value > found.fence) {
      violations.push_back(
          key + ": stored value's token " + std::to_string(*found.value) +
          " is above the fence " + std::to_string(found.fence));
    }
    if (found.value && (!k.acked_value || *found.value >= *k.acked_value)) {
      // A PUT with that token and body that may have landed last. (Below
      // the acknowledged token, the value is reported lost above.)
      bool explained = false;
      if (auto puts = k.puts.find(*found.value); puts != k.puts.end()) {
        if (auto same = puts->second.find(found.body);
            same != puts->second.end()) {
          for (const Landed& w : same->second) explained |= MayBeLast(k, w);
        }
      }
      if (!explained) {
        violations.push_back(key + ": stored body '" + found.body +
                             "' is not what a PUT with token " +
                             std::to_string(*found.value) +
                             " that may have landed last sent");
      }
    }
    if (found.fence != 0 && k.presented.count(found.fence) == 0) {
      violations.push_back(key + ": fence " + std::to_string(found.fence) +
                           " is a token nobody presented");
    }
    if (found.value && k.presented.count(*found.value) == 0) {
      violations.push_back(key + ": stored value's token " +
                           std::to_string(*found.value) +
                           " is a token nobody presented");
    }
  }
  return violations;
}

std::vector<std::string> Check(
    const std::vector<Op>& history,
    const std::map<std::string, KeyState>& state,
    const std::map<std::string, std::uint64_t>& floors) {
  Checker checker;
  for (const auto& [key, token] : floors) checker.Floor(key, token);
  checker.Add(history.data(), history.data() + history.size());
  return checker.Check(state);
}

}  // namespace fencepost::reliability
