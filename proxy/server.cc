#include "proxy/server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/ssl.hpp>

#include "proxy/framing.h"
#include "proxy/problem.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kHeaderLimit = 16 * 1024;

// The status line and header fields of `res`, exactly as they are set: one
// string, written with the body in one gather write. (Beast's serializer
// walks a buffer-sequence view per field, which showed in profiles.)
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

bool ExpectsContinue(const Request& req) {
  return beast::iequals(req[http::field::expect], "100-continue");
}

}  // namespace

Server::Server(asio::io_context& io, Service& service,
               metrics::Metrics& metrics, Options options)
    : io_(io), service_(service), metrics_(metrics), options_(options) {}

tcp::endpoint Server::Listen(metrics::Port port, const tcp::endpoint& where) {
  auto acceptor = std::make_unique<tcp::acceptor>(io_);
  acceptor->open(where.protocol());
  acceptor->set_option(asio::socket_base::reuse_address(true));
  acceptor->bind(where);
  acceptor->listen(asio::socket_base::max_listen_connections);
  const tcp::endpoint bound = acceptor->local_endpoint();
  asio::co_spawn(io_, Accept(*acceptor, port), asio::detached);
  acceptors_.push_back(std::move(acceptor));
  return bound;
}

void Server::Shutdown() {
  shutting_down_ = true;
  for (auto& acceptor : acceptors_) {
    beast::error_code ignored;
    acceptor->close(ignored);
  }
  for (Connection& c : connections_) {
    if (c.idle) c.stream->cancel();
  }
}

asio::awaitable<void> Server::Accept(tcp::acceptor& acceptor,
                                     metrics::Port port) {
  while (!shutting_down_) {
    beast::error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(
        asio::redirect_error(asio::use_awaitable, ec));
    if (shutting_down_) co_return;
    if (ec) {
      // Out of descriptors, say: back off instead of spinning.
      spdlog::warn("accept failed: {}", ec.message());
      asio::steady_timer pause(io_, std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(io_, Serve(std::move(socket), port), asio::detached);
  }
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

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

// Coroutines here follow two rules that keep g++ 12 correct: every co_await
// is a statement of its own (never inside a condition), and no temporary
// with a destructor lives across one.
template <class Stream>
asio::awaitable<void> Server::Session(Stream& stream, metrics::Port port) {
  auto& lowest = beast::get_lowest_layer(stream);
  std::string client = "unknown";
  {
    beast::error_code ignored;
    const auto peer = lowest.socket().remote_endpoint(ignored);
    if (!ignored) {
      client = (peer.address().is_v6() ? "[" + peer.address().to_string() + "]"
                                       : peer.address().to_string()) +
               ":" + std::to_string(peer.port());
    }
  }
  const auto self = connections_.insert(connections_.end(), {&lowest, true});
  beast::flat_buffer buffer;
  beast::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

  while (!shutting_down_ || buffer.size() > 0) {
    if (buffer.size() == 0) {
      self->idle = true;
      lowest.expires_after(options_.idle_timeout);
      const std::size_t n =
          co_await stream.async_read_some(buffer.prepare(8192), token);
      buffer.commit(n);
      self->idle = false;
      if (ec) break;
    }

    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(options_.max_body);
    lowest.expires_after(options_.read_timeout);
    // The whole header block first (up to the limit), so its raw bytes can
    // be checked for what Beast would quietly repair.
    while (!HeaderEnd(buffer) && buffer.size() <= kHeaderLimit) {
      const std::size_t n =
          co_await stream.async_read_some(buffer.prepare(8192), token);
      buffer.commit(n);
      if (ec) break;
    }
    if (ec) break;
    const bool folded = HasObsFold(Bytes(buffer));
    co_await http::async_read_header(stream, buffer, parser, token);
    bool quit = false;
    std::optional<Problem> refusal = ReadProblem(ec, options_.max_body, &quit);
    if (quit) break;
    if (!refusal && folded) {
      refusal = Problem{ProblemType::kBadFraming,
                        "obsolete line folding in a header field", std::nullopt,
                        std::nullopt, std::nullopt};
    }
    if (!refusal) {
      if (auto error = FramingError(parser.get())) {
        refusal = Problem{ProblemType::kBadFraming, *error, std::nullopt,
                          std::nullopt, std::nullopt};
      }
    }
    if (!refusal && !parser.is_done()) {
      if (ExpectsContinue(parser.get())) {
        co_await asio::async_write(stream, asio::buffer(kContinue), token);
        if (ec) break;
      }
      lowest.expires_after(options_.read_timeout);
      co_await http::async_read(stream, buffer, parser, token);
      refusal = ReadProblem(ec, options_.max_body, &quit);
      if (quit) break;
    }

    const auto start = std::chrono::steady_clock::now();
    const Request& request = parser.get();
    Response res;
    if (refusal) {
      // The framing is in doubt: answer, then close without reading on.
      res = MakeProblemResponse(*refusal, 11);
    } else {
      res = co_await service_.Handle(port, request, client);
    }
    if (request.method() == http::verb::head && !res.body().empty()) {
      const auto size = res.body().size();
      res.body().clear();
      res.content_length(size);
    }
    const bool keep_alive = !refusal && request.keep_alive() && !shutting_down_;
    res.keep_alive(keep_alive);
    const std::string head = Head(res);
    const std::array<asio::const_buffer, 2> out = {asio::buffer(head),
                                                   asio::buffer(res.body())};
    lowest.expires_after(options_.read_timeout);
    co_await asio::async_write(stream, out, token);
    metrics_.Request(port, refusal ? "OTHER" : request.method_string(),
                     res.result_int(), SecondsSince(start));
    if (ec || !keep_alive) break;
  }

  connections_.erase(self);
  if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
    // TLS: send close_notify (the client need not answer it).
    lowest.expires_after(std::chrono::seconds(1));
    co_await stream.async_shutdown(token);
  }
  // Lingering close: after our FIN, drain what the client still sends for a
  // moment, so unread request bytes do not turn the close into a reset that
  // could destroy the response before the client reads it.
  lowest.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (!ec) {
    lowest.expires_after(std::chrono::seconds(1));
    std::array<char, 4096> sink;
    for (std::size_t drained = 0; drained < (1u << 20);) {
      drained += co_await lowest.async_read_some(asio::buffer(sink), token);
      if (ec) break;
    }
  }
  lowest.close();
}

asio::awaitable<void> Server::Serve(tcp::socket socket, metrics::Port port) {
  beast::tcp_stream tcp(std::move(socket));
  if (!options_.tls) {
    co_await Session(tcp, port);
    co_return;
  }
  beast::ssl_stream<beast::tcp_stream> tls(std::move(tcp), *options_.tls);
  beast::error_code ec;
  beast::get_lowest_layer(tls).expires_after(options_.read_timeout);
  // A client that does not speak TLS (plain HTTP, say) fails here and is
  // closed without an answer.
  co_await tls.async_handshake(ssl::stream_base::server,
                               asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    spdlog::debug("TLS handshake failed: {}", ec.message());
    beast::get_lowest_layer(tls).close();
    co_return;
  }
  co_await Session(tls, port);
}

}  // namespace fencepost::proxy