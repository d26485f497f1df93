#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "http/coro.h"
#include "metrics/metrics.h"

namespace fencepost::proxy {

// The listening ports and the connections each holds: binding, accepting,
// and the cap on connections per port.
//
// A new connection past its port's cap closes, to make room, the
// connection that has made no progress for longest among those idle
// (waiting for a request, in its TLS handshake, or lingering after its
// last answer) and those stalled writing an answer the client does not
// read; else the oldest one still receiving its request. When every
// connection is being answered, the new one is answered 503 and closed.
// Both are counted. Each accepted connection is handed to `serve`, which
// registers it in its listener's list (Ports::Register) for as long as it
// runs and keeps its phase up to date.
//
// Thread safety: everything runs on the io_context's one thread.
class Ports {
 public:
  using Socket =
      boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;
  using Acceptor =
      boost::asio::basic_socket_acceptor<boost::asio::ip::tcp, Executor>;
  using TcpStream = boost::beast::basic_stream<boost::asio::ip::tcp, Executor>;

  struct Connection {
    enum class Phase {
      kIdle,      // no request under way: shed first
      kWriting,   // its answer being written: shed first too
      kReading,   // a request's header or body arriving: shed next
      kHandling,  // being handled: never shed
    };
    TcpStream* stream;
    Phase phase = Phase::kIdle;
    // When it last made progress: became idle, or wrote some of its answer.
    std::chrono::steady_clock::time_point since =
        std::chrono::steady_clock::now();
    bool shed = false;  // cancelled to make room: close without lingering

    void Enter(Phase next) {
      phase = next;
      since = std::chrono::steady_clock::now();
    }
  };
  struct Listener {
    metrics::Port port;
    std::size_t max_connections;
    std::size_t max_watches;  // streams and long polls held at once
    std::size_t watches = 0;
    Acceptor acceptor;
    std::list<Connection> connections;  // oldest first
    // Rate-limits the accept-failure log: one line a second at most.
    std::chrono::steady_clock::time_point last_accept_log{};
    std::uint64_t accept_failures = 0;
  };
  // Serves one accepted connection of `listener`.
  using Serve = std::function<Awaitable<void>(Socket, Listener&)>;

  struct Options {
    std::size_t max_connections = 4096;      // data port (and the S3 door)
    std::size_t admin_max_connections = 64;  // admin port
    // The answer to a connection past the cap: written before a lingering
    // close, or a plain close over TLS (`tls`).
    std::string refusal;
    bool tls = false;
  };

  Ports(boost::asio::io_context& io, metrics::Metrics& metrics, Options options,
        Serve serve);

  // Binds and listens; returns the bound address. Throws
  // boost::system::system_error when the address cannot be used.
  boost::asio::ip::tcp::endpoint Listen(
      metrics::Port port, const boost::asio::ip::tcp::endpoint& where);
  // Stops accepting and cancels the idle connections.
  void Shutdown();
  bool shutting_down() const { return shutting_down_; }

  // Keeps `stream`'s entry in `listener`'s list for as long as the
  // registration lives (counted open and closed).
  class Registration {
   public:
    Registration(Ports& ports, Listener& listener, TcpStream* stream);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    Connection& connection() { return *entry_; }

   private:
    Ports& ports_;
    Listener& listener_;
    std::list<Connection>::iterator entry_;
  };

 private:
  Awaitable<void> Accept(Listener& listener);
  // Makes room for one more connection: closes the idle or stalled writing
  // one that made no progress for longest, else the oldest one still
  // receiving its request (a slow client cannot hold a slot). False when
  // every connection is being handled.
  bool MakeRoom(Listener& listener);
  Awaitable<void> Refuse(Socket socket);

  boost::asio::io_context& io_;
  metrics::Metrics& metrics_;
  Options options_;
  Serve serve_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::size_t refusing_ = 0;  // refused connections still lingering
  bool shutting_down_ = false;
};

// The port's name in logs: "data", "admin" or "s3".
const char* PortName(metrics::Port port);

}  // namespace fencepost::proxy
