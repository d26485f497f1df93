#include "proxy/server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdio>
#include <functional>

#include "proxy/framing.h"
#include "proxy/logging.h"
#include "proxy/problem.h"
#include "proxy/routes.h"
#include "proxy/s3_door.h"
#include "proxy/server_wire.h"
#include "proxy/streamed_body.h"
#include "proxy/watch.h"
#include "storage/watch_hub.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kHeaderLimit = 16 * 1024;

}  // namespace

// (Beast's serializer walks a buffer-sequence view per field, which showed
// in profiles.)
std::string Head(const Response& res) {
  std::string head;
  head.reserve(192);
  head += res.version() == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  head += std::to_string(res.result_int());
  head += ' ';
  head += res.reason();
  head += "\r\n";
  for (const auto& field : res) {
    head += field.name_string();
    head += ": ";
    head += field.value();
    head += "\r\n";
  }
  head += "\r\n";
  return head;
}

namespace {

std::string_view Bytes(const beast::flat_buffer& buffer) {
  return {static_cast<const char*>(buffer.data().data()), buffer.size()};
}

// Whether the buffer holds a whole header block (a bare-LF one too, which
// the parser then refuses).
bool HeaderEnd(const beast::flat_buffer& buffer) {
  const std::string_view bytes = Bytes(buffer);
  return bytes.find("\r\n\r\n") != std::string_view::npos ||
         bytes.find("\n\n") != std::string_view::npos;
}

}  // namespace

std::size_t Room(const beast::flat_buffer& buffer) {
  return std::min<std::size_t>(8192, buffer.max_size() - buffer.size());
}

namespace {

bool ExpectsContinue(const Request& req) {
  return beast::iequals(req[http::field::expect], "100-continue");
}

}  // namespace

namespace {

// The answer to a connection past its port's cap.
std::string Refusal() {
  Response res = MakeProblemResponse(
      {ProblemType::kTooManyConnections,
       "this port is at its connection cap and no connection is idle; retry "
       "later",
       std::nullopt, std::nullopt, std::nullopt},
      11);
  res.set(http::field::retry_after, "1");
  res.keep_alive(false);
  return Head(res) + res.body();
}

}  // namespace

Server::Server(asio::io_context& io, Service& service,
               metrics::Metrics& metrics, Options options)
    : io_(io),
      service_(service),
      metrics_(metrics),
      options_(options),
      ports_(io, metrics,
             {options.max_connections, options.admin_max_connections, Refusal(),
              options.tls != nullptr},
             [this](Socket socket, Listener& listener) {
               return Serve(std::move(socket), listener);
             }) {}

tcp::endpoint Server::Listen(metrics::Port port, const tcp::endpoint& where) {
  return ports_.Listen(port, where);
}

void Server::Shutdown() {
  service_.watches().Close();
  ports_.Shutdown();
}

namespace {

// What a read error means for the connection: a quiet close (the peer left or
// stalled), or a problem to answer before closing.
std::optional<Problem> ReadProblem(const beast::error_code& ec,
                                   std::uint64_t max_body, bool* quit) {
  *quit = false;
  if (!ec) return std::nullopt;
  if (ec == http::error::header_limit) {
    return Problem{ProblemType::kHeadersTooLarge,
                   "request headers exceed 16 KiB", std::nullopt, std::nullopt,
                   std::nullopt};
  }
  if (ec == http::error::buffer_overflow) {
    return Problem{ProblemType::kBadFraming,
                   "a chunk-size line or the trailer section exceeds " +
                       std::to_string(Server::kBufferLimit / 1024) + " KiB",
                   std::nullopt, std::nullopt, std::nullopt};
  }
  if (ec == http::error::body_limit) {
    return Problem{
        ProblemType::kBodyTooLarge,
        "the body exceeds --max-body (" + std::to_string(max_body) + " bytes)",
        std::nullopt, std::nullopt, std::nullopt};
  }
  if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec == beast::error::timeout || ec == asio::error::operation_aborted ||
      ec == asio::error::connection_reset || ec == asio::error::eof) {
    *quit = true;
    return std::nullopt;
  }
  return Problem{ProblemType::kBadFraming, ec.message(), std::nullopt,
                 std::nullopt, std::nullopt};
}

