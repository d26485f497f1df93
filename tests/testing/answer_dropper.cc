#include "tests/testing/answer_dropper.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <utility>

#include "tests/testing/upstreams.h"

namespace fencepost::testing {
namespace {

constexpr std::size_t kReadSize = 65536;
constexpr std::size_t kMaxHead = 65536;
constexpr std::size_t kMaxLine = 4096;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(c));
  return out;
}

// Follows the HTTP/1.1 messages of one direction of a connection through
// its bytes, to tell where each message's header block and end are. It
// frames; it does not validate: what it cannot frame makes it blind (every
// byte from there on is body).
class Framer {
 public:
  // What one Feed consumed: `body` (bytes to relay as they are; the header
  // block is not among them, see head()), whether a header block was
  // completed (`head`) and whether a message ended (`end`; with `head` for
  // a message without a body).
  struct Step {
    std::size_t consumed = 0;
    std::string_view body;
    bool head = false;
    bool end = false;
    bool blind = false;  // became blind: relay head() (what it held), then all
  };

  explicit Framer(bool requests) : requests_(requests) {}

  // Between messages (nothing of the next one read yet).
  bool at_message_start() const {
    return state_ == State::kHead && (ended_ || head_.empty());
  }
  // For a response: whether its request was a HEAD (no body follows).
  void set_head_request(bool head_request) { head_request_ = head_request; }
  bool blind() const { return state_ == State::kBlind; }
  bool until_close() const { return state_ == State::kUntilClose; }

  // The last header block, and what its start line says.
  const std::string& head() const { return head_; }
  const std::string& method() const { return method_; }
  const std::string& target() const { return target_; }
  int status() const { return status_; }

  Step Feed(std::string_view in) {
    if (state_ == State::kHead && ended_) {
      head_.clear();
      ended_ = false;
    }
    Step step;
    switch (state_) {
      case State::kHead:
        return FeedHead(in);
      case State::kLength:
      case State::kChunkData:
        step.consumed = std::min<std::uint64_t>(remaining_, in.size());
        remaining_ -= step.consumed;
        if (remaining_ == 0) {
          if (state_ == State::kLength) {
            End(&step);
          } else {
            state_ = State::kChunkLine;
          }
        }
        break;
      case State::kChunkLine:
      case State::kTrailer:
        step.consumed = FeedLine(in, &step);
        break;
      case State::kUntilClose:
      case State::kBlind:
        step.consumed = in.size();
        break;
    }
    step.body = in.substr(0, step.consumed);
    return step;
  }

 private:
  enum class State {
    kHead,
    kLength,
    kChunkLine,
    kChunkData,
    kTrailer,
    kUntilClose,
    kBlind
  };

  void End(Step* step) {
    step->end = true;
    ended_ = true;
    state_ = State::kHead;
  }

  Step FeedHead(std::string_view in) {
    Step step;
    const std::size_t before = head_.size();
    head_.append(in);
    const auto end = head_.find("\r\n\r\n", before >= 3 ? before - 3 : 0);
    if (end == std::string::npos) {
      step.consumed = in.size();
      if (head_.size() > kMaxHead) {
        state_ = State::kBlind;
        step.blind = true;
      }
      return step;
    }
    head_.resize(end + 4);
    step.consumed = head_.size() - before;
    step.head = true;
    ParseHead(&step);
    return step;
  }

  void ParseHead(Step* step) {
    const std::string_view head(head_);
    const auto line_end = head.find("\r\n");
    const std::string_view line = head.substr(0, line_end);
    const auto sp1 = line.find(' ');
    const auto sp2 = line.find(' ', sp1 == line.npos ? line.npos : sp1 + 1);
    std::int64_t length = -1;
    bool chunked = false;
    for (auto pos = line_end + 2; pos < head.size();) {
      const auto next = head.find("\r\n", pos);
      const std::string_view field = head.substr(pos, next - pos);
      pos = next + 2;
      const auto colon = field.find(':');
      if (colon == field.npos) continue;
      const std::string name = Lower(field.substr(0, colon));
      const std::string value = Lower(field.substr(colon + 1));
      if (name == "content-length") length = std::atoll(value.c_str());
      if (name == "transfer-encoding") {
        chunked = value.find("chunked") != std::string::npos;
      }
    }
    if (requests_) {
      method_ = std::string(line.substr(0, sp1));
      target_ = sp1 == line.npos
                    ? ""
                    : std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
      status_ = 0;
    } else {
      status_ = sp1 == line.npos
                    ? 0
                    : std::atoi(std::string(line.substr(sp1 + 1, 3)).c_str());
      if (status_ == 101) {
        state_ = State::kBlind;
        return;
      }
      if ((status_ >= 100 && status_ < 200) || status_ == 204 ||
          status_ == 304 || head_request_) {
        return End(step);
      }
    }
    if (chunked) {
      state_ = State::kChunkLine;
    } else if (length > 0) {
      state_ = State::kLength;
      remaining_ = static_cast<std::uint64_t>(length);
    } else if (length == 0 || requests_) {
      End(step);
    } else {
      state_ = State::kUntilClose;
    }
  }

