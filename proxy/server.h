#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/body_source.h"
#include "http/coro.h"
#include "metrics/metrics.h"
#include "proxy/ports.h"
#include "proxy/service.h"

namespace fencepost::proxy {

// Whether the client of a watch is still there (server_watch.cc).
struct ClientWatch;

// The HTTP/1.1 listeners and their connections: keep-alive and pipelining,
// a deadline on every read, a bound on every part of a request held in
// memory (16 KiB of header, kBufferLimit for a chunk line or a trailer
// block, --max-body for the body), and strict framing (a request whose
// length is ambiguous gets 400 and the connection closes). Each connection
// loop only reads, hands the request to Service, and writes.
//
// A connection reads its next request only once its answer is written, so
// what one connection has unanswered is bounded by its buffer (kBufferLimit)
// and the kernel's; an answer the client does not read within
// --write-timeout closes the connection.
//
// Each port has a connection cap, kept by Ports (proxy/ports.h).
//
// Event streams and long polls hold their connection while they wait. On
// the admin port they may take all but an eighth of its connections (1 to
// 16 kept, none when the cap is 1): past that they are answered 503, so
// health checks, metrics and lease calls find room whatever the watchers
// do. While one waits, a read stays pending on its connection, so a client
// that leaves (EOF, a reset) ends it and frees its slot at once.
//
// Thread safety: everything runs on the io_context's one thread; Shutdown is
// called from a handler on that thread.
class Server {
 public:
  struct Options {
    std::uint64_t max_body = 4194304;
    std::chrono::milliseconds read_timeout{10000};
    std::chrono::milliseconds idle_timeout{75000};
    // How long one answer may wait for the client to read it.
    std::chrono::milliseconds write_timeout{10000};
    // TLS on both ports when set (--tls-cert); nullptr serves plain HTTP.
    std::shared_ptr<boost::asio::ssl::context> tls;
    std::size_t max_connections = 4096;      // data port
    std::size_t admin_max_connections = 64;  // admin port
    // One access-log line per answered request (--access-log).
    bool access_log = false;
  };

  // Sockets and streams on the io_context's concrete executor, as the
  // coroutines that use them (http/coro.h).
  using Socket = Ports::Socket;
  using TcpStream = Ports::TcpStream;

  // The most bytes of a request held unparsed at once.
  static constexpr std::size_t kBufferLimit = 32 * 1024;

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
  using Connection = Ports::Connection;
  using Listener = Ports::Listener;

  Awaitable<void> Serve(Socket socket, Listener& listener);
  // What reading one request came to.
  struct Received {
    bool quit = false;  // the peer left or stalled: close without answering
    // The request's framing is in doubt or it is too large: answer this,
    // then close.
    std::optional<Problem> refusal;
    // Refused on its header alone (Expect: 100-continue); its body unread.
    std::optional<Response> screened;
    // Its header alone was read: the body is streamed to its handler
    // (Service::StreamsBody).
    bool streams = false;
  };
  using Parser =
      boost::beast::http::request_parser<boost::beast::http::string_body>;

  // One connection's request loop, over TCP or TLS: waits for a request,
  // reads it, hands it over, writes the answer; then winds down.
  template <class Stream>
  Awaitable<void> Session(Stream& stream, Listener& listener, Connection& self);
  // A request that holds its connection (watch::HoldsConnection): 503 past
  // the port's watch cap; otherwise answered, streamed or long-polled with
  // a read pending on the connection (server_watch.cc), which ends it when the
  // client leaves. True when the connection goes on to its next request.
  template <class Stream>
  Awaitable<bool> ServeWatch(Stream& stream, boost::beast::flat_buffer& buffer,
                             const Request& request, Listener& listener,
                             Connection& self, const std::string& client);
  // Waits (up to --idle-timeout) for a request's first bytes; false when the
  // connection should close.
  template <class Stream>
  Awaitable<bool> AwaitRequest(Stream& stream,
                               boost::beast::flat_buffer& buffer,
                               Connection& self);
  // Reads one request's header and, unless it is refused, its body into
  // `parser` (under --read-timeout each).
  template <class Stream>
  Awaitable<Received> ReadRequest(Stream& stream,
                                  boost::beast::flat_buffer& buffer,
                                  Parser& parser, metrics::Port port);
  // The answer: the refusal or screening's, else Service's (`body`: a
  // streamed request's, else null).
  // `answer_body` receives the body of an answer that is streamed.
  Awaitable<Response> Answer(metrics::Port port, const Request& request,
                             Received& received, const std::string& client,
                             BodySource* body,
                             std::unique_ptr<BodySource>* answer_body);
  // Writes `res` (HEAD's body rule applied, Connection set) within
  // --write-timeout, noting each step of progress in `self`, then `more`
  // (a streamed body) when set; false when the write failed, timed out or
  // was shed, or `more` failed.
  template <class Stream>
  Awaitable<bool> WriteResponse(Stream& stream, const Request& request,
                                Response& res, bool keep_alive,
                                Connection& self, BodySource* more = nullptr);
  // Counts the request and, with --access-log, logs it.
  void Account(metrics::Port port, const Request& request, const Response& res,
               const std::string& client,
               std::chrono::steady_clock::time_point arrived,
               std::chrono::steady_clock::time_point handled);
  // GET /v1/watch, accepted (`head`): sends the head, then the hub's events
  // under the request's prefix as they come, chunked, with a comment when
  // idle; until the client goes (`watch`), the hub drops it, or the server
  // stops.
  template <class Stream>
  Awaitable<void> StreamEvents(Stream& stream, const Request& request,
                               Response& head, Connection& self,
                               ClientWatch& watch);

  bool shutting_down() const { return ports_.shutting_down(); }

  boost::asio::io_context& io_;
  Service& service_;
  metrics::Metrics& metrics_;
  Options options_;
  Ports ports_;
};

}  // namespace fencepost::proxy