// Obsolete line folding, or a Transfer-Encoding, Content-Length or Host that
// makes the request ambiguous: the problem, or nullopt.
std::optional<Problem> HeaderProblem(const Request& req, bool folded) {
  if (folded) {
    return Problem{ProblemType::kBadFraming,
                   "obsolete line folding in a header field"};
  }
  if (auto error = FramingError(req)) {
    return Problem{ProblemType::kBadFraming, *error};
  }
  if (auto host = HostError(req)) {
    return Problem{ProblemType::kBadRequest, *host};
  }
  return std::nullopt;
}

// The peer as address:port (IPv6 in brackets), or "unknown".
std::string ClientOf(const Server::Socket& socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  return ListenAddress{peer.address().to_string(), peer.port()}.ToString();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// TLS close_notify, then a lingering close.
template <class Stream>
Awaitable<void> WindDown(Stream& stream, Ports::Connection& self) {
  auto& lowest = beast::get_lowest_layer(stream);
  beast::error_code ec;
  auto token = asio::redirect_error(kUseAwaitable, ec);
  if constexpr (!std::is_same_v<Stream, Ports::TcpStream>) {
    // TLS: send close_notify (the client need not answer it).
    lowest.expires_after(std::chrono::seconds(1));
    co_await stream.async_shutdown(token);
  }
  // Lingering close: after our FIN, drain what the client still sends for a
  // moment, so unread request bytes do not turn the close into a reset that
  // could destroy the response before the client reads it.
  lowest.socket().shutdown(asio::socket_base::shutdown_send, ec);
  if (ec) co_return;
  lowest.expires_after(std::chrono::seconds(1));
  std::array<char, 4096> sink;
  for (std::size_t drained = 0; drained < (1u << 20) && !self.shed;) {
    drained += co_await lowest.async_read_some(asio::buffer(sink), token);
    if (ec) break;
  }
}

}  // namespace

// Coroutines here follow two rules that keep g++ 12 correct: every co_await
// is a statement of its own (never inside a condition), and no temporary
// with a destructor lives across one.
template <class Stream>
Awaitable<void> Server::Session(Stream& stream, Listener& listener,
                                Connection& self) {
  const metrics::Port port = listener.port;
  auto& lowest = beast::get_lowest_layer(stream);
  const std::string client = ClientOf(lowest.socket());
  beast::flat_buffer buffer(kBufferLimit);
  while ((!shutting_down() || buffer.size() > 0) && !self.shed) {
    if (buffer.size() == 0) {
      self.Enter(Connection::Phase::kIdle);
      const bool more = co_await AwaitRequest(stream, buffer, self);
      if (!more) break;
    }
    self.phase = Connection::Phase::kReading;
    const auto arrived = std::chrono::steady_clock::now();
    Parser parser;
    Received received = co_await ReadRequest(stream, buffer, parser, port);
    if (received.quit) break;

    self.phase = Connection::Phase::kHandling;
    const auto handled = std::chrono::steady_clock::now();
    // A streamed body is read from here by its handler, through `body`;
    // the request keeps its header.
    std::optional<StreamedBody<Stream>> body;
    Request header;
    if (received.streams) {
      header.base() = parser.get().base();
      body.emplace(stream, buffer, std::move(parser), options_.read_timeout);
    }
    const Request& request = received.streams ? header : parser.get();
    if (port == metrics::Port::kAdmin && !received.refusal &&
        !received.screened && watch::HoldsConnection(request)) {
      const bool more =
          co_await ServeWatch(stream, buffer, request, listener, self, client);
      if (!more) break;
      continue;
    }
    std::unique_ptr<BodySource> answer_body;  // a large value's, streamed
    Response res = co_await Answer(port, request, received, client,
                                   body ? &*body : nullptr, &answer_body);
    if (body) co_await body->Drain(options_.max_body);
    // A body its handler left unread ends the connection.
    const bool keep_alive = !received.refusal && !received.screened &&
                            (!body || body->finished()) &&
                            request.keep_alive() && !shutting_down();
    const bool sent = co_await WriteResponse(stream, request, res, keep_alive,
                                             self, answer_body.get());
    Account(port, request, res, client, arrived, handled);
    if (!sent || !keep_alive) break;
  }
  // From here the connection only winds down: it may be shed.
  self.Enter(Connection::Phase::kIdle);
  if (self.shed) co_return;
  co_await WindDown(stream, self);
}