  // A chunk-size line or a trailer line, consumed up to its newline.
  std::size_t FeedLine(std::string_view in, Step* step) {
    const auto newline = in.find('\n');
    const std::size_t take = newline == in.npos ? in.size() : newline + 1;
    line_.append(in.substr(0, take));
    if (line_.size() > kMaxLine) {
      state_ = State::kBlind;
      return take;
    }
    if (newline == in.npos) return take;
    const std::string line = std::move(line_);
    line_.clear();
    if (state_ == State::kTrailer) {
      if (line == "\r\n" || line == "\n") End(step);
      return take;
    }
    const std::uint64_t size = std::strtoull(line.c_str(), nullptr, 16);
    if (size == 0) {
      state_ = State::kTrailer;
    } else {
      state_ = State::kChunkData;
      remaining_ = size + 2;  // the data and its CRLF
    }
    return take;
  }

  const bool requests_;
  State state_ = State::kHead;
  bool ended_ = false;
  bool head_request_ = false;
  std::string head_;
  std::string line_;
  std::uint64_t remaining_ = 0;
  std::string method_;
  std::string target_;
  int status_ = 0;
};

int Listen(std::uint16_t* port) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const std::uint16_t candidate = FreePort();
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(candidate);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) ==
            0 &&
        ::listen(fd, 128) == 0) {
      *port = candidate;
      return fd;
    }
    ::close(fd);
  }
  throw std::runtime_error("AnswerDropper: no port to listen on");
}

int Connect(const std::string& host, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) !=
      0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void NoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

// One client connection and its own upstream connection. The sockets are
// closed (under the relay's mutex) only after both directions' loops have
// ended, so that a shutdown(2) from another thread never hits a reused fd.
struct AnswerDropper::Connection {
  struct Pending {
    bool head_request = false;
    bool drop = false;
  };
  int client = -1;
  int upstream = -1;
  bool closed = false;  // under mu_
  bool done = false;    // under mu_
  std::mutex pending_mu;
  std::deque<Pending> pending;  // requests relayed, not yet answered
  std::thread thread;
};

AnswerDropper::AnswerDropper(std::string host, std::uint16_t port)
    : host_(std::move(host)), upstream_port_(port) {
  listen_fd_ = Listen(&port_);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

AnswerDropper::~AnswerDropper() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  resumed_.notify_all();
  acceptor_.join();
  ::close(listen_fd_);
  for (auto& connection : connections_) {
    Cut(connection.get(), SHUT_RDWR, SHUT_RDWR);
  }
  for (auto& connection : connections_) connection->thread.join();
}

std::string AnswerDropper::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

void AnswerDropper::DropAnswersTo(std::string method, std::string path, int n) {
  std::lock_guard lock(mu_);
  rules_.push_back({std::move(method), std::move(path), n});
}

void AnswerDropper::HoldRequestsTo(std::string method, std::string path,
                                   int n) {
  std::lock_guard lock(mu_);
  rules_.push_back({std::move(method), std::move(path), n, true});
}

void AnswerDropper::ReleaseHeld() {
  {
    std::lock_guard lock(mu_);
    ++releases_;
  }
  resumed_.notify_all();
}

int AnswerDropper::held() const {
  std::lock_guard lock(mu_);
  return held_;
}

bool AnswerDropper::AwaitRelease() {
  std::unique_lock lock(mu_);
  const std::uint64_t seen = releases_;
  ++held_;
  resumed_.wait(lock, [&] { return releases_ != seen || stopping_; });
  --held_;
  return !stopping_;
}

void AnswerDropper::Pause() {
  std::lock_guard lock(mu_);
  paused_ = true;
}

void AnswerDropper::Resume() {
  {
    std::lock_guard lock(mu_);
    paused_ = false;
  }
  resumed_.notify_all();
}

int AnswerDropper::requests(std::string_view method) const {
  std::lock_guard lock(mu_);
  int count = 0;
  for (const auto& [name, n] : requests_) {
    if (method.empty() || name == method) count += n;
  }
  return count;
}

int AnswerDropper::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

AnswerDropper::Fate AnswerDropper::Matches(const std::string& method,
                                           const std::string& target) {
  std::lock_guard lock(mu_);
  ++requests_[method];
  for (Rule& rule : rules_) {
    if (rule.remaining > 0 && rule.method == method &&
        target.find(rule.path) != std::string::npos) {
      --rule.remaining;
      return rule.hold ? Fate::kHold : Fate::kDrop;
    }
  }
  return Fate::kRelay;
}

