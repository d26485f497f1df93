#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <list>
#include <memory>
#include <vector>

#include "metrics/metrics.h"
#include "proxy/service.h"

namespace fencepost::proxy {

// The HTTP/1.1 listeners and their connections: keep-alive and pipelining,
// a deadline on every read, a 16 KiB header limit, the body limit, and
// strict framing (a request whose length is ambiguous gets 400 and the
// connection closes). Each connection loop only reads, hands the request to
// Service, and writes.
//
// Thread safety: everything runs on the io_context's one thread; Shutdown is
// called from a handler on that thread.
class Server {
 public:
  struct Options {
    std::uint64_t max_body = 4194304;
    std::chrono::milliseconds read_timeout{10000};
    std::chrono::milliseconds idle_timeout{75000};
    // TLS on both ports when set (--tls-cert); nullptr serves plain HTTP.
    std::shared_ptr<boost::asio::ssl::context> tls;
  };

  Server(boost::asio::io_context& io, Service& service,
         metrics::Metrics& metrics, Options options);

  // Binds and listens; returns the bound address. Throws
  // boost::system::system_error when the address cannot be used.
  boost::asio::ip::tcp::endpoint Listen(
      metrics::Port port, const boost::asio::ip::tcp::endpoint& where);

  // Stops accepting and closes idle connections. A connection that has begun
  // receiving a request finishes it, answers with Connection: close, and
  // closes.
  void Shutdown();

 private:
  struct Connection {
    boost::beast::tcp_stream* stream;
    bool idle;
  };

  boost::asio::awaitable<void> Accept(boost::asio::ip::tcp::acceptor& acceptor,
                                      metrics::Port port);
  boost::asio::awaitable<void> Serve(boost::asio::ip::tcp::socket socket,
                                     metrics::Port port);
  // One connection's request loop, over TCP or TLS.
  template <class Stream>
  boost::asio::awaitable<void> Session(Stream& stream, metrics::Port port);

  boost::asio::io_context& io_;
  Service& service_;
  metrics::Metrics& metrics_;
  Options options_;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> acceptors_;
  std::list<Connection> connections_;
  bool shutting_down_ = false;
};

}  // namespace fencepost::proxy
