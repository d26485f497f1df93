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

#include "http/body_source.h"
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
// Every request may go on an idle kept-alive connection, which is first
// checked to be still open (nothing to read on it, no end of stream): a
// server that closed it while it was idle is not sent anything on it. What
// happens when a request then meets a connection the server closes:
//  - no byte of it was written: kNotSent; on a connection that was idle,
//    it goes once more on a new connection;
//  - written, and the connection ended before any byte of an answer:
//    with Resend::kIfUnanswered (a read, which is safe to repeat) it goes
//    once more on a new connection; with Resend::kNever (a write) the
//    outcome is kUnknown: the server may have read it whole, acted on it
//    and closed without an answer, so it is never sent again.
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
  // Whether a request whose bytes went out may be sent again (above).
  enum class Resend { kNever, kIfUnanswered };
  struct Exchange {
    Sent sent = Sent::kNotSent;
    http::Response response;  // kAnswered
    // Otherwise what went wrong, e.g. "connect: Connection refused".
    std::string error;
    // StreamTrip: the body failed (its source's, not the server's fault);
    // kNotSent.
    bool body_failed = false;
  };

  HttpPool(boost::asio::io_context& io, Options options);
  ~HttpPool();
  HttpPool(const HttpPool&) = delete;
  HttpPool& operator=(const HttpPool&) = delete;

  // Sends `request` as it is (Host included) and reads its final answer.
  // Never throws.
  Awaitable<Exchange> RoundTrip(const http::Request& request, Resend resend);

  // Sends `head` (its Content-Length body.length(), its own body empty),
  // then `body` as it arrives, and reads the final answer. The body's last
  // byte is held back until `body` says it is whole and checked, so a body
  // that fails, stalls or does not add up never reaches the server whole:
  // kNotSent then, the connection closed. A request that went whole is
  // never sent again (it may have been applied): kUnknown without an
  // answer. Each write and the answer are bounded by Options::timeout.
  // Memory: one piece of the body (256 KiB) at a time. Never throws.
  Awaitable<Exchange> StreamTrip(const http::Request& head,
                                 fencepost::http::BodySource& body);

  // Closes the idle connections.
  void Clear();

 private:
  struct Conn;
  struct Opened;
  Awaitable<Opened> Open();
  // An idle connection (with `may_reuse`) or a new one.
  Awaitable<Opened> Take(bool may_reuse);
  // The most recently pooled connection that is still open, or null.
  std::unique_ptr<Conn> TakeIdle();
  // Pools `conn` after `response` when both allow it.
  void Keep(std::unique_ptr<Conn> conn, const http::Response& response,
            bool leftover);

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
