#include "tests/reliability/history.h"

#include <algorithm>
#include <set>

namespace fencepost::reliability {

std::vector<std::string> Check(
    const std::vector<Op>& history,
    const std::map<std::string, KeyState>& state,
    const std::map<std::string, std::uint64_t>& floors) {
  std::vector<std::string> violations;
  std::map<std::string, std::set<std::uint64_t>> presented;
  // The bodies sent with each token, per key.
  std::map<std::string, std::map<std::uint64_t, std::set<std::string>>> bodies;
  std::map<std::string, std::vector<const Op*>> accepted;
  // The highest token each fence has shown: floors, and 409s' tokens.
  std::map<std::string, std::uint64_t> shown = floors;
  for (const Op& op : history) {
    if (op.outcome == Op::Outcome::kRefused) continue;  // it changed nothing
    presented[op.key].insert(op.token);
    if (op.kind == Op::Kind::kPut) bodies[op.key][op.token].insert(op.body);
    if (op.outcome == Op::Outcome::kAccepted) accepted[op.key].push_back(&op);
    if (op.outcome == Op::Outcome::kRejected && op.current_token) {
      shown[op.key] = std::max(shown[op.key], *op.current_token);
    }
    if (op.outcome == Op::Outcome::kError) {
      violations.push_back(op.key + ": token " + std::to_string(op.token) +
                           " was answered " + std::to_string(op.status));
    }
  }

  // The tokens of the DELETEs that were not refused, per key: what may
  // have removed a value.
  std::map<std::string, std::set<std::uint64_t>> deletes;
  for (const Op& op : history) {
    if (op.kind == Op::Kind::kDelete && op.outcome != Op::Outcome::kRejected) {
      deletes[op.key].insert(op.token);
    }
  }

  for (const auto& [key, ops] : accepted) {
    // Lost acknowledgements: of the fence (every kind sets it), and of the
    // value (the highest acknowledged PUT or DELETE decides it).
    std::uint64_t highest = 0;
    std::uint64_t highest_value_op = 0;
    for (const Op* op : ops) {
      highest = std::max(highest, op->token);
      if (op->kind != Op::Kind::kBump) {
        highest_value_op = std::max(highest_value_op, op->token);
      }
    }
    auto it = state.find(key);
    const KeyState found = it == state.end() ? KeyState{} : it->second;
    if (found.fence < highest) {
      violations.push_back(key + ": fence " + std::to_string(found.fence) +
                           " is below acknowledged token " +
                           std::to_string(highest));
    }
    if (highest_value_op != 0) {
      if (found.value && *found.value < highest_value_op) {
        violations.push_back(
            key + ": stored value's token " + std::to_string(*found.value) +
            " is below acknowledged token " + std::to_string(highest_value_op));
      } else if (!found.value) {
        // Removed by a DELETE at or above that token, which set the fence
        // at least to its own.
        const auto& tokens = deletes[key];
        const auto d = tokens.lower_bound(highest_value_op);
        if (d == tokens.end() || *d > found.fence) {
          violations.push_back(
              key +
              ": the value is gone, but no unrefused DELETE between "
              "acknowledged token " +
              std::to_string(highest_value_op) + " and the fence " +
              std::to_string(found.fence) + " could have removed it");
        }
      }
    }

    // Accepted below an earlier acknowledged acceptance. Sorting by ack time
    // lets one pass keep the highest token acknowledged before each send.
    std::vector<const Op*> by_ack = ops;
    std::sort(by_ack.begin(), by_ack.end(), [](const Op* a, const Op* b) {
      return a->acked_ns < b->acked_ns;
    });
    std::vector<const Op*> by_send = ops;
    std::sort(by_send.begin(), by_send.end(),
              [](const Op* a, const Op* b) { return a->sent_ns < b->sent_ns; });
    std::size_t next_ack = 0;
    std::uint64_t acked_before = 0;
    const Op* witness = nullptr;
    for (const Op* op : by_send) {
      while (next_ack < by_ack.size() &&
             by_ack[next_ack]->acked_ns < op->sent_ns) {
        if (by_ack[next_ack]->token >= acked_before) {
          acked_before = by_ack[next_ack]->token;
          witness = by_ack[next_ack];
        }
        ++next_ack;
      }
      if (witness != nullptr && op->token < acked_before) {
        violations.push_back(key + ": token " + std::to_string(op->token) +
                             " was accepted after token " +
                             std::to_string(acked_before) +
                             " had been acknowledged");
      }
    }
  }

  for (const Op& op : history) {
    if (op.outcome != Op::Outcome::kRejected) continue;
    if (!op.current_token || presented[op.key].count(*op.current_token) == 0) {
      violations.push_back(
          op.key + ": 409 names current_token " +
          (op.current_token ? std::to_string(*op.current_token) : "none") +
          ", which no writer presented");
    } else if (*op.current_token <= op.token) {
      violations.push_back(op.key + ": 409 refused token " +
                           std::to_string(op.token) + " at current_token " +
                           std::to_string(*op.current_token));
    }
  }

  for (const auto& [key, floor] : shown) {
    auto it = state.find(key);
    const std::uint64_t fence = it == state.end() ? 0 : it->second.fence;
    if (fence < floor) {
      violations.push_back(key + ": fence " + std::to_string(fence) +
                           " went below token " + std::to_string(floor) +
                           ", which it had shown");
    }
  }

  for (const auto& [key, found] : state) {
    if (found.value && *found.value > found.fence) {
      violations.push_back(
          key + ": stored value's token " + std::to_string(*found.value) +
          " is above the fence " + std::to_string(found.fence));
    }
    if (found.value && bodies[key][*found.value].count(found.body) == 0) {
      violations.push_back(key + ": stored body '" + found.body +
                           "' is not what a PUT with token " +
                           std::to_string(*found.value) + " sent");
    }
    const auto& tokens = presented[key];
    if (found.fence != 0 && tokens.count(found.fence) == 0) {
      violations.push_back(key + ": fence " + std::to_string(found.fence) +
                           " is a token nobody presented");
    }
    if (found.value && tokens.count(*found.value) == 0) {
      violations.push_back(key + ": stored value's token " +
                           std::to_string(*found.value) +
                           " is a token nobody presented");
    }
  }
  return violations;
}

}  // namespace fencepost::reliability