bool AnswerDropper::AwaitRunning() {
  std::unique_lock lock(mu_);
  resumed_.wait(lock, [this] { return !paused_ || stopping_; });
  return !stopping_;
}

bool AnswerDropper::SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(n);
  }
  return true;
}

void AnswerDropper::Cut(Connection* connection, int how_client,
                        int how_upstream) {
  std::lock_guard lock(mu_);
  if (connection->closed) return;
  if (how_client >= 0) ::shutdown(connection->client, how_client);
  if (how_upstream >= 0) ::shutdown(connection->upstream, how_upstream);
}

void AnswerDropper::ReapFinished() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if ((*it)->done) finished.splice(finished.end(), connections_, it);
      it = next;
    }
  }
  for (auto& connection : finished) connection->thread.join();
}

void AnswerDropper::AcceptLoop() {
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    pollfd fd = {listen_fd_, POLLIN, 0};
    if (::poll(&fd, 1, 100) <= 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    ReapFinished();
    const int upstream = Connect(host_, upstream_port_);
    if (upstream < 0) {
      ::close(client);
      continue;
    }
    NoDelay(client);
    NoDelay(upstream);
    auto connection = std::make_unique<Connection>();
    connection->client = client;
    connection->upstream = upstream;
    Connection* raw = connection.get();
    std::lock_guard lock(mu_);
    connections_.push_back(std::move(connection));
    raw->thread = std::thread([this, raw] { Serve(raw); });
  }
}

void AnswerDropper::Serve(Connection* connection) {
  std::thread answers([this, connection] { Answers(connection); });
  Requests(connection);
  answers.join();
  std::lock_guard lock(mu_);
  ::close(connection->client);
  ::close(connection->upstream);
  connection->closed = true;
  connection->done = true;
}

// Client to server: each request is registered (to be paired with its
// answer, and perhaps marked for dropping) before a byte of it is relayed.
void AnswerDropper::Requests(Connection* connection) {
  Framer framer(/*requests=*/true);
  std::string buffer(kReadSize, '\0');
  while (true) {
    const ssize_t n =
        ::recv(connection->client, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view in(buffer.data(), n);
    while (!in.empty()) {
      const Framer::Step step = framer.Feed(in);
      in.remove_prefix(step.consumed);
      std::string out;
      bool hold = false;
      if (step.head) {
        const Fate fate = Matches(framer.method(), framer.target());
        hold = fate == Fate::kHold;
        std::lock_guard lock(connection->pending_mu);
        connection->pending.push_back(
            {framer.method() == "HEAD", fate == Fate::kDrop});
      }
      if (hold && !AwaitRelease()) {
        Cut(connection, SHUT_RDWR, SHUT_RDWR);
        return;
      }
      if (step.head || step.blind) out = framer.head();
      out.append(step.body);
      if (out.empty()) continue;
      if (!AwaitRunning() || !SendAll(connection->upstream, out)) {
        Cut(connection, SHUT_RDWR, SHUT_RDWR);
        return;
      }
    }
  }
  Cut(connection, -1, SHUT_WR);
}

// Server to client: each answer is relayed, unless its request was marked:
// then it is read to its end (or the server's close) and both connections
// are closed instead. Interim 1xx answers are relayed either way.
void AnswerDropper::Answers(Connection* connection) {
  Framer framer(/*requests=*/false);
  Connection::Pending current;
  bool relaying = true, dropped = false;
  std::string buffer(kReadSize, '\0');
  while (relaying) {
    const ssize_t n =
        ::recv(connection->upstream, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      dropped = current.drop && framer.until_close();
      break;
    }
    std::string_view in(buffer.data(), n);
    while (relaying && !in.empty()) {
      if (framer.at_message_start()) {
        std::lock_guard lock(connection->pending_mu);
        current = connection->pending.empty() ? Connection::Pending{}
                                              : connection->pending.front();
        framer.set_head_request(current.head_request);
      }
      const Framer::Step step = framer.Feed(in);
      in.remove_prefix(step.consumed);
      const bool interim = framer.status() >= 100 && framer.status() < 200 &&
                           framer.status() != 101;
      if (step.end && !interim) {
        std::lock_guard lock(connection->pending_mu);
        if (!connection->pending.empty()) connection->pending.pop_front();
      }
      if (current.drop && !interim && !framer.blind()) {
        if (step.end) {  // the whole answer read, none of it relayed
          dropped = true;
          relaying = false;
        }
        continue;
      }
      std::string out;
      if (step.head || step.blind) out = framer.head();
      out.append(step.body);
      if (out.empty()) continue;
      relaying = AwaitRunning() && SendAll(connection->client, out);
    }
  }
  if (dropped) {
    std::lock_guard lock(mu_);
    ++dropped_;
  }
  Cut(connection, SHUT_RDWR, SHUT_RDWR);
}

}  // namespace fencepost::testing
