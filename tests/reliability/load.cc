#include "tests/reliability/load.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "tests/testing/http_client.h"

namespace fencepost::reliability {
namespace {

std::int64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Disconnect Caught(std::uint16_t port, const std::exception& e,
                  std::optional<std::size_t> op = std::nullopt) {
  return {Now(), port, e.what(), op};
}

std::optional<std::uint64_t> NumberAfter(const std::string& body,
                                         const std::string& field) {
  const auto at = body.find("\"" + field + "\":");
  if (at == std::string::npos) return std::nullopt;
  return std::stoull(body.substr(at + field.size() + 3));
}

// LeaseLoad::Check's orders between the grants of the lease `name` and the
// writes to the key `name`, which share one fence (see load.h).
void CheckGrantsAgainstWrites(
    const std::string& name, const std::vector<const LeaseLoad::Grant*>& grants,
    const std::vector<const Op*>& writes,
    std::vector<std::string>* violations) {
  // What the fence showed, and when the client learned it: the token of an
  // acknowledged write, a 409's current_token.
  struct Shown {
    std::int64_t at_ns = 0;
    std::uint64_t token = 0;
    bool accepted = false;
  };
  std::vector<Shown> shown;
  std::vector<const Op*> answered;  // the writes whose answer tells the fence
  for (const Op* op : writes) {
    if (op->outcome == Op::Outcome::kAccepted) {
      shown.push_back({op->acked_ns, op->token, true});
      answered.push_back(op);
    } else if (op->outcome == Op::Outcome::kRejected && op->current_token) {
      shown.push_back({op->acked_ns, *op->current_token, false});
      answered.push_back(op);
    }
  }

  // A grant's token is 1 + max(lease token, fence token): above whatever
  // the fence showed before the grant was sent.
  std::sort(shown.begin(), shown.end(),
            [](const Shown& a, const Shown& b) { return a.at_ns < b.at_ns; });
  std::vector<const LeaseLoad::Grant*> by_send = grants;
  std::sort(by_send.begin(), by_send.end(),
            [](const LeaseLoad::Grant* a, const LeaseLoad::Grant* b) {
              return a->sent_ns < b->sent_ns;
            });
  std::size_t next = 0;
  std::uint64_t highest = 0;
  const Shown* witness = nullptr;
  for (const LeaseLoad::Grant* g : by_send) {
    while (next < shown.size() && shown[next].at_ns < g->sent_ns) {
      if (witness == nullptr || shown[next].token >= highest) {
        highest = shown[next].token;
        witness = &shown[next];
      }
      ++next;
    }
    if (witness != nullptr && g->token <= highest) {
      violations->push_back(
          name + ": grant " + std::to_string(g->token) +
          " is not above token " + std::to_string(highest) + ", which " +
          (witness->accepted ? "an acknowledged write" : "a 409") +
          " had shown on the fence before the grant was sent");
    }
  }

  // The grant raised the fence before it was acknowledged (durably: in the
  // transaction that granted): a write sent afterwards meets a fence at
  // least as high.
  std::vector<const LeaseLoad::Grant*> by_ack = grants;
  std::sort(by_ack.begin(), by_ack.end(),
            [](const LeaseLoad::Grant* a, const LeaseLoad::Grant* b) {
              return a->acked_ns < b->acked_ns;
            });
  std::sort(answered.begin(), answered.end(),
            [](const Op* a, const Op* b) { return a->sent_ns < b->sent_ns; });
  next = 0;
  std::uint64_t granted = 0;
  for (const Op* op : answered) {
    while (next < by_ack.size() && by_ack[next]->acked_ns < op->sent_ns) {
      granted = std::max(granted, by_ack[next]->token);
      ++next;
    }
    if (granted == 0) continue;
    if (op->outcome == Op::Outcome::kAccepted && op->token < granted) {
      violations->push_back(name + ": token " + std::to_string(op->token) +
                            " was accepted after grant " +
                            std::to_string(granted) + " had been acknowledged");
    } else if (op->outcome == Op::Outcome::kRejected &&
               *op->current_token < granted) {
      violations->push_back(
          name + ": a 409 to token " + std::to_string(op->token) +
          " showed current_token " + std::to_string(*op->current_token) +
          " after grant " + std::to_string(granted) + " had been acknowledged");
    }
  }
}

}  // namespace

Load::Load(std::vector<std::string> keys, std::size_t hot, int threads)
    : keys_(std::move(keys)), hot_(hot), threads_(threads) {}

void Load::Start(std::uint16_t port) {
  admin_port_ = 0;
  StartWriters([port] { return port; }, false);
}

void Load::Start(std::uint16_t port, std::uint16_t admin_port) {
  admin_port_ = admin_port;
  StartWriters([port] { return port; }, false);
}

void Load::Start(std::function<std::uint16_t()> pick) {
  admin_port_ = 0;
  StartWriters(std::move(pick), true);
}

void Load::StartWriters(std::function<std::uint16_t()> pick, bool reconnect) {
  stop_ = false;
  pick_ = std::move(pick);
  std::random_device seeds;
  for (int t = 0; t < threads_; ++t) {
    writers_.emplace_back([this, t, reconnect, seed = seeds()] {
      Write(pick_, reconnect, t, seed);
    });
  }
  for (int t = 0; t < readers_; ++t) {
    writers_.emplace_back([this, reconnect, seed = seeds()] {
      ReadLoop(pick_, reconnect, seed);
    });
  }
}

const std::string& Load::PickKey(std::mt19937& rng) const {
  return hot_ > 0 && rng() % 2 ? keys_[rng() % hot_]
                               : keys_[rng() % keys_.size()];
}

void Load::ReadLoop(const std::function<std::uint16_t()>& pick, bool reconnect,
                    std::uint32_t seed) {
  std::mt19937 local(seed);
  while (!stop_) {
    std::uint16_t port = 0;
    try {
      port = pick();
      testing::HttpClient client(port);
      std::optional<testing::HttpClient> admin;
      if (admin_port_ != 0) admin.emplace(admin_port_);
      while (!stop_) {
        Read read;
        read.kind = admin && (!read_values_ || local() % 2)
                        ? Read::Kind::kFence
                        : Read::Kind::kValue;
        read.key = PickKey(local);
        read.sent_ns = Now();
        const testing::HttpResponse r =
            read.kind == Read::Kind::kFence
                ? admin->Request("GET", "/v1/fences/" + read.key)
                : client.Request("GET", "/" + read.key);
        read.answered_ns = Now();
        read.status = r.status;
        if (r.status == 200 && read.kind == Read::Kind::kFence) {
          read.token = NumberAfter(r.body, "token");
        } else if (r.status == 200) {
          if (r.has("fencing-token")) {
            read.token = std::stoull(r.header("fencing-token"));
          }
          read.body = r.body;
        }
        std::lock_guard lock(mu_);
        reads_.push_back(std::move(read));
      }
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(mu_);
        disconnects_.push_back(Caught(port, e));
      }
      if (!reconnect) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void Load::Stop() {
  stop_ = true;
  for (auto& writer : writers_) writer.join();
  writers_.clear();
}

std::int64_t SteadyNs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

std::vector<std::string> DisconnectsWhileAlive(
    const std::vector<Disconnect>& found,
    std::chrono::steady_clock::time_point started,
    std::chrono::steady_clock::time_point killed) {
  std::vector<std::string> lines;
  for (const Disconnect& d : found) {
    if (d.at_ns < SteadyNs(started) || d.at_ns >= SteadyNs(killed)) continue;
    lines.push_back("the connection to port " + std::to_string(d.port) +
                    " failed " +
                    std::to_string((SteadyNs(killed) - d.at_ns) / 1000000) +
                    " ms before the harness killed the server: " + d.what);
  }
  return lines;
}

bool Load::AcknowledgesWithin(std::chrono::seconds timeout) const {
  const std::size_t before = acknowledged();
  AwaitAcknowledgedAbove(before, timeout);
  return acknowledged() > before;
}

void Load::AwaitAcknowledgedAbove(std::size_t count,
                                  std::chrono::seconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (acknowledged_ <= count &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::size_t Load::AcknowledgedOf(Op::Kind kind) const {
  std::size_t n = 0;
  for (const Op& op : history_) {
    n += op.kind == kind && op.outcome == Op::Outcome::kAccepted;
  }
  return n;
}

std::size_t Load::AcknowledgedSince(std::size_t from) const {
  std::size_t n = 0;
  for (std::size_t i = from; i < history_.size(); ++i) {
    n += history_[i].outcome == Op::Outcome::kAccepted;
  }
  return n;
}

void Load::Write(const std::function<std::uint16_t()>& pick, bool reconnect,
                 int thread, std::uint32_t seed) {
  std::mt19937 local(seed);
  while (!stop_) {
    std::uint16_t port = 0;
    std::optional<std::size_t> in_flight;
    try {
      port = pick();
      testing::HttpClient client(port);
      std::optional<testing::HttpClient> admin;
      if (admin_port_ != 0) admin.emplace(admin_port_);
      while (!stop_) {
        Op op;
        const auto roll = admin ? local() % 10 : 9;
        op.kind = roll == 0   ? Op::Kind::kDelete
                  : roll == 1 ? Op::Kind::kBump
                              : Op::Kind::kPut;
        op.key = PickKey(local);
        const std::uint64_t fresh = counter_++;
        op.token = local() % 5 == 0 ? fresh - 1 - local() % 30 : fresh;
        if (op.kind == Op::Kind::kPut) {
          op.body = "value " + std::to_string(op.token) + " from " +
                    std::to_string(thread);
        }
        op.sent_ns = Now();
        std::size_t at;
        {
          std::lock_guard lock(mu_);
          at = history_.size();
          history_.push_back(op);  // kUnknown until it is answered
        }
        in_flight = at;
        ++sent_;
        const testing::Headers token = {
            {"Fencing-Token", std::to_string(op.token)}};
        testing::HttpResponse r;
        switch (op.kind) {
          case Op::Kind::kPut:
            r = client.Request("PUT", "/" + op.key, token, op.body);
            break;
          case Op::Kind::kDelete:
            r = client.Request("DELETE", "/" + op.key, token);
            break;
          case Op::Kind::kBump:
            r = admin->Request("PUT", "/v1/fences/" + op.key, token);
            break;
        }
        in_flight.reset();
        if (!Answered(at, r)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    } catch (const std::exception& e) {
      // The write in flight stays unknown. Recorded: whether the server
      // died at the harness's word is the test's to judge.
      {
        std::lock_guard lock(mu_);
        disconnects_.push_back(Caught(port, e, in_flight));
      }
      if (!reconnect) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

bool Load::Answered(std::size_t at, const testing::HttpResponse& r) {
  std::lock_guard lock(mu_);
  Op& done = history_[at];
  done.acked_ns = Now();
  if (r.status / 100 == 2 ||
      (relayed_404_ && done.kind == Op::Kind::kDelete && r.status == 404 &&
       r.header("fencing-token") == std::to_string(done.token))) {
    done.outcome = Op::Outcome::kAccepted;
    ++acknowledged_;
  } else if (r.status == 409) {
    done.outcome = Op::Outcome::kRejected;
    done.current_token = NumberAfter(r.body, "current_token");
  } else if (r.status == 503 && held_fences_ &&
             r.body.find("fence-held") != std::string::npos) {
    done.outcome = Op::Outcome::kRefused;
    ++refused_;
    return false;
  } else if (r.status == 503 && unavailable_unknown_) {
    done.outcome = Op::Outcome::kUnknown;
  } else {
    done.outcome = Op::Outcome::kError;
    done.status = r.status;
  }
  return true;
}

void LeaseLoad::Start(std::uint16_t admin_port) {
  stop_ = false;
  thread_ = std::thread([this, admin_port, seed = std::random_device{}()] {
    Run(admin_port, seed);
  });
}

void LeaseLoad::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void LeaseLoad::Run(std::uint16_t admin_port, std::uint32_t seed) {
  std::mt19937 local(seed);
  try {
    testing::HttpClient client(admin_port);
    while (!stop_) {
      const std::string& name = names_[local() % names_.size()];
      const std::string holder = "h" + std::to_string(holders_++);
      Grant grant{name, 0, Now(), 0};
      {
        // Until answered: if the server dies first, Recover learns whether
        // it applied this grant.
        std::lock_guard lock(mu_);
        in_flight_ = grant;
      }
      auto r = client.Request("PUT", "/v1/leases/" + name, {},
                              "{\"holder\":\"" + holder + "\",\"ttl_ms\":100}");
      {
        std::lock_guard lock(mu_);
        in_flight_.reset();
      }
      if (r.status != 200) continue;
      grant.acked_ns = Now();
      grant.token = NumberAfter(r.body, "token").value();
      {
        std::lock_guard lock(mu_);
        grants_.push_back(grant);
      }
      if (local() % 2) {
        client.Request("DELETE", "/v1/leases/" + name,
                       {{"Fencing-Token", std::to_string(grant.token)}},
                       "{\"holder\":\"" + holder + "\"}");
      }
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    disconnects_.push_back(Caught(admin_port, e));
  }
}

std::vector<std::string> LeaseLoad::Recover(std::uint16_t admin_port) {
  std::vector<std::string> violations;
  std::lock_guard lock(mu_);
  std::optional<Grant> in_flight = std::move(in_flight_);
  in_flight_.reset();
  for (const std::string& name :
       std::set<std::string>(names_.begin(), names_.end())) {
    const auto lease = testing::Fetch(admin_port, "GET", "/v1/leases/" + name);
    if (lease.status != 200) continue;  // never granted (Check sees a loss)
    const std::uint64_t token = NumberAfter(lease.body, "token").value();
    bool known = false;
    for (const Grant& g : grants_) known |= g.name == name && g.token == token;
    if (known) continue;
    if (in_flight && in_flight->name == name) {
      in_flight->token = token;
      in_flight->acked_ns = Now();  // it was applied by now
      grants_.push_back(*in_flight);
      ++recovered_;
      in_flight.reset();
      continue;
    }
    violations.push_back(name + ": the lease holds token " +
                         std::to_string(token) +
                         ", which no grant was answered with and no acquire "
                         "in flight at the crash could have got");
  }
  return violations;
}

std::vector<Op> LeaseLoad::GrantsAsWrites(const std::vector<std::string>& keys,
                                          std::size_t from) const {
  const std::set<std::string> written(keys.begin(), keys.end());
  std::vector<Op> ops;
  for (std::size_t i = from; i < grants_.size(); ++i) {
    const Grant& g = grants_[i];
    if (written.count(g.name) == 0) continue;
    Op op;
    op.key = g.name;
    op.token = g.token;
    op.sent_ns = g.sent_ns;
    op.kind = Op::Kind::kBump;  // it raises the fence, and stores no value
    op.outcome = Op::Outcome::kUnknown;
    ops.push_back(std::move(op));
  }
  return ops;
}

std::vector<std::string> LeaseLoad::Check(std::uint16_t admin_port,
                                          const std::vector<Op>& writes) const {
  std::vector<std::string> violations;
  std::map<std::string, std::vector<const Grant*>> by_name;
  for (const std::string& name : names_) by_name[name];  // granted or not
  for (const Grant& g : grants_) by_name[g.name].push_back(&g);
  std::map<std::string, std::vector<const Op*>> writes_by_name;
  for (const Op& op : writes) {
    if (by_name.count(op.key) > 0) writes_by_name[op.key].push_back(&op);
  }
  for (const auto& [name, grants] : by_name) {
    std::set<std::uint64_t> tokens;
    std::uint64_t highest = 0;
    for (const Grant* g : grants) {
      if (!tokens.insert(g->token).second) {
        violations.push_back(name + ": token " + std::to_string(g->token) +
                             " was granted twice");
      }
      highest = std::max(highest, g->token);
    }
    // In real-time order: a grant sent after another was acknowledged has
    // a higher token. Sorted by ack time, one pass keeps the highest token
    // acknowledged before each send.
    std::vector<const Grant*> by_ack = grants;
    std::sort(by_ack.begin(), by_ack.end(), [](const Grant* a, const Grant* b) {
      return a->acked_ns < b->acked_ns;
    });
    std::vector<const Grant*> by_send = grants;
    std::sort(
        by_send.begin(), by_send.end(),
        [](const Grant* a, const Grant* b) { return a->sent_ns < b->sent_ns; });
    std::size_t next = 0;
    const Grant* before = nullptr;  // the highest acknowledged before a send
    for (const Grant* b : by_send) {
      while (next < by_ack.size() && by_ack[next]->acked_ns < b->sent_ns) {
        if (before == nullptr || by_ack[next]->token > before->token) {
          before = by_ack[next];
        }
        ++next;
      }
      if (before != nullptr && before->token >= b->token) {
        violations.push_back(name + ": grant " + std::to_string(b->token) +
                             " came after grant " +
                             std::to_string(before->token));
      }
    }
    const auto lease = testing::Fetch(admin_port, "GET", "/v1/leases/" + name);
    const auto fence = testing::Fetch(admin_port, "GET", "/v1/fences/" + name);
    const std::uint64_t lease_token =
        lease.status == 200 ? NumberAfter(lease.body, "token").value() : 0;
    const std::uint64_t fence_token =
        fence.status == 200 ? NumberAfter(fence.body, "token").value() : 0;
    if (lease_token < highest || fence_token < highest) {
      violations.push_back(name + ": lease " + std::to_string(lease_token) +
                           " or fence " + std::to_string(fence_token) +
                           " is below granted token " +
                           std::to_string(highest));
    }
    // The grant that gave the lease its token raised the fence to it in
    // the same transaction: never one without the other.
    if (fence_token < lease_token) {
      violations.push_back(name + ": fence " + std::to_string(fence_token) +
                           " is below the lease's token " +
                           std::to_string(lease_token));
    }
    if (auto it = writes_by_name.find(name); it != writes_by_name.end()) {
      CheckGrantsAgainstWrites(name, grants, it->second, &violations);
    }
  }
  return violations;
}

void BatchLoad::Start(std::uint16_t data_port) {
  stop_ = false;
  thread_ = std::thread([this, data_port, seed = std::random_device{}()] {
    Run(data_port, seed);
  });
}

void BatchLoad::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void BatchLoad::Run(std::uint16_t data_port, std::uint32_t seed) {
  std::mt19937 local(seed);
  try {
    testing::HttpClient client(data_port);
    while (!stop_) {
      const int pair = static_cast<int>(local() % kPairs);
      const std::uint64_t token = counter_++;
      // base64 of "t" + 7 digits (8 bytes: no padding).
      const std::string body = "t" + std::to_string(token).substr(0, 7);
      static const char kAlphabet[] =
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      std::string b64;
      for (std::size_t i = 0; i < body.size(); i += 3) {
        std::uint32_t v = static_cast<unsigned char>(body[i]) << 16;
        if (i + 1 < body.size())
          v |= static_cast<unsigned char>(body[i + 1]) << 8;
        if (i + 2 < body.size()) v |= static_cast<unsigned char>(body[i + 2]);
        const std::size_t n = std::min<std::size_t>(3, body.size() - i);
        for (std::size_t k = 0; k < 4; ++k) {
          b64 += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
        }
      }
      const std::string prefix = "pair/" + std::to_string(pair) + "/";
      const std::string doc = R"({"ops":[{"op":"put","key":")" + prefix +
                              R"(a","value":")" + b64 +
                              R"("},{"op":"put","key":")" + prefix +
                              R"(b","value":")" + b64 + R"("}]})";
      auto r = client.Request("POST", "/",
                              {{"Fencing-Token", std::to_string(token)}}, doc);
      if (r.status == 200) {
        std::lock_guard lock(mu_);
        acked_.emplace_back(pair, token);
      }
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    disconnects_.push_back(Caught(data_port, e));
  }
}

std::vector<std::string> BatchLoad::Check(std::uint16_t data_port) const {
  std::vector<std::string> violations;
  std::map<int, std::uint64_t> highest;
  for (const auto& [pair, token] : acked_) {
    highest[pair] = std::max(highest[pair], token);
  }
  for (int pair = 0; pair < kPairs; ++pair) {
    const std::string prefix = "/pair/" + std::to_string(pair) + "/";
    auto a = testing::Fetch(data_port, "GET", prefix + "a");
    auto b = testing::Fetch(data_port, "GET", prefix + "b");
    const bool same = a.status == b.status &&
                      (a.status != 200 ||
                       (a.body == b.body && a.header("fencing-token") ==
                                                b.header("fencing-token")));
    if (!same) {
      violations.push_back("pair " + std::to_string(pair) +
                           " is half a batch: a=" + std::to_string(a.status) +
                           " " + a.body + " b=" + std::to_string(b.status) +
                           " " + b.body);
      continue;
    }
    const std::uint64_t held =
        a.status == 200 ? std::stoull(a.header("fencing-token")) : 0;
    if (held < highest[pair]) {
      violations.push_back("pair " + std::to_string(pair) + " lost batch " +
                           std::to_string(highest[pair]) + " (holds " +
                           std::to_string(held) + ")");
    }
  }
  return violations;
}

std::map<std::string, KeyState> ReadState(
    const testing::ServerProcess& server,
    const std::vector<std::string>& keys) {
  return ReadState(server.data_port(), server.admin_port(), keys);
}

std::optional<std::uint64_t> TokenOfBody(const std::string& body) {
  static constexpr std::string_view kPrefix = "value ";
  if (body.rfind(kPrefix, 0) != 0) return std::nullopt;
  const auto end = body.find(' ', kPrefix.size());
  if (end == std::string::npos || end == kPrefix.size()) return std::nullopt;
  std::uint64_t token = 0;
  for (std::size_t i = kPrefix.size(); i < end; ++i) {
    if (body[i] < '0' || body[i] > '9') return std::nullopt;
    token = token * 10 + static_cast<std::uint64_t>(body[i] - '0');
  }
  return token;
}

std::map<std::string, KeyState> ReadState(std::uint16_t data_port,
                                          std::uint16_t admin_port,
                                          const std::vector<std::string>& keys,
                                          bool tokens_in_bodies) {
  std::map<std::string, KeyState> state;
  for (const std::string& key : keys) {
    KeyState s;
    auto fence = testing::Fetch(admin_port, "GET", "/v1/fences/" + key);
    if (fence.status == 200) s.fence = NumberAfter(fence.body, "token").value();
    auto value = testing::Fetch(data_port, "GET", "/" + key);
    if (value.status == 200 && tokens_in_bodies) {
      // A body no PUT sent stays a value: Check reports it.
      s.value = TokenOfBody(value.body).value_or(0);
      s.body = value.body;
    } else if (value.status == 200 && value.has("fencing-token")) {
      s.value = std::stoull(value.header("fencing-token"));
      s.body = value.body;
    }
    state[key] = s;
  }
  return state;
}

std::vector<std::string> Restarts::Check(
    const std::vector<Op>& history,
    const std::map<std::string, KeyState>& state, const std::vector<Op>& more,
    const std::vector<Read>& reads) {
  std::vector<Op> part(history.begin() + static_cast<std::ptrdiff_t>(added_),
                       history.end());
  part.insert(part.end(), more.begin(), more.end());
  const std::vector<Read> new_reads(
      reads.begin() + static_cast<std::ptrdiff_t>(reads_added_), reads.end());
  checker_.Add(part, new_reads);
  added_ = history.size();
  reads_added_ = reads.size();
  auto found = checker_.Check(state);
  for (const auto& [key, s] : state) checker_.Floor(key, s.fence);
  return found;
}

}  // namespace fencepost::reliability
