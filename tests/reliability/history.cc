#include "tests/reliability/history.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <stdexcept>
#include <utility>

namespace fencepost::reliability {

std::string Checker::FenceOf(const std::string& key) const {
  const std::string* longest = nullptr;
  for (const std::string& scope : scopes_) {
    if (key.rfind(scope, 0) == 0 &&
        (longest == nullptr || scope.size() > longest->size())) {
      longest = &scope;
    }
  }
  return longest ? *longest : key;
}

void Checker::Floor(const std::string& key, std::uint64_t token) {
  Fence& f = fences_[FenceOf(key)];
  f.shown = std::max(f.shown, token);
}

void Checker::Retire(const Op& op) {
  Fence& f = fences_[FenceOf(op.key)];
  if (auto it = f.presented.find(op.token); it != f.presented.end()) {
    if (auto one = it->second.find(op.sent_ns); one != it->second.end()) {
      it->second.erase(one);
    }
    if (it->second.empty()) f.presented.erase(it);
  }
  auto v = values_.find(op.key);
  if (v == values_.end()) return;
  std::vector<Landed>* landed = nullptr;
  if (op.kind == Op::Kind::kPut) {
    auto puts = v->second.puts.find(op.token);
    if (puts == v->second.puts.end()) return;
    auto body = puts->second.find(op.body);
    if (body == puts->second.end()) return;
    landed = &body->second;
  } else if (op.kind == Op::Kind::kDelete) {
    auto deletes = v->second.deletes.find(op.token);
    if (deletes == v->second.deletes.end()) return;
    landed = &deletes->second;
  } else {
    return;
  }
  auto it = std::find_if(landed->begin(), landed->end(), [&](const Landed& w) {
    return !w.answered && w.sent_ns == op.sent_ns;
  });
  if (it != landed->end()) landed->erase(it);
}

bool Checker::MayBeLast(const Value& v, const Landed& w) {
  if (!v.acked || w.add > v.last_add) return true;
  return w.add == v.last_add && (!w.answered || w.acked_ns > v.last_sent);
}

// Times at which a fence (or a value) was shown at a token, and the highest
// token shown before a given time.
class Checker::ShownBefore {
 public:
  void Show(std::int64_t at_ns, std::uint64_t token) {
    shown_.emplace_back(at_ns, token);
  }
  // Call once every Show is in.
  void Seal() {
    std::sort(shown_.begin(), shown_.end());
    for (std::size_t i = 1; i < shown_.size(); ++i) {
      shown_[i].second = std::max(shown_[i].second, shown_[i - 1].second);
    }
  }
  // The highest token shown strictly before `ns`, or `floor`.
  std::uint64_t Before(std::int64_t ns, std::uint64_t floor) const {
    const auto it = std::lower_bound(
        shown_.begin(), shown_.end(), ns,
        [](const auto& s, std::int64_t t) { return s.first < t; });
    return it == shown_.begin() ? floor
                                : std::max(floor, std::prev(it)->second);
  }

 private:
  std::vector<std::pair<std::int64_t, std::uint64_t>> shown_;
};

namespace {

std::string Describe(const Read& r) {
  return r.key + ": a read of its " +
         (r.kind == Read::Kind::kFence ? "fence" : "value");
}

}  // namespace

void Checker::CheckReads(const std::vector<Op>& part,
                         const std::vector<Read>& reads) {
  if (reads.empty()) return;
  // What this part's answers showed, and when: of a fence, every token an
  // acceptance, a 409 or a read showed; of a value, the tokens of the
  // acknowledged PUTs and DELETEs.
  std::map<std::string, ShownBefore> fences, values;
  for (const Op& op : part) {
    if (op.outcome == Op::Outcome::kAccepted) {
      fences[FenceOf(op.key)].Show(op.acked_ns, op.token);
      if (op.kind != Op::Kind::kBump)
        values[op.key].Show(op.acked_ns, op.token);
    } else if (op.outcome == Op::Outcome::kRejected && op.current_token) {
      fences[FenceOf(op.key)].Show(op.acked_ns, *op.current_token);
    }
  }
  for (const Read& r : reads) {
    if (r.status == 200 && r.token) {
      fences[FenceOf(r.key)].Show(r.answered_ns, *r.token);
    }
  }
  for (auto& [name, shown] : fences) shown.Seal();
  for (auto& [name, shown] : values) shown.Seal();
  static const ShownBefore kNothing;
  for (const Read& r : reads) {
    if (r.status != 200 && r.status != 404) {
      pending_.push_back(Describe(r) + " was answered " +
                         std::to_string(r.status));
      continue;
    }
    if (r.status == 200 && !r.token) {
      pending_.push_back(Describe(r) + " was answered 200 without a token");
      continue;
    }
    // 0: none (404).
    const std::uint64_t token = r.status == 200 ? *r.token : 0;
    const std::string fence = FenceOf(r.key);
    if (r.kind == Read::Kind::kFence) {
      const Fence& f = fences_[fence];
      auto it = fences.find(fence);
      const std::uint64_t before =
          (it == fences.end() ? kNothing : it->second)
              .Before(r.sent_ns, std::max(f.acked.value_or(0), f.shown));
      if (token < before) {
        pending_.push_back(
            Describe(r) + " showed " +
            (token != 0 ? "token " + std::to_string(token) : "none") +
            " after the fence had shown token " + std::to_string(before));
      }
      const auto presented = f.presented.find(token);
      if (token != 0 && (presented == f.presented.end() ||
                         *presented->second.begin() >= r.answered_ns)) {
        pending_.push_back(Describe(r) + " showed token " +
                           std::to_string(token) +
                           ", which no writer had sent before its answer");
      }
    } else {
      auto it = values.find(r.key);
      CheckValueRead(r, token, it == values.end() ? kNothing : it->second);
    }
  }
}

void Checker::CheckValueRead(const Read& r, std::uint64_t token,
                             const ShownBefore& acks) {
  const Value& v = values_[r.key];
  const std::uint64_t acked = acks.Before(r.sent_ns, v.acked.value_or(0));
  const bool any_acked = v.acked.has_value() || acks.Before(r.sent_ns, 0) > 0;
  if (token != 0 && token < acked) {
    pending_.push_back(Describe(r) + " showed token " + std::to_string(token) +
                       " after a write of token " + std::to_string(acked) +
                       " to it had been acknowledged");
  } else if (token == 0 && any_acked) {
    bool deleted = false;
    for (auto d = v.deletes.lower_bound(acked);
         !deleted && d != v.deletes.end(); ++d) {
      for (const Landed& w : d->second) deleted |= w.sent_ns < r.answered_ns;
    }
    if (!deleted) {
      pending_.push_back(Describe(r) + " showed none after a write of token " +
                         std::to_string(acked) +
                         " to it had been acknowledged, and no DELETE at or "
                         "above it had been sent");
    }
  }
  if (token == 0) return;
  bool written = false;
  if (auto puts = v.puts.find(token); puts != v.puts.end()) {
    if (auto same = puts->second.find(r.body); same != puts->second.end()) {
      for (const Landed& w : same->second) written |= w.sent_ns < r.answered_ns;
    }
  }
  if (!written) {
    pending_.push_back(Describe(r) + " showed token " + std::to_string(token) +
                       " and body '" + r.body +
                       "', which no PUT had sent before its answer");
  }
}

void Checker::Add(const std::vector<Op>& part, const std::vector<Read>& reads) {
  const Op* const begin = part.data();
  const Op* const end = begin + part.size();
  const std::size_t add = adds_++;
  std::int64_t last_answer = last_answer_ns_;
  // By fence: the answers that show its token (an acceptance, a 409's
  // current_token).
  std::map<std::string, std::vector<const Op*>> showing;
  for (const Op* op = begin; op != end; ++op) {
    if (op->sent_ns < last_answer_ns_) {
      throw std::invalid_argument(
          "reliability::Checker: a write to " + op->key +
          " was sent before an answer of an earlier Add");
    }
    const bool answered = op->outcome != Op::Outcome::kUnknown;
    if (answered) last_answer = std::max(last_answer, op->acked_ns);
    if (op->outcome == Op::Outcome::kRefused) continue;  // it changed nothing
    const std::string fence = FenceOf(op->key);
    fences_[fence].presented[op->token].insert(op->sent_ns);
    if (!answered && after_restarts_) fences_[fence].unanswered.push_back(*op);
    if (op->outcome != Op::Outcome::kRejected) {
      const Landed landed{add, answered, op->acked_ns, op->sent_ns};
      if (op->kind == Op::Kind::kPut) {
        values_[op->key].puts[op->token][op->body].push_back(landed);
      } else if (op->kind == Op::Kind::kDelete) {
        values_[op->key].deletes[op->token].push_back(landed);
      }
    }
    if (op->outcome == Op::Outcome::kAccepted ||
        (op->outcome == Op::Outcome::kRejected && op->current_token)) {
      showing[fence].push_back(op);
    }
    if (op->outcome == Op::Outcome::kError) {
      pending_.push_back(op->key + ": token " + std::to_string(op->token) +
                         " was answered " + std::to_string(op->status));
    }
  }
  last_answer_ns_ = last_answer;
  CheckReads(part, reads);
  // What the reads showed of each fence: from its answer on, as a 409's
  // current_token, the fence is at or above it.
  std::map<std::string, std::vector<std::pair<std::int64_t, std::uint64_t>>>
      read_shows;
  for (const Read& r : reads) {
    if (r.status != 200 || !r.token) continue;
    read_shows[FenceOf(r.key)].emplace_back(r.answered_ns, *r.token);
  }

  // What an answer shows of its fence: the token accepted, or a 409's
  // current_token.
  auto shows = [](const Op* op) {
    return op->outcome == Op::Outcome::kAccepted ? op->token
                                                 : *op->current_token;
  };
  for (auto& [fence, ops] : showing) {
    Fence& f = fences_[fence];
    // The fence only rises: whatever it showed before a write was sent (in
    // an earlier Add: f.acked and f.shown; in this one: the answers that
    // came before the send), the write is accepted only at or above it,
    // and a 409 shows a current_token at or above it. Sorting by answer
    // time lets one pass keep the highest shown before each send.
    // The reads' answers show the fence too.
    std::vector<std::pair<std::int64_t, std::uint64_t>> by_answer =
        read_shows[fence];
    for (const Op* op : ops) by_answer.emplace_back(op->acked_ns, shows(op));
    std::sort(by_answer.begin(), by_answer.end());
    std::sort(ops.begin(), ops.end(),
              [](const Op* a, const Op* b) { return a->sent_ns < b->sent_ns; });
    std::size_t next = 0;
    std::uint64_t before = std::max(f.acked.value_or(0), f.shown);
    for (const Op* op : ops) {
      while (next < by_answer.size() && by_answer[next].first < op->sent_ns) {
        before = std::max(before, by_answer[next].second);
        ++next;
      }
      if (shows(op) >= before) continue;
      if (op->outcome == Op::Outcome::kRejected &&
          rejections_ == Rejections::kMayLag) {
        continue;
      }
      if (op->outcome == Op::Outcome::kAccepted) {
        pending_.push_back(op->key + ": token " + std::to_string(op->token) +
                           " was accepted after the fence had shown token " +
                           std::to_string(before));
      } else {
        pending_.push_back(
            op->key + ": a 409 to token " + std::to_string(op->token) +
            " showed current_token " + std::to_string(*op->current_token) +
            " after the fence had shown token " + std::to_string(before));
      }
    }
    for (const Op* op : ops) {
      if (op->outcome != Op::Outcome::kAccepted) continue;
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
    const auto presented = op->current_token
                               ? f.presented.find(*op->current_token)
                               : f.presented.end();
    if (presented == f.presented.end()) {
      pending_.push_back(
          op->key + ": 409 names current_token " +
          (op->current_token ? std::to_string(*op->current_token) : "none") +
          ", which no writer presented");
    } else if (*presented->second.begin() >= op->acked_ns) {
      // The fence cannot hold a token before any writer has sent it.
      pending_.push_back(op->key + ": 409 names current_token " +
                         std::to_string(*op->current_token) +
                         ", which no writer had sent before the 409 came "
                         "back");
    } else if (*op->current_token <= op->token) {
      pending_.push_back(op->key + ": 409 refused token " +
                         std::to_string(op->token) + " at current_token " +
                         std::to_string(*op->current_token));
    }
    if (op->current_token) f.shown = std::max(f.shown, *op->current_token);
  }
  for (const auto& [fence, shown] : read_shows) {
    Fence& f = fences_[fence];
    for (const auto& [at, token] : shown) f.shown = std::max(f.shown, token);
  }
}

std::vector<std::string> Checker::Check(
    const std::map<std::string, KeyState>& state) {
  std::vector<std::string> violations = std::move(pending_);
  pending_.clear();
  // Each fence's token as read through the keys it guards: they must agree;
  // the lowest read is held to what the fence showed, and every read must
  // be a token presented to it. A fence no key was read through reads 0.
  std::map<std::string, std::set<std::uint64_t>> reads;
  for (const auto& [key, found] : state) {
    reads[FenceOf(key)].insert(found.fence);
  }
  for (const auto& [fence, f] : fences_) reads[fence];  // read or not
  static const Fence kUnwritten;
  for (auto& [fence, tokens] : reads) {
    if (tokens.empty()) tokens.insert(0);
    auto it = fences_.find(fence);
    const Fence& f = it == fences_.end() ? kUnwritten : it->second;
    if (tokens.size() > 1) {
      violations.push_back(fence + ": the keys it guards read " +
                           std::to_string(tokens.size()) +
                           " different tokens for it");
    }
    const std::uint64_t lowest = *tokens.begin();
    if (f.acked && lowest < *f.acked) {
      violations.push_back(fence + ": fence " + std::to_string(lowest) +
                           " is below acknowledged token " +
                           std::to_string(*f.acked));
    }
    if (lowest < f.shown) {
      violations.push_back(fence + ": fence " + std::to_string(lowest) +
                           " went below token " + std::to_string(f.shown) +
                           ", which it had shown");
    }
    for (const std::uint64_t token : tokens) {
      if (token != 0 && f.presented.count(token) == 0) {
        violations.push_back(fence + ": fence " + std::to_string(token) +
                             " is a token nobody presented");
      }
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
  if (after_restarts_) {
    // A write without an answer whose fence now reads below its token did
    // not land, and its server is gone: it never will.
    for (auto& [fence, f] : fences_) {
      std::vector<Op> unanswered = std::move(f.unanswered);
      f.unanswered.clear();
      auto read = reads.find(fence);
      const bool seen = std::any_of(
          state.begin(), state.end(),
          [&](const auto& entry) { return FenceOf(entry.first) == fence; });
      for (const Op& op : unanswered) {
        if (seen && op.token > *read->second.begin()) Retire(op);
      }
    }
  }
  return violations;
}

std::vector<std::string> Check(
    const std::vector<Op>& history,
    const std::map<std::string, KeyState>& state,
    const std::map<std::string, std::uint64_t>& floors, Rejections rejections) {
  Checker checker;
  checker.Rejecting(rejections);
  checker.Add(history);
  for (const auto& [key, token] : floors) checker.Floor(key, token);
  return checker.Check(state);
}

}  // namespace fencepost::reliability