template <class Stream>
Awaitable<bool> Server::AwaitRequest(Stream& stream, beast::flat_buffer& buffer,
                                     Connection& self) {
  beast::error_code ec;
  beast::get_lowest_layer(stream).expires_after(options_.idle_timeout);
  const std::size_t n = co_await stream.async_read_some(
      buffer.prepare(Room(buffer)), asio::redirect_error(kUseAwaitable, ec));
  buffer.commit(n);
  co_return !ec && !self.shed;
}

template <class Stream>
Awaitable<Server::Received> Server::ReadRequest(Stream& stream,
                                                beast::flat_buffer& buffer,
                                                Parser& parser,
                                                metrics::Port port) {
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  auto& lowest = beast::get_lowest_layer(stream);
  beast::error_code ec;
  auto token = asio::redirect_error(kUseAwaitable, ec);
  Received out;
  parser.header_limit(kHeaderLimit);
  // A streamed body may be larger than --max-body: the bound is set once
  // the header says whether it is (Beast checks Content-Length against it
  // as soon as it reads the field).
  parser.body_limit(kMaxStreamedBody);
  lowest.expires_after(options_.read_timeout);
  // The whole header block first (up to the limit), so its raw bytes can be
  // checked for what Beast would quietly repair.
  while (!HeaderEnd(buffer) && buffer.size() <= kHeaderLimit) {
    const std::size_t n =
        co_await stream.async_read_some(buffer.prepare(Room(buffer)), token);
    buffer.commit(n);
    if (ec) {
      out.quit = true;
      co_return out;
    }
  }
  const bool folded = HasObsFold(Bytes(buffer));
  co_await http::async_read_header(stream, buffer, parser, token);
  out.refusal = ReadProblem(ec, options_.max_body, &out.quit);
  if (out.quit || out.refusal) co_return out;
  out.refusal = HeaderProblem(parser.get(), folded);
  if (out.refusal || parser.is_done()) co_return out;
  // A body up to --max-body is read whole, and checked before anything
  // moves; a larger one may stream.
  if (parser.content_length().value_or(0) > options_.max_body &&
      service_.StreamsBody(port, parser.get())) {
    out.streams = true;  // its reader answers Expect: 100-continue
    co_return out;
  }
  if (parser.content_length().value_or(0) > options_.max_body) {
    out.refusal =
        ReadProblem(http::error::body_limit, options_.max_body, &out.quit);
    co_return out;
  }
  parser.body_limit(options_.max_body);

  // Trailer fields (after a chunked body) are merged into the header's list,
  // and a repeated name lands beside the header's own field. RFC 9110
  // section 6.5.1: they must not be taken for header fields (a Fencing-Token
  // or Authorization sent only there, a field a front proxy set), so the
  // header section is kept and put back.
  const http::request_header<> header = parser.get().base();
  if (ExpectsContinue(parser.get()) && parser.get().version() >= 11) {
    // Only a request that would be served is invited to send its body.
    out.screened = service_.Screen(port, parser.get());
    if (out.screened) co_return out;
    co_await asio::async_write(stream, asio::buffer(kContinue), token);
    if (ec) {
      out.quit = true;
      co_return out;
    }
  }
  lowest.expires_after(options_.read_timeout);
  co_await http::async_read(stream, buffer, parser, token);
  out.refusal = ReadProblem(ec, options_.max_body, &out.quit);
  parser.get().base() = header;
  co_return out;
}

Awaitable<Response> Server::Answer(metrics::Port port, const Request& request,
                                   Received& received,
                                   const std::string& client, BodySource* body,
                                   std::unique_ptr<BodySource>* answer_body) {
  // A refusal's framing is in doubt: it is answered in HTTP/1.1 and the
  // connection closes without reading on.
  if (received.refusal) {
    // The S3 front door's clients read S3's error XML.
    if (port == metrics::Port::kS3) {
      co_return S3Door::InS3Terms(request, *received.refusal);
    }
    co_return MakeProblemResponse(*received.refusal, 11);
  }
  if (received.screened) co_return std::move(*received.screened);
  co_return co_await service_.Handle(port, request, client, body, answer_body);
}

