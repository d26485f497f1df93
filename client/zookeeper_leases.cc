#include "client/zookeeper_leases.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kScheme = "zk://";
constexpr std::string_view kDefaultPath = "/fencepost/leases";
constexpr std::string_view kCandidatePrefix = "n_";

// Our own code for "the deadline passed before the answer came".
constexpr int kNoAnswer = ZOPERATIONTIMEOUT;

[[noreturn]] void Invalid(std::string_view url, const std::string& problem) {
  throw std::invalid_argument("bad ZooKeeper URL \"" + std::string(url) +
                              "\": " + problem);
}

bool IsPort(std::string_view text) {
  if (text.empty() || text.size() > 5) return false;
  unsigned port = 0;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), port);
  return ec == std::errc() && end == text.data() + text.size() && port >= 1 &&
         port <= 65535;
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

// One "HOST:PORT"; HOST a name, an IPv4 literal or a bracketed IPv6 one.
void CheckHostPort(std::string_view url, std::string_view host_port) {
  std::string_view host;
  std::string_view port;
  if (host_port.starts_with('[')) {
    const auto close = host_port.find(']');
    if (close == std::string_view::npos) Invalid(url, "an unclosed '['");
    host = host_port.substr(1, close - 1);
    const auto rest = host_port.substr(close + 1);
    if (!rest.starts_with(':')) Invalid(url, "a host without a port");
    port = rest.substr(1);
    const bool ipv6 =
        !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' ||
                 c == '.';
        });
    if (!ipv6) Invalid(url, "a bad IPv6 literal");
  } else {
    const auto colon = host_port.rfind(':');
    if (colon == std::string_view::npos) {
      Invalid(url,
              host_port.empty() ? "an empty host" : "a host without a port");
    }
    host = host_port.substr(0, colon);
    port = host_port.substr(colon + 1);
    if (host.empty()) Invalid(url, "an empty host");
    if (!std::all_of(host.begin(), host.end(), IsHostChar)) {
      Invalid(url, "a bad host \"" + std::string(host) + "\"");
    }
  }
  if (!IsPort(port)) {
    Invalid(url,
            "a port that is not 1 to 65535: \"" + std::string(port) + "\"");
  }
}

// An absolute znode path that ZooKeeper accepts and that is not the root
// or under the reserved /zookeeper.
void CheckPath(std::string_view url, std::string_view path) {
  if (path == "/") Invalid(url, "the path must name a node below \"/\"");
  if (path.ends_with('/')) Invalid(url, "a path that ends in \"/\"");
  std::string_view rest = path.substr(1);
  bool first = true;
  while (true) {
    const auto slash = rest.find('/');
    const auto step = rest.substr(0, slash);
    if (step.empty()) Invalid(url, "an empty step in the path");
    if (step == "." || step == "..") Invalid(url, "a \".\" or \"..\" step");
    if (first && step == "zookeeper") {
      Invalid(url, "the path is under ZooKeeper's reserved /zookeeper");
    }
    for (char c : step) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte >= 0x7f) {
        Invalid(url, "a control or non-ASCII byte in the path");
      }
    }
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
    first = false;
  }
}

// The lease name as one path step: see the class comment.
std::string EscapeName(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                       c == '_' || c == '~';
    if (plain) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  if (out == "." || out == "..") {
    std::string dots;
    for (std::size_t i = 0; i < out.size(); ++i) dots += "%2E";
    return dots;
  }
  return out;
}

// The sequence number of a candidate's node name "n_0000000042".
std::optional<std::int64_t> Sequence(std::string_view child) {
  if (!child.starts_with(kCandidatePrefix)) return std::nullopt;
  const auto digits = child.substr(kCandidatePrefix.size());
  std::int64_t sequence = 0;
  auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), sequence);
  if (ec != std::errc() || end != digits.data() + digits.size() ||
      digits.empty()) {
    return std::nullopt;
  }
  return sequence;
}

