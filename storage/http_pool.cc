#include "storage/http_pool.h"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cerrno>
#include <optional>
#include <stdexcept>

namespace fencepost::storage {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// One connection, plain or TLS.
struct HttpPool::Conn {
  Conn(asio::io_context& io, ssl::context* tls) {
    if (tls != nullptr) {
      secure = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io, *tls);
    } else {
      plain = std::make_unique<beast::tcp_stream>(io);
    }
  }
  beast::tcp_stream& tcp() { return secure ? secure->next_layer() : *plain; }
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> secure;
};

struct HttpPool::Opened {
  std::unique_ptr<Conn> conn;  // null on failure
  std::string error;
  bool reused = false;  // taken from the pool
};

namespace {

// The most of an answer held unparsed at once: a header block, a chunk-size
// line or a trailer block longer than this fails the exchange.
constexpr std::size_t kMaxBuffer = 64 * 1024;
// Interim answers read past before the exchange fails.
constexpr int kMaxInterim = 16;

// How one request went on one connection.
struct Try {
  enum class Failed { kNone, kWrite, kRead };
  Failed failed = Failed::kNone;
  std::size_t written = 0;      // bytes of the request sent
  beast::error_code ec;         // of the failed write or read
  std::string unexpected;       // a failed read without an error code
  bool answer_started = false;  // an interim answer or some bytes came
  http::Response response;
  bool leftover = false;  // bytes past the answer: not to be pooled
};

// Coroutines here follow the project's g++ 12 rules: every co_await is a
// statement of its own, and no temporary with a destructor lives across one.
// Reads the final answer to a request sent on `stream` into `out`.
template <class Stream>
Awaitable<void> ReadAnswer(Stream& stream, bool head, std::uint64_t max_body,
                           Try& out) {
  auto token = asio::redirect_error(kUseAwaitable, out.ec);
  beast::flat_buffer buffer(kMaxBuffer);
  std::optional<bhttp::response_parser<bhttp::string_body>> parser;
  for (int answers = 0;; ++answers) {
    parser.emplace();
    parser->body_limit(max_body);
    parser->header_limit(kMaxBuffer);
    if (head) parser->skip(true);
    co_await bhttp::async_read(stream, buffer, *parser, token);
    if (out.ec) {
      out.failed = Try::Failed::kRead;
      out.answer_started = out.answer_started || parser->got_some();
      co_return;
    }
    const unsigned status = parser->get().result_int();
    if (status >= 200) break;
    out.answer_started = true;
    if (status == 101) out.unexpected = "101 without an upgrade asked for";
    if (answers == kMaxInterim) out.unexpected = "more than 16 interim answers";
    if (!out.unexpected.empty()) {
      out.failed = Try::Failed::kRead;
      co_return;
    }
  }
  out.response = parser->release();
  out.leftover = buffer.size() != 0;
}

template <class Stream>
Awaitable<Try> WriteAndRead(Stream& stream, const http::Request& request,
                            std::uint64_t max_body) {
  Try out;
  auto token = asio::redirect_error(kUseAwaitable, out.ec);
  out.written = co_await bhttp::async_write(stream, request, token);
  if (out.ec) {
    out.failed = Try::Failed::kWrite;
    co_return out;
  }
  co_await ReadAnswer(stream, request.method() == bhttp::verb::head, max_body,
                      out);
  co_return out;
}

// How a streamed request went: `whole` once its last byte left.
struct StreamTry {
  Try tried;
  bool whole = false;
  std::string body_failed;  // why the body could not be had
};

// Writes `head`, then `body` piece by piece, its last byte held back until
// the body is whole and checked, then reads the answer. `tcp` bounds each
// step by `timeout`.
template <class Stream>
Awaitable<StreamTry> StreamAndRead(Stream& stream, beast::tcp_stream& tcp,
                                   const http::Request& head,
                                   fencepost::http::BodySource& body,
                                   std::chrono::milliseconds timeout,
                                   std::uint64_t max_body) {
  constexpr std::size_t kPiece = 256 * 1024;
  StreamTry out;
  Try& tried = out.tried;
  auto token = asio::redirect_error(kUseAwaitable, tried.ec);
  bhttp::request_serializer<bhttp::string_body> serializer(head);
  tcp.expires_after(timeout);
  tried.written = co_await bhttp::async_write_header(stream, serializer, token);
  if (tried.ec) {
    tried.failed = Try::Failed::kWrite;
    co_return out;
  }
  std::string pending;  // read, not yet sent: at least the last byte
  std::uint64_t sent = 0;
  for (;;) {
    const fencepost::http::BodySource::Piece piece =
        co_await body.Next(&pending, kPiece);
    if (piece.failed || (piece.end && sent + pending.size() != body.length())) {
      out.body_failed = piece.failed ? body.why() : "the body does not add up";
      co_return out;
    }
    if (sent + pending.size() > body.length()) {
      out.body_failed = "the body is longer than announced";
      co_return out;
    }
    const std::size_t now =
        piece.end ? pending.size() : (pending.empty() ? 0 : pending.size() - 1);
    // From the write of the last byte on, the store may have it all.
    out.whole = piece.end;
    if (now > 0) {
      tcp.expires_after(timeout);
      co_await asio::async_write(stream, asio::buffer(pending.data(), now),
                                 token);
      if (tried.ec) {
        tried.failed = Try::Failed::kWrite;
        co_return out;
      }
      sent += now;
      pending.erase(0, now);
    }
    if (piece.end) break;
  }
  tcp.expires_after(timeout);
  co_await ReadAnswer(stream, false, max_body, tried);
  co_return out;
}

// How a connection the server closed fails a read.
bool IsClosed(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream ||
         ec == asio::error::connection_reset || ec == asio::error::eof ||
         ec == ssl::error::stream_truncated;
}

// An idle connection is usable while nothing can be read on it: an end of
// stream, a reset or stray bytes (a TLS close_notify, an unasked answer)
// all mean the server is done with it.
bool StillOpen(tcp::socket& socket) {
  char byte = 0;
  const ssize_t n =
      ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

HttpPool::HttpPool(asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)) {}

HttpPool::~HttpPool() = default;

void HttpPool::Clear() { idle_.clear(); }

Awaitable<HttpPool::Opened> HttpPool::Open() {
  Opened out;
  beast::error_code ec;
  auto token = asio::redirect_error(kUseAwaitable, ec);
  std::vector<tcp::endpoint> resolved;
  if (options_.endpoints.empty()) {
    tcp::resolver resolver(io_);
    const auto found =
        co_await resolver.async_resolve(options_.host, options_.port, token);
    if (ec) {
      out.error = "cannot resolve: " + ec.message();
      co_return out;
    }
    for (const auto& entry : found) resolved.push_back(entry.endpoint());
  }
  auto conn = std::make_unique<Conn>(io_, options_.tls);
  // One deadline for connecting and the handshake.
  conn->tcp().expires_after(options_.timeout);
  co_await conn->tcp().async_connect(
      options_.endpoints.empty() ? resolved : options_.endpoints, token);
  if (ec) {
    out.error = "connect: " + ec.message();
    co_return out;
  }
  conn->tcp().socket().set_option(tcp::no_delay(true), ec);
  if (conn->secure) {
    beast::error_code not_ip;
    asio::ip::make_address(options_.host, not_ip);
    // SNI names a host; RFC 6066 leaves IP literals out.
    if (not_ip && SSL_set_tlsext_host_name(conn->secure->native_handle(),
                                           options_.host.c_str()) != 1) {
      out.error = "cannot set SNI";
      co_return out;
    }
    conn->secure->set_verify_callback(
        ssl::host_name_verification(options_.host));
    co_await conn->secure->async_handshake(ssl::stream_base::client, token);
    if (ec) {
      out.error = "TLS handshake: " + ec.message();
      co_return out;
    }
  }
  out.conn = std::move(conn);
  co_return out;
}

Awaitable<HttpPool::Opened> HttpPool::Take(bool may_reuse) {
  Opened out;
  if (may_reuse) out.conn = TakeIdle();
  out.reused = out.conn != nullptr;
  if (!out.reused) out = co_await Open();
  co_return out;
}

std::unique_ptr<HttpPool::Conn> HttpPool::TakeIdle() {
  while (!idle_.empty()) {
    std::unique_ptr<Conn> conn = std::move(idle_.back());
    idle_.pop_back();
    if (StillOpen(conn->tcp().socket())) return conn;
  }
  return nullptr;
}

Awaitable<HttpPool::Exchange> HttpPool::RoundTrip(const http::Request& request,
                                                  Resend resend) {
  Exchange out;
  for (int attempt = 0; attempt < 2; ++attempt) {
    Opened opened = co_await Take(attempt == 0);
    if (!opened.conn) {
      out.error = std::move(opened.error);
      co_return out;
    }
    std::unique_ptr<Conn> conn = std::move(opened.conn);
    const bool reused = opened.reused;
    // One deadline for sending the request and reading its answer.
    conn->tcp().expires_after(options_.timeout);
    Try tried;
    if (conn->secure) {
      tried = co_await WriteAndRead(*conn->secure, request, options_.max_body);
    } else {
      tried = co_await WriteAndRead(*conn->plain, request, options_.max_body);
    }
    if (tried.failed == Try::Failed::kWrite) {
      if (tried.written == 0 && reused) continue;  // it had closed; not sent
      out.sent = tried.written == 0 ? Sent::kNotSent : Sent::kUnknown;
      out.error = "send: " + tried.ec.message();
      co_return out;
    }
    if (tried.failed == Try::Failed::kRead) {
      // A kept-alive connection that ended before any byte of an answer:
      // the server may have closed it before reading the request, or read
      // it whole, acted on it and closed without an answer. Only a request
      // that is safe to repeat goes once more.
      if (reused && resend == Resend::kIfUnanswered && !tried.answer_started &&
          IsClosed(tried.ec)) {
        continue;
      }
      out.sent = Sent::kUnknown;
      out.error =
          "answer: " + (tried.ec ? tried.ec.message() : tried.unexpected);
      co_return out;
    }
    out.sent = Sent::kAnswered;
    out.response = std::move(tried.response);
    Keep(std::move(conn), out.response, tried.leftover);
    co_return out;
  }
  co_return out;  // not reached: the second attempt never retries
}

void HttpPool::Keep(std::unique_ptr<Conn> conn, const http::Response& response,
                    bool leftover) {
  if (response.keep_alive() && !leftover && idle_.size() < options_.max_idle) {
    conn->tcp().expires_never();
    idle_.push_back(std::move(conn));
  }
}

Awaitable<HttpPool::Exchange> HttpPool::StreamTrip(
    const http::Request& head, fencepost::http::BodySource& body) {
  Exchange out;
  // A connection taken from the pool may turn out closed before the
  // header left: then once more on a new one (no byte of the body read).
  for (int attempt = 0; attempt < 2; ++attempt) {
    Opened opened = co_await Take(attempt == 0);
    if (!opened.conn) {
      out.error = std::move(opened.error);
      co_return out;
    }
    std::unique_ptr<Conn> conn = std::move(opened.conn);
    const bool reused = opened.reused;
    StreamTry streamed;
    if (conn->secure) {
      streamed = co_await StreamAndRead(*conn->secure, conn->tcp(), head, body,
                                        options_.timeout, options_.max_body);
    } else {
      streamed = co_await StreamAndRead(*conn->plain, conn->tcp(), head, body,
                                        options_.timeout, options_.max_body);
    }
    Try& tried = streamed.tried;
    if (!streamed.body_failed.empty()) {
      out.error = "body: " + streamed.body_failed;
      out.body_failed = true;
      co_return out;  // kNotSent: its last byte never left
    }
    if (tried.failed == Try::Failed::kWrite) {
      if (tried.written == 0 && reused) continue;
      out.error = "send: " + tried.ec.message();
      // A write of the last byte that failed (a timeout, say) may still
      // have reached the store; before it, nothing could be whole.
      if (streamed.whole) out.sent = Sent::kUnknown;
      co_return out;
    }
    if (tried.failed == Try::Failed::kRead) {
      out.sent = Sent::kUnknown;
      out.error =
          "answer: " + (tried.ec ? tried.ec.message() : tried.unexpected);
      co_return out;
    }
    out.sent = Sent::kAnswered;
    out.response = std::move(tried.response);
    Keep(std::move(conn), out.response, tried.leftover);
    co_return out;
  }
  co_return out;
}

std::unique_ptr<ssl::context> MakeClientTls(const std::string& ca_file) {
  auto tls = std::make_unique<ssl::context>(ssl::context::tls_client);
  tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                   ssl::context::no_tlsv1_1);
  tls->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (ca_file.empty()) {
    tls->set_default_verify_paths(ec);
  } else {
    tls->load_verify_file(ca_file, ec);
  }
  if (ec) {
    throw std::runtime_error(
        (ca_file.empty() ? std::string("cannot load the system's CAs")
                         : "cannot load the CA file '" + ca_file + "'") +
        ": " + ec.message());
  }
  return tls;
}

}  // namespace fencepost::storage
