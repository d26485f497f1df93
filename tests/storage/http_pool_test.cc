// HttpPool against a one-thread store on a raw socket that closes kept-alive
// connections as real stores do: after reading a request whole (it may have
// acted on it), or while the connection is idle. A write is never sent
// twice once a byte of it left; a read is; an idle connection the store
// closed is never used.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/http_pool.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fencepost::storage {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// What the store does after reading a request whole.
enum class Then {
  kAnswer,       // answers 200, keeps the connection
  kAnswerClose,  // answers 200 keep-alive, then closes it at once
  kClose,        // closes without an answer (it may have acted on it)
};

// Accepts connections one at a time on 127.0.0.1; for the n-th request it
// reads (0-based, across connections) does plan(n). Records each request's
// first line.
class ScriptedStore {
 public:
  explicit ScriptedStore(std::function<Then(int)> plan)
      : plan_(std::move(plan)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) !=
            0 ||
        ::listen(listen_fd_, 8) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address),
                      &length) != 0) {
      throw std::runtime_error("cannot listen");
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~ScriptedStore() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    thread_.join();
  }
  std::uint16_t port() const { return port_; }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  int closed() const { return closed_; }

 private:
  void Loop() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      Serve(fd);
      ::close(fd);
      ++closed_;
    }
  }
  // Reads requests with a Content-Length body (or none) until the plan
  // closes the connection or the client does.
  void Serve(int fd) {
    std::string buffer;
    char chunk[4096];
    for (;;) {
      std::size_t end = buffer.find("\r\n\r\n");
      while (end == std::string::npos) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return;
        buffer.append(chunk, static_cast<std::size_t>(n));
        end = buffer.find("\r\n\r\n");
      }
      std::size_t body = 0;
      if (auto at = buffer.find("Content-Length: "); at < end) {
        body = std::stoul(buffer.substr(at + 16));
      }
      while (buffer.size() < end + 4 + body) {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return;
        buffer.append(chunk, static_cast<std::size_t>(n));
      }
      int index = 0;
      {
        std::lock_guard lock(mu_);
        lines_.push_back(buffer.substr(0, buffer.find("\r\n")));
        index = static_cast<int>(lines_.size()) - 1;
      }
      buffer.erase(0, end + 4 + body);
      const Then then = plan_(index);
      if (then == Then::kClose) return;
      static constexpr std::string_view kOk =
          "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
      if (::send(fd, kOk.data(), kOk.size(), MSG_NOSIGNAL) < 0) return;
      if (then == Then::kAnswerClose) return;
    }
  }

  std::function<Then(int)> plan_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> lines_;
  std::atomic<int> closed_ = 0;
};

http::Request Put() {
  http::Request put(boost::beast::http::verb::put, "/k", 11);
  put.set(boost::beast::http::field::host, "store");
  put.body() = "value";
  put.prepare_payload();
  return put;
}

http::Request Get() {
  http::Request get(boost::beast::http::verb::get, "/k", 11);
  get.set(boost::beast::http::field::host, "store");
  return get;
}

// Runs one round trip to completion.
HttpPool::Exchange RoundTrip(asio::io_context& io, HttpPool& pool,
                             const http::Request& request,
                             HttpPool::Resend resend) {
  std::optional<HttpPool::Exchange> out;
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        out = co_await pool.RoundTrip(request, resend);
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.restart();
  io.run();
  return out.value();
}

HttpPool::Options To(const ScriptedStore& store) {
  HttpPool::Options options;
  options.host = "127.0.0.1";
  options.port = std::to_string(store.port());
  options.timeout = 5s;
  return options;
}

// A pool to a store that follows `plan`, which has answered one GET: its
// connection is idle in the pool.
struct AfterOneGet {
  explicit AfterOneGet(std::function<Then(int)> plan)
      : store(std::move(plan)),
        pool(io, To(store)),
        first(Send(Get(), HttpPool::Resend::kIfUnanswered)) {}
  HttpPool::Exchange Send(const http::Request& request,
                          HttpPool::Resend resend) {
    return RoundTrip(io, pool, request, resend);
  }
  ScriptedStore store;
  asio::io_context io;
  HttpPool pool;
  HttpPool::Exchange first;
};

// The store answers a GET, keeps the connection, then reads the PUT sent
// on it whole and closes without an answer: the PUT may have been applied.
// Its outcome is unknown, and it is not sent a second time.
TEST(HttpPoolTest, AWriteReadWholeAndClosedOnIsUnknownAndNeverResent) {
  AfterOneGet s([](int n) { return n == 1 ? Then::kClose : Then::kAnswer; });
  ASSERT_EQ(s.first.sent, HttpPool::Sent::kAnswered);
  const HttpPool::Exchange put = s.Send(Put(), HttpPool::Resend::kNever);
  EXPECT_EQ(put.sent, HttpPool::Sent::kUnknown) << put.error;
  EXPECT_EQ(s.store.lines(),
            (std::vector<std::string>{"GET /k HTTP/1.1", "PUT /k HTTP/1.1"}))
      << "sent once";
}

// A read met the same way is safe to repeat: once more, on a new connection.
TEST(HttpPoolTest, AReadClosedOnUnansweredGoesOnceMore) {
  AfterOneGet s([](int n) { return n == 1 ? Then::kClose : Then::kAnswer; });
  ASSERT_EQ(s.first.sent, HttpPool::Sent::kAnswered);
  const HttpPool::Exchange get = s.Send(Get(), HttpPool::Resend::kIfUnanswered);
  EXPECT_EQ(get.sent, HttpPool::Sent::kAnswered) << get.error;
  EXPECT_EQ(s.store.lines().size(), 3u);
}

// A store that closed a kept-alive connection while it was idle: a write
// after that takes a new connection and is answered, instead of meeting
// the closed one and ending with an unknown outcome.
TEST(HttpPoolTest, AnIdleConnectionTheStoreClosedIsNotUsed) {
  AfterOneGet s(
      [](int n) { return n == 0 ? Then::kAnswerClose : Then::kAnswer; });
  ASSERT_EQ(s.first.sent, HttpPool::Sent::kAnswered);
  ScriptedStore& store = s.store;
  for (int i = 0; i < 500 && store.closed() == 0; ++i) {
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_EQ(store.closed(), 1);
  std::this_thread::sleep_for(20ms);  // its FIN reaches our socket
  const HttpPool::Exchange put = s.Send(Put(), HttpPool::Resend::kNever);
  EXPECT_EQ(put.sent, HttpPool::Sent::kAnswered) << put.error;
  EXPECT_EQ(store.lines().size(), 2u);
}

}  // namespace
}  // namespace fencepost::storage