// What a request's completion delivered. rc is kNoAnswer when the deadline
// passed first.
struct Answer {
  int rc = kNoAnswer;
  Stat stat{};
  std::string value;
  std::vector<std::string> names;
};

// One request in flight. The ZooKeeper client calls the completion exactly
// once, from its own thread, also after we stopped waiting (at the latest
// with ZCLOSING when the handle closes), so the reply keeps itself alive
// until then.
struct Reply {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Answer answer;
  std::shared_ptr<Reply> self;
};

template <typename Fill>
void Complete(const void* data, int rc, Fill fill) {
  auto* reply = static_cast<Reply*>(const_cast<void*>(data));
  std::shared_ptr<Reply> keep;
  {
    std::lock_guard lock(reply->mu);
    reply->answer.rc = rc;
    if (rc == ZOK) fill(reply->answer);
    reply->done = true;
    keep = std::move(reply->self);
  }
  reply->cv.notify_all();
}

void OnStat(int rc, const Stat* stat, const void* data) {
  Complete(data, rc, [&](Answer& a) {
    if (stat != nullptr) a.stat = *stat;
  });
}

void OnStringStat(int rc, const char* value, const Stat* stat,
                  const void* data) {
  Complete(data, rc, [&](Answer& a) {
    if (value != nullptr) a.value = value;
    if (stat != nullptr) a.stat = *stat;
  });
}

void OnString(int rc, const char* value, const void* data) {
  Complete(data, rc, [&](Answer& a) {
    if (value != nullptr) a.value = value;
  });
}

void OnStrings(int rc, const String_vector* strings, const void* data) {
  Complete(data, rc, [&](Answer& a) {
    if (strings == nullptr) return;
    for (int i = 0; i < strings->count; ++i)
      a.names.emplace_back(strings->data[i]);
  });
}

void OnData(int rc, const char* value, int length, const Stat* stat,
            const void* data) {
  Complete(data, rc, [&](Answer& a) {
    if (value != nullptr && length > 0) a.value.assign(value, length);
    if (stat != nullptr) a.stat = *stat;
  });
}

void OnVoid(int rc, const void* data) {
  Complete(data, rc, [](Answer&) {});
}

// Sends one request with `submit(data)` (a zoo_a* call that passes `data`
// to its completion) and waits for its answer until `deadline`.
template <typename Submit>
Answer Run(Submit submit, Clock::time_point deadline) {
  auto reply = std::make_shared<Reply>();
  reply->self = reply;
  const int rc = submit(static_cast<const void*>(reply.get()));
  std::unique_lock lock(reply->mu);
  if (rc != ZOK) {
    // Refused before it was queued: no completion comes. After a
    // marshalling error it may or may not; then the reply stays alive.
    if (rc != ZMARSHALLINGERROR) reply->self.reset();
    Answer answer;
    answer.rc = rc;
    return answer;
  }
  if (!reply->cv.wait_until(lock, deadline, [&] { return reply->done; })) {
    return Answer{};
  }
  return reply->answer;
}

void DiscardLog(const char*) {}

}  // namespace

struct ZooKeeperLeases::Session {
  zhandle_t* zh = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  int state = 0;  // of the last session event; 0 before the first
  bool expired = false;

  bool Expired() {
    std::lock_guard lock(mu);
    return expired;
  }
  void MarkExpired() {
    std::lock_guard lock(mu);
    expired = true;
  }
  std::int64_t id() const { return zoo_client_id(zh)->client_id; }

  static void OnEvent(zhandle_t*, int type, int state, const char*,
                      void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* session = static_cast<Session*>(context);
    {
      std::lock_guard lock(session->mu);
      session->state = state;
      if (state == ZOO_EXPIRED_SESSION_STATE ||
          state == ZOO_AUTH_FAILED_STATE) {
        session->expired = true;
      }
    }
    session->cv.notify_all();
  }
};