template <class Stream>
Awaitable<bool> Server::WriteResponse(Stream& stream, const Request& request,
                                      Response& res, bool keep_alive,
                                      Connection& self, BodySource* more) {
  routes::FinishHead(request, res);
  res.keep_alive(keep_alive);
  const std::string head = Head(res);
  beast::buffers_suffix<std::array<asio::const_buffer, 2>> rest(
      std::array<asio::const_buffer, 2>{asio::buffer(head),
                                        asio::buffer(res.body())});
  beast::error_code ec;
  // One deadline for the whole answer, --write-timeout plus a second per
  // MiB: a client that reads a byte now and then cannot keep it pending,
  // and a large value still reaches one that reads at 1 MiB/s.
  constexpr std::size_t kBytesPerSecond = 1u << 20;
  beast::get_lowest_layer(stream).expires_after(
      options_.write_timeout +
      std::chrono::seconds(res.body().size() / kBytesPerSecond));
  self.Enter(Connection::Phase::kWriting);
  while (beast::buffer_bytes(rest) > 0) {
    const std::size_t n = co_await stream.async_write_some(
        rest, asio::redirect_error(kUseAwaitable, ec));
    if (ec || self.shed) co_return false;
    rest.consume(n);
    self.since = std::chrono::steady_clock::now();
  }
  if (more == nullptr || request.method() == http::verb::head) co_return true;
  // A streamed body, a piece at a time, each under --write-timeout and a
  // second per MiB; one that fails ends the connection short of its
  // Content-Length, which the client sees.
  std::string piece;
  for (;;) {
    piece.clear();
    const BodySource::Piece got = co_await more->Next(&piece, 256 * 1024);
    if (got.failed) {
      LogEvent(
          spdlog::level::warn, "answer_cut_short",
          "a streamed answer ended short of its length",
          {{"target", std::string(request.target())}, {"reason", more->why()}});
      co_return false;
    }
    beast::get_lowest_layer(stream).expires_after(options_.write_timeout +
                                                  std::chrono::seconds(1));
    co_await asio::async_write(stream, asio::buffer(piece),
                               asio::redirect_error(kUseAwaitable, ec));
    if (ec || self.shed) co_return false;
    self.since = std::chrono::steady_clock::now();
    if (got.end) co_return true;
  }
}

void Server::Account(metrics::Port port, const Request& request,
                     const Response& res, const std::string& client,
                     std::chrono::steady_clock::time_point arrived,
                     std::chrono::steady_clock::time_point handled) {
  // The method and target are known once the request line is read (a body
  // too large is refused after it); before, the method is empty.
  const std::string_view method = request.method_string();
  const bool line_read = !method.empty();
  metrics_.Request(port, line_read ? method : "OTHER", res.result_int(),
                   SecondsSince(handled));
  if (!options_.access_log) return;
  LogAccess({PortName(port), client, line_read ? method : "-",
             line_read ? std::string_view(request.target()) : "-",
             res.result_int(), res.body().size(), SecondsSince(arrived)});
}

Awaitable<void> Server::Serve(Socket socket, Listener& listener) {
  TcpStream tcp(std::move(socket));
  Ports::Registration registration(ports_, listener, &tcp);
  Connection& self = registration.connection();
  if (!options_.tls) {
    co_await Session(tcp, listener, self);
    tcp.close();
    co_return;
  }
  beast::ssl_stream<TcpStream> tls(std::move(tcp), *options_.tls);
  self.stream = &beast::get_lowest_layer(tls);
  beast::error_code ec;
  beast::get_lowest_layer(tls).expires_after(options_.read_timeout);
  // A client that does not speak TLS (plain HTTP, say) fails here and is
  // closed without an answer.
  co_await tls.async_handshake(ssl::stream_base::server,
                               asio::redirect_error(kUseAwaitable, ec));
  if (ec) {
    spdlog::debug("TLS handshake failed: {}", ec.message());
  } else if (!self.shed) {  // shed while its handshake was completing
    co_await Session(tls, listener, self);
  }
  beast::get_lowest_layer(tls).close();
}

}  // namespace fencepost::proxy