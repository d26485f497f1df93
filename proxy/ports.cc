#include "proxy/ports.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

const char* PortName(metrics::Port port) {
  if (port == metrics::Port::kS3) return "s3";
  return port == metrics::Port::kData ? "data" : "admin";
}

namespace {

// Of a port's `cap` connections, those that event streams and long polls
// may hold at once: the rest stay free for health checks, metrics and lease
// calls, which must answer whatever the watchers do.
std::size_t WatchCap(std::size_t cap) {
  if (cap < 2) return cap;
  return cap - std::clamp<std::size_t>(cap / 8, 1, 16);
}

}  // namespace

Ports::Ports(asio::io_context& io, metrics::Metrics& metrics, Options options,
             Serve serve)
    : io_(io),
      metrics_(metrics),
      options_(std::move(options)),
      serve_(std::move(serve)) {}

tcp::endpoint Ports::Listen(metrics::Port port, const tcp::endpoint& where) {
  // The S3 front door is a data port too: it shares the data port's cap.
  const std::size_t cap = port == metrics::Port::kAdmin
                              ? options_.admin_max_connections
                              : options_.max_connections;
  auto listener = std::make_unique<Listener>(
      Listener{port, cap, WatchCap(cap), 0, Acceptor(io_), {}, {}, 0});
  Acceptor& acceptor = listener->acceptor;
  acceptor.open(where.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  acceptor.bind(where);
  acceptor.listen(asio::socket_base::max_listen_connections);
  const tcp::endpoint bound = acceptor.local_endpoint();
  asio::co_spawn(io_, Accept(*listener), asio::detached);
  listeners_.push_back(std::move(listener));
  return bound;
}

void Ports::Shutdown() {
  shutting_down_ = true;
  for (auto& listener : listeners_) {
    beast::error_code ignored;
    listener->acceptor.close(ignored);
    for (Connection& c : listener->connections) {
      if (c.phase == Connection::Phase::kIdle) c.stream->cancel();
    }
  }
}

Ports::Registration::Registration(Ports& ports, Listener& listener,
                                  TcpStream* stream)
    : ports_(ports),
      listener_(listener),
      entry_(
          listener.connections.insert(listener.connections.end(), {stream})) {
  ports_.metrics_.ConnectionOpened(listener_.port);
}

Ports::Registration::~Registration() {
  listener_.connections.erase(entry_);
  ports_.metrics_.ConnectionClosed(listener_.port);
}

Awaitable<void> Ports::Accept(Listener& listener) {
  while (!shutting_down_) {
    beast::error_code ec;
    Socket socket = co_await listener.acceptor.async_accept(
        asio::redirect_error(kUseAwaitable, ec));
    if (shutting_down_) co_return;
    if (ec) {
      // Out of descriptors, say: count, log at most once a second, and back
      // off instead of spinning.
      metrics_.AcceptFailed(listener.port);
      ++listener.accept_failures;
      const auto now = std::chrono::steady_clock::now();
      if (now - listener.last_accept_log >= std::chrono::seconds(1)) {
        spdlog::warn(
            "accept on the {} port failed ({} since the last report): {}",
            PortName(listener.port), listener.accept_failures, ec.message());
        listener.last_accept_log = now;
        listener.accept_failures = 0;
      }
      asio::steady_timer pause(io_, std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::redirect_error(kUseAwaitable, ec));
      continue;
    }
    if (listener.connections.size() >= listener.max_connections &&
        !MakeRoom(listener)) {
      metrics_.ConnectionRefused(listener.port);
      asio::co_spawn(io_, Refuse(std::move(socket)), asio::detached);
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(io_, serve_(std::move(socket), listener), asio::detached);
  }
}

bool Ports::MakeRoom(Listener& listener) {
  // Who makes room, first to last: an idle connection or an answer that
  // has made no progress for kStalled (a client that pipelines requests and
  // never reads), by how long it has been stuck; then the oldest connection
  // still sending its request; then, so that such clients cannot hold a
  // port either, the answer that has gone longest without progress.
  constexpr auto kStalled = std::chrono::seconds(1);
  const auto now = std::chrono::steady_clock::now();
  Connection* victim = nullptr;
  for (Connection& c : listener.connections) {
    if (c.shed) continue;
    const bool stuck =
        c.phase == Connection::Phase::kIdle ||
        (c.phase == Connection::Phase::kWriting && now - c.since >= kStalled);
    if (stuck && (victim == nullptr || c.since < victim->since)) victim = &c;
  }
  if (victim == nullptr) {
    for (Connection& c : listener.connections) {  // oldest first
      if (!c.shed && c.phase == Connection::Phase::kReading) {
        victim = &c;
        break;
      }
    }
  }
  if (victim == nullptr) {
    for (Connection& c : listener.connections) {
      if (c.shed || c.phase != Connection::Phase::kWriting) continue;
      if (victim == nullptr || c.since < victim->since) victim = &c;
    }
  }
  if (victim == nullptr) return false;
  victim->shed = true;
  victim->stream->cancel();
  metrics_.ConnectionShed(listener.port);
  return true;
}

Awaitable<void> Ports::Refuse(Socket socket) {
  // The 503, then a short lingering close so the client reads it instead of
  // a reset; past 64 lingering refusals, a plain close (over TLS, always).
  TcpStream stream(std::move(socket));
  beast::error_code ec;
  if (options_.tls || refusing_ >= 64) {
    stream.close();
    co_return;
  }
  ++refusing_;
  stream.expires_after(std::chrono::seconds(1));
  co_await asio::async_write(stream, asio::buffer(options_.refusal),
                             asio::redirect_error(kUseAwaitable, ec));
  if (!ec) {
    stream.socket().shutdown(asio::socket_base::shutdown_send, ec);
    std::array<char, 4096> sink;
    for (std::size_t drained = 0; !ec && drained < (64u << 10);) {
      drained += co_await stream.async_read_some(
          asio::buffer(sink), asio::redirect_error(kUseAwaitable, ec));
    }
  }
  stream.close();
  --refusing_;
}

}  // namespace fencepost::proxy