ZooKeeperLeases::ZooKeeperLeases(std::string url, LeaseSpec spec)
    : spec_(std::move(spec)) {
  if (spec_.name.empty()) throw std::invalid_argument("empty lease name");
  if (spec_.ttl.count() <= 0) {
    throw std::invalid_argument("the lease TTL must be above 0 ms, not " +
                                std::to_string(spec_.ttl.count()));
  }
  std::string_view text = url;
  if (!text.starts_with(kScheme)) Invalid(url, "the scheme must be zk://");
  text.remove_prefix(kScheme.size());
  if (text.find_first_of("?#") != std::string_view::npos) {
    Invalid(url, "a query or fragment");
  }
  const auto slash = text.find('/');
  const auto hosts = text.substr(0, slash);
  if (hosts.find('@') != std::string_view::npos) Invalid(url, "user info");
  if (hosts.empty()) Invalid(url, "no host");
  std::string_view rest = hosts;
  while (true) {
    const auto comma = rest.find(',');
    CheckHostPort(url, rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  hosts_ = hosts;
  if (slash == std::string_view::npos) {
    path_ = kDefaultPath;
  } else {
    CheckPath(url, text.substr(slash));
    path_ = text.substr(slash);
  }
  election_path_ = path_ + "/" + EscapeName(spec_.name);

  static std::once_flag log_level;
  std::call_once(log_level, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); });
}

ZooKeeperLeases::~ZooKeeperLeases() {
  CloseSession(Clock::now());
  for (auto& closer : closers_) closer.thread.join();
}

std::string ZooKeeperLeases::Describe() const {
  return "zookeeper " + hosts_ + path_;
}

LeaseAttempt ZooKeeperLeases::Acquire(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  JoinFinishedClosers();
  while (true) {
    if (std::string error = Connect(deadline); !error.empty()) {
      if (session_ && session_->Expired() && Clock::now() < deadline) continue;
      LeaseAttempt attempt;
      attempt.detail = std::move(error);
      return attempt;
    }
    if (node_path_.empty()) {
      const int rc = CreateNode(deadline);
      if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) {
        session_->MarkExpired();
        continue;
      }
      if (rc != ZOK) return Failed(rc);
    }
    if (auto attempt = Elect(deadline)) return *std::move(attempt);
    if (Clock::now() >= deadline) return Failed(kNoAnswer);
  }
}

std::string ZooKeeperLeases::Connect(Clock::time_point deadline) {
  if (session_ && session_->Expired()) CloseSession(Clock::now());
  if (!session_) {
    node_path_.clear();
    auto session = std::make_shared<Session>();
    const auto ttl = std::min<std::int64_t>(spec_.ttl.count(), INT_MAX);
    session->zh = zookeeper_init2(hosts_.c_str(), &Session::OnEvent,
                                  static_cast<int>(ttl), nullptr, session.get(),
                                  0, DiscardLog);
    if (session->zh == nullptr) {
      return "cannot start a ZooKeeper session with " + hosts_ + ": " +
             std::strerror(errno);
    }
    session_ = std::move(session);
  }
  std::unique_lock lock(session_->mu);
  session_->cv.wait_until(lock, deadline, [&] {
    return session_->expired || session_->state == ZOO_CONNECTED_STATE;
  });
  if (session_->expired) return "the ZooKeeper session expired";
  if (session_->state != ZOO_CONNECTED_STATE) {
    return "not connected to ZooKeeper " + hosts_ + " in time";
  }
  return "";
}

int ZooKeeperLeases::CreateNode(Clock::time_point deadline) {
  zhandle_t* zh = session_->zh;
  const std::string prefix =
      election_path_ + "/" + std::string(kCandidatePrefix);
  auto create = [&] {
    return Run(
        [&](const void* data) {
          return zoo_acreate2(zh, prefix.c_str(), spec_.holder.data(),
                              static_cast<int>(spec_.holder.size()),
                              &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                              OnStringStat, data);
        },
        deadline);
  };
  Answer answer = create();
  if (answer.rc == ZNONODE) {
    // Create the missing nodes above, from the top; others may race us.
    for (auto slash = election_path_.find('/', 1);;
         slash = election_path_.find('/', slash + 1)) {
      const std::string parent = election_path_.substr(0, slash);
      const Answer made = Run(
          [&](const void* data) {
            return zoo_acreate(zh, parent.c_str(), nullptr, -1,
                               &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, OnString,
                               data);
          },
          deadline);
      if (made.rc != ZOK && made.rc != ZNODEEXISTS) return made.rc;
      if (slash == std::string::npos) break;
    }
    answer = create();
  }
  if (answer.rc != ZOK) return answer.rc;
  node_path_ = answer.value;
  node_czxid_ = answer.stat.czxid;
  return ZOK;
}

std::optional<LeaseAttempt> ZooKeeperLeases::Elect(Clock::time_point deadline) {
  zhandle_t* zh = session_->zh;
  LeaseAttempt attempt;
  attempt.sent_at = Clock::now();
  const Answer children = Run(
      [&](const void* data) {
        return zoo_aget_children(zh, election_path_.c_str(), 0, OnStrings,
                                 data);
      },
      deadline);
  if (children.rc == ZNONODE) {  // gone with our node: start over
    node_path_.clear();
    return std::nullopt;
  }
  if (children.rc == ZSESSIONEXPIRED || children.rc == ZINVALIDSTATE) {
    session_->MarkExpired();
    return std::nullopt;
  }
  if (children.rc != ZOK) {
    return Failed(children.rc);
  }

  std::vector<std::pair<std::int64_t, std::string>> candidates;
  for (const auto& name : children.names) {
    if (auto sequence = Sequence(name))
      candidates.emplace_back(*sequence, name);
  }
  std::sort(candidates.begin(), candidates.end());
  const std::string ours = node_path_.substr(election_path_.size() + 1);
  if (std::none_of(candidates.begin(), candidates.end(),
                   [&](const auto& c) { return c.second == ours; })) {
    node_path_.clear();  // deleted by someone else: make another
    return std::nullopt;
  }

  auto held = [&] {
    attempt.outcome = LeaseAttempt::Outcome::kHeld;
    attempt.token = static_cast<std::uint64_t>(node_czxid_);
    attempt.ttl = std::chrono::milliseconds(zoo_recv_timeout(zh));
    return attempt;
  };
  const std::string& lowest = candidates.front().second;
  if (lowest == ours) return held();

  const std::string lowest_path = election_path_ + "/" + lowest;
  const Answer leader = Run(
      [&](const void* data) {
        return zoo_aget(zh, lowest_path.c_str(), 0, OnData, data);
      },
      deadline);
  if (leader.rc == ZNONODE) return std::nullopt;  // just went: look again
  if (leader.rc != ZOK) {
    return Failed(leader.rc);
  }
  if (leader.stat.ephemeralOwner == session_->id()) {
    // Ours too: created by an earlier attempt whose answer never came.
    node_path_ = lowest_path;
    node_czxid_ = leader.stat.czxid;
    return held();
  }
  attempt.outcome = LeaseAttempt::Outcome::kRefused;
  attempt.holder = leader.value;
  attempt.detail = "held by \"" + leader.value + "\" (" + lowest_path + ")";
  return attempt;
}

