#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http/coro.h"
#include "http/message.h"

namespace boost::asio::ssl {
class context;
}

namespace fencepost::storage {

// HTTP/1.1 round trips to one server (HOST:PORT) over kept-alive
// connections, plain or TLS: the one HTTP client loop of the server, used
// by the etcd client and the http:// backend.
//
// Every phase is bounded by Options::timeout: connecting (with the TLS
// handshake), then sending the request and reading its answer. An answer's
// body is bounded by Options::max_body, its header block and each chunk-size
// line or trailer block by 64 KiB. Interim answers (1xx) are read past, so
// the answer returned, and the connection pooled, is the request's own.
//
// Outcomes (Sent): kNotSent when no byte of the request left (resolving,
// connecting or the handshake failed, or the write failed at once):
// sending it again, here or elsewhere, cannot apply it twice. kAnswered with
// the answer. kUnknown when some of it was sent and no answer came (a
// timeout, a reset, a 101): the server may still act on it, so the
// connection is closed and the caller decides.
//
// With `reuse`, a request may go on an idle connection; when that one turns
// out closed by the server before a byte of the answer (the write fails at
// once, or the read ends with EOF or a reset), the server never read the
// request, so it goes once more on a new connection. Without `reuse` (a
// request that must not be repeated), it always takes a new connection.
// Answered connections that the server keeps alive, with no bytes past the
// answer, return to the pool (at most Options::max_idle).
//
// Thread safety: every call on the io thread of the io_context it was made
// with.
class HttpPool {
 public:
  struct Options {
    std::string host;  // resolved, and with TLS the name verified and sent
    std::string port;  // as SNI (unless it is an IP address)
    // Where to connect; empty: `host` is resolved for every new connection.
    std::vector<boost::asio::ip::tcp::endpoint> endpoints;
    // TLS 1.2+ when set (not owned; it outlives the pool).
    boost::asio::ssl::context* tls = nullptr;
    std::chrono::milliseconds timeout{10000};
    std::size_t max_idle = 16;
    std::uint64_t max_body = std::uint64_t{16} << 20;
  };

  enum class Sent { kNotSent, kAnswered, kUnknown };
  struct Exchange {
    Sent sent = Sent::kNotSent;
    http::Response response;  // kAnswered
    // Otherwise what went wrong, e.g. "connect: Connection refused".
    std::string error;
  };

  HttpPool(boost::asio::io_context& io, Options options);
  ~HttpPool();
  HttpPool(const HttpPool&) = delete;
  HttpPool& operator=(const HttpPool&) = delete;

  // Sends `request` as it is (Host included) and reads its final answer.
  // Never throws.
  Awaitable<Exchange> RoundTrip(const http::Request& request, bool reuse);

  // Closes the idle connections.
  void Clear();

 private:
  struct Conn;
  struct Opened;
  Awaitable<Opened> Open();

  boost::asio::io_context& io_;
  Options options_;
  std::vector<std::unique_ptr<Conn>> idle_;
};

// A TLS 1.2+ client context that verifies the server against `ca_file`
// (PEM), or the system's CAs when it is empty. Throws std::runtime_error
// naming the file when it cannot be loaded.
std::unique_ptr<boost::asio::ssl::context> MakeClientTls(
    const std::string& ca_file);

}  // namespace fencepost::storage