LeaseAttempt ZooKeeperLeases::Renew(std::uint64_t token,
                                    std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  LeaseAttempt attempt;
  attempt.outcome = LeaseAttempt::Outcome::kRefused;
  if (!session_ || node_path_.empty()) {
    attempt.detail =
        "not held: no candidate node (never acquired, released "
        "or lost)";
    return attempt;
  }
  if (token != static_cast<std::uint64_t>(node_czxid_)) {
    attempt.detail = "held as token " + std::to_string(node_czxid_) + ", not " +
                     std::to_string(token);
    return attempt;
  }
  if (session_->Expired()) {
    attempt.detail = "the ZooKeeper session expired";
    node_path_.clear();
    return attempt;
  }
  zhandle_t* zh = session_->zh;
  attempt.sent_at = Clock::now();
  const Answer answer = Run(
      [&](const void* data) {
        return zoo_aexists(zh, node_path_.c_str(), 0, OnStat, data);
      },
      deadline);
  if (answer.rc == ZOK && answer.stat.czxid == node_czxid_ &&
      answer.stat.ephemeralOwner == session_->id()) {
    attempt.outcome = LeaseAttempt::Outcome::kHeld;
    attempt.token = token;
    attempt.ttl = std::chrono::milliseconds(zoo_recv_timeout(zh));
    return attempt;
  }
  if (answer.rc == ZOK || answer.rc == ZNONODE) {
    attempt.detail = "the candidate node " + node_path_ + " is gone";  // or
    // is another session's: a node of the same name made after ours went
    node_path_.clear();
    return attempt;
  }
  if (answer.rc == ZSESSIONEXPIRED || answer.rc == ZINVALIDSTATE ||
      session_->Expired()) {
    session_->MarkExpired();
    attempt.detail = "the ZooKeeper session expired";
    node_path_.clear();
    return attempt;
  }
  return Failed(answer.rc);
}

std::string ZooKeeperLeases::Release(std::uint64_t token,
                                     std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  JoinFinishedClosers();
  if (!session_ || node_path_.empty()) {
    CloseSession(deadline);
    return "not held: no candidate node";
  }
  if (token != static_cast<std::uint64_t>(node_czxid_)) {
    return "held as token " + std::to_string(node_czxid_) + ", not " +
           std::to_string(token);
  }
  zhandle_t* zh = session_->zh;
  std::string reason;
  const Answer found = Run(
      [&](const void* data) {
        return zoo_aexists(zh, node_path_.c_str(), 0, OnStat, data);
      },
      deadline);
  Answer deleted = found;
  if (found.rc == ZOK && found.stat.czxid == node_czxid_) {
    deleted = Run(
        [&](const void* data) {
          return zoo_adelete(zh, node_path_.c_str(), found.stat.version, OnVoid,
                             data);
        },
        deadline);
  }
  if (deleted.rc == ZOK && found.stat.czxid != node_czxid_) {
    reason = "not held: " + node_path_ + " is another node";
  } else if (deleted.rc == ZNONODE || deleted.rc == ZBADVERSION) {
    reason = "not held: " + node_path_ + " is gone";
  } else if (deleted.rc == ZSESSIONEXPIRED || deleted.rc == ZINVALIDSTATE) {
    reason = "not held: the ZooKeeper session expired";
  } else if (deleted.rc != ZOK) {
    reason =
        Failed(deleted.rc).detail + "; the node goes when the session ends";
  }
  node_path_.clear();
  CloseSession(deadline);
  return reason;
}

void ZooKeeperLeases::CloseSession(Clock::time_point deadline) {
  if (!session_) return;
  std::promise<void> closed;
  std::shared_future<void> done = closed.get_future().share();
  closers_.push_back(Closer{std::thread([session = std::move(session_),
                                         closed = std::move(closed)]() mutable {
                              zookeeper_close(session->zh);
                              closed.set_value();
                            }),
                            done});
  done.wait_until(deadline);
}

void ZooKeeperLeases::JoinFinishedClosers() {
  std::erase_if(closers_, [](Closer& closer) {
    if (closer.done.wait_for(std::chrono::seconds(0)) !=
        std::future_status::ready) {
      return false;
    }
    closer.thread.join();
    return true;
  });
}

LeaseAttempt ZooKeeperLeases::Failed(int rc) const {
  LeaseAttempt attempt;
  attempt.outcome = LeaseAttempt::Outcome::kFailed;
  if (rc == kNoAnswer) {
    attempt.detail = "no answer from ZooKeeper " + hosts_ + " in time";
  } else {
    attempt.detail = "ZooKeeper " + hosts_ + ": " + zerror(rc);
  }
  return attempt;
}

}  // namespace fencepost::client
