#include "client/client.h"

#include <openssl/ssl.h>
#include <poll.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <stdexcept>

#include "client/json.h"
#include "codec/key.h"

namespace fencepost::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

namespace {

class ClientCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "fencepost.client"; }
  std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::kResolveFailed:
        return "host name not resolved";
      case Errc::kConnectFailed:
        return "cannot connect";
      case Errc::kTlsFailed:
        return "TLS handshake failed";
      case Errc::kTimedOut:
        return "timed out";
      case Errc::kConnectionLost:
        return "connection lost";
      case Errc::kBadResponse:
        return "bad response";
      case Errc::kBadRequest:
        return "bad request";
    }
    return "unknown error";
  }
};

constexpr std::size_t kHeaderLimit = 64 * 1024;
constexpr std::string_view kUserAgent = "fencepost-client";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Result Failure(Errc errc, std::string detail) {
  Result result;
  result.error = errc;
  result.detail = std::move(detail);
  return result;
}

// RFC 9110 section 5.6.2.
bool IsToken(std::string_view s) {
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           kSpecials.find(c) != std::string_view::npos;
  });
}

// Bytes that would end a field or the request line early.
bool IsSafeValue(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) ==
         std::string_view::npos;
}

bool IsOriginForm(std::string_view target) {
  return !target.empty() && target.front() == '/' &&
         std::none_of(target.begin(), target.end(), [](char c) {
           const auto u = static_cast<unsigned char>(c);
           return u <= 0x20 || u == 0x7F;
         });
}

std::string HostPort(const Url& url) {
  const bool v6 = url.host.find(':') != std::string::npos;
  return (v6 ? "[" + url.host + "]" : url.host) + ":" +
         std::to_string(url.port);
}

// The Host field: HostPort less the scheme's own port (RFC 3986 section
// 6.2.3's normal form, as curl and AWS's SDKs send it), which a request
// signed for S3 signs as sent.
std::string HostField(const Url& url) {
  const std::string host_port = HostPort(url);
  if (url.port != (url.tls ? 443 : 80)) return host_port;
  return host_port.substr(0, host_port.rfind(':'));
}

}  // namespace

const std::error_category& client_category() {
  static const ClientCategory category;
  return category;
}

std::error_code make_error_code(Errc e) {
  return {static_cast<int>(e), client_category()};
}

Url Url::Parse(std::string_view text) {
  const auto fail = [&](const std::string& why) {
    return std::invalid_argument("bad URL '" + std::string(text) + "': " + why);
  };
  Url url;
  const std::string lower = Lower(text.substr(0, 8));
  std::string_view rest;
  if (lower.rfind("https://", 0) == 0) {
    url.tls = true;
    rest = text.substr(8);
  } else if (lower.rfind("http://", 0) == 0) {
    rest = text.substr(7);
  } else {
    throw fail("the scheme must be http:// or https://");
  }
  const auto path_at = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_at);
  if (path_at != std::string_view::npos && rest.substr(path_at) != "/") {
    throw fail("a base URL has no path, query or fragment");
  }
  if (authority.find('@') != std::string_view::npos) {
    throw fail("user info is not supported");
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw fail("unclosed '['");
    url.host = std::string(authority.substr(1, close - 1));
    error_code ec;
    asio::ip::make_address_v6(url.host, ec);
    if (ec) throw fail("bad IPv6 address");
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw fail("junk after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) throw fail("empty port");
    }
  } else {
    const auto colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) throw fail("empty port");
    }
  }
  if (url.host.empty()) throw fail("no host");
  for (const char c : url.host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) throw fail("bad character in the host");
  }
  url.port = url.tls ? 443 : 80;
  if (!port_text.empty()) {
    unsigned long port = 0;
    for (const char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) throw fail("bad port");
      port = port * 10 + static_cast<unsigned long>(c - '0');
    }
    if (port == 0 || port > 65535) throw fail("port out of range");
    url.port = static_cast<std::uint16_t>(port);
  }
  return url;
}

std::string Url::ToString() const {
  return (tls ? "https://" : "http://") + HostPort(*this);
}

std::string EncodeKey(std::string_view key) { return codec::EncodeKey(key); }

std::string Response::header(const std::string& lower_case_name) const {
  const auto it = headers.find(lower_case_name);
  return it == headers.end() ? "" : it->second;
}

struct Client::Impl {
  Options options;
  Url url;
  asio::io_context io{1};
  tcp::resolver resolver{io};
  std::unique_ptr<ssl::context> tls_context;
  std::unique_ptr<tcp::socket> plain;
  std::unique_ptr<ssl::stream<tcp::socket>> tls;
  beast::flat_buffer buffer;
  bool connected = false;

  // How one request went on one connection.
  struct Exchange {
    error_code error;
    bool timed_out = false;
    bool on_write = false;  // the write failed: nothing was delivered
    bool got_some = false;  // some of the response arrived
    Response response;
  };

  explicit Impl(Options o)
      : options(std::move(o)), url(Url::Parse(options.url)) {
    if (!url.tls) return;
    tls_context = std::make_unique<ssl::context>(ssl::context::tls_client);
    tls_context->set_options(ssl::context::default_workarounds |
                             ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                             ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    tls_context->set_verify_mode(ssl::verify_peer);
    error_code ec;
    if (options.ca_file.empty()) {
      tls_context->set_default_verify_paths(ec);
    } else {
      tls_context->load_verify_file(options.ca_file, ec);
    }
    if (ec) {
      throw std::runtime_error("cannot load CA file '" + options.ca_file +
                               "': " + ec.message());
    }
  }

  tcp::socket& Socket() { return tls ? tls->next_layer() : *plain; }

  void Disconnect() {
    if (plain || tls) {
      error_code ignored;
      Socket().shutdown(tcp::socket::shutdown_both, ignored);
      Socket().close(ignored);
    }
    plain.reset();
    tls.reset();
    buffer.clear();
    connected = false;
  }

  // Runs the io_context until `done` or `deadline`. At the deadline it
  // cancels what is pending (closing the connection, so the operation
  // completes with an error) and returns false.
  bool RunUntil(const bool& done, Clock::time_point deadline) {
    io.restart();
    io.run_until(deadline);
    if (done) return true;
    resolver.cancel();
    if (plain || tls) {
      error_code ignored;
      Socket().close(ignored);
    }
    io.restart();
    io.run();
    return false;
  }

  // An idle kept-alive connection is usable while nothing is readable on
  // it: readable means the server closed it (EOF or reset) or sent bytes
  // nobody asked for, and either way it must not carry a request.
  bool IdleConnectionUsable() {
    if (buffer.size() != 0) return false;
    pollfd p{};
    p.fd = Socket().native_handle();
    p.events = POLLIN;
    return ::poll(&p, 1, 0) == 0;
  }

  Result Connect(Clock::time_point deadline) {
    Disconnect();
    const std::string where = HostPort(url);
    std::vector<tcp::endpoint> endpoints;
    error_code ec;
    const asio::ip::address address = asio::ip::make_address(url.host, ec);
    if (!ec) {
      endpoints.emplace_back(address, url.port);
    } else {
      bool done = false;
      resolver.async_resolve(
          url.host, std::to_string(url.port),
          [&](const error_code& e, const tcp::resolver::results_type& found) {
            ec = e;
            for (const auto& entry : found)
              endpoints.push_back(entry.endpoint());
            done = true;
          });
      if (!RunUntil(done, deadline)) {
        return Failure(Errc::kTimedOut, "resolving " + url.host + " timed out");
      }
      if (ec || endpoints.empty()) {
        return Failure(Errc::kResolveFailed,
                       "cannot resolve " + url.host + ": " + ec.message());
      }
    }
    if (url.tls) {
      tls = std::make_unique<ssl::stream<tcp::socket>>(io, *tls_context);
    } else {
      plain = std::make_unique<tcp::socket>(io);
    }
    bool done = false;
    asio::async_connect(Socket(), endpoints,
                        [&](const error_code& e, const tcp::endpoint&) {
                          ec = e;
                          done = true;
                        });
    if (!RunUntil(done, deadline)) {
      Disconnect();
      return Failure(Errc::kTimedOut, "connecting to " + where + " timed out");
    }
    if (ec) {
      Disconnect();
      return Failure(Errc::kConnectFailed,
                     "cannot connect to " + where + ": " + ec.message());
    }
    Socket().set_option(tcp::no_delay(true), ec);
    if (url.tls) {
      if (Result r = Handshake(deadline); !r.ok()) {
        Disconnect();
        return r;
      }
    }
    connected = true;
    return {};
  }

  Result Handshake(Clock::time_point deadline) {
    error_code ec;
    asio::ip::make_address(url.host, ec);
    // SNI names a host; RFC 6066 leaves IP literals out.
    if (ec &&
        SSL_set_tlsext_host_name(tls->native_handle(), url.host.c_str()) != 1) {
      return Failure(Errc::kTlsFailed, "cannot set SNI for " + url.host);
    }
    tls->set_verify_callback(ssl::host_name_verification(url.host));
    bool done = false;
    tls->async_handshake(ssl::stream_base::client, [&](const error_code& e) {
      ec = e;
      done = true;
    });
    if (!RunUntil(done, deadline)) {
      return Failure(Errc::kTimedOut,
                     "TLS handshake with " + HostPort(url) + " timed out");
    }
    if (ec) {
      return Failure(Errc::kTlsFailed, "TLS handshake with " + HostPort(url) +
                                           ": " + ec.message());
    }
    return {};
  }

  template <class Stream>
  Exchange WriteAndRead(Stream& stream,
                        const http::request<http::string_body>& request,
                        Clock::time_point deadline) {
    Exchange out;
    bool done = false;
    http::async_write(stream, request, [&](const error_code& e, std::size_t) {
      out.error = e;
      done = true;
    });
    if (!RunUntil(done, deadline)) out.timed_out = true;
    if (out.timed_out) return out;
    if (out.error) {
      // A server may answer before it has read the whole request (413 for
      // a body over its limit) and close: that answer may still be there
      // to read. Without one, nothing was delivered.
      Exchange answered = Read(stream, request, deadline);
      if (!answered.timed_out && !answered.error) return answered;
      out.on_write = true;
      return out;
    }
    return Read(stream, request, deadline);
  }

  // Reads the answer to `request`, which was written (or cut off).
  template <class Stream>
  Exchange Read(Stream& stream, const http::request<http::string_body>& request,
                Clock::time_point deadline) {
    Exchange out;
    bool done = false;
    http::response_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(options.max_body);
    if (request.method() == http::verb::head) parser.skip(true);
    http::async_read(stream, buffer, parser,
                     [&](const error_code& e, std::size_t) {
                       out.error = e;
                       done = true;
                     });
    if (!RunUntil(done, deadline)) out.timed_out = true;
    out.got_some = parser.got_some();
    if (out.timed_out || out.error) return out;
    const auto& message = parser.get();
    out.response.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      std::string& value = out.response.headers[Lower(field.name_string())];
      if (!value.empty()) value += ", ";
      value += std::string(field.value());
    }
    out.response.body = message.body();
    if (!message.keep_alive()) Disconnect();
    return out;
  }

  Exchange WriteAndRead(const http::request<http::string_body>& request,
                        Clock::time_point deadline) {
    return tls ? WriteAndRead(*tls, request, deadline)
               : WriteAndRead(*plain, request, deadline);
  }

  Result Send(http::request<http::string_body>& request) {
    const Clock::time_point deadline = Clock::now() + options.timeout;
    request.set(http::field::host, HostField(url));
    request.set(http::field::user_agent, kUserAgent);
    if (!options.bearer_token.empty()) {
      request.set(http::field::authorization, "Bearer " + options.bearer_token);
    }
    request.prepare_payload();
    const bool idempotent = request.method() == http::verb::get ||
                            request.method() == http::verb::head;
    for (int attempt = 0;; ++attempt) {
      if (connected && !IdleConnectionUsable()) Disconnect();
      const bool reused = connected;
      if (!connected) {
        if (Result r = Connect(deadline); !r.ok()) return r;
      }
      Exchange exchange = WriteAndRead(request, deadline);
      if (!exchange.timed_out && !exchange.error) {
        Result result;
        result.response = std::move(exchange.response);
        return result;
      }
      Disconnect();
      const bool unsent =
          exchange.on_write || (idempotent && !exchange.got_some);
      if (attempt == 0 && reused && !exchange.timed_out && unsent) continue;
      return Describe(exchange);
    }
  }

  Result Describe(const Exchange& exchange) const {
    const std::string where = " " + HostPort(url) + ": ";
    if (exchange.timed_out) {
      return Failure(Errc::kTimedOut,
                     "no answer from" + where + "timed out after " +
                         std::to_string(options.timeout.count()) + " ms");
    }
    if (exchange.error.category() ==
        http::make_error_code(http::error::end_of_stream).category()) {
      return Failure(Errc::kBadResponse,
                     "bad response from" + where + exchange.error.message());
    }
    return Failure(
        Errc::kConnectionLost,
        std::string(exchange.on_write ? "sending to" : "reading from") + where +
            exchange.error.message());
  }
};

Client::Client(Options options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

const Url& Client::url() const { return impl_->url; }

void Client::set_timeout(std::chrono::milliseconds timeout) {
  impl_->options.timeout = timeout;
}

std::chrono::milliseconds Client::timeout() const {
  return impl_->options.timeout;
}

void Client::Close() { impl_->Disconnect(); }

Result Client::Send(std::string_view method, std::string_view target,
                    const Headers& headers, std::string body) {
  if (!IsToken(method) || !IsOriginForm(target)) {
    return Failure(Errc::kBadRequest, "not a valid method and target");
  }
  for (const auto& [name, value] : headers) {
    if (!IsToken(name) || !IsSafeValue(value)) {
      return Failure(Errc::kBadRequest, "not a valid field: " + name);
    }
  }
  if (!IsSafeValue(impl_->options.bearer_token)) {
    return Failure(Errc::kBadRequest, "the bearer token has a line break");
  }
  http::request<http::string_body> request;
  const http::verb verb = http::string_to_verb(method);
  if (verb == http::verb::unknown) {
    request.method_string(method);
  } else {
    request.method(verb);
  }
  request.target(target);
  request.version(11);
  for (const auto& [name, value] : headers) request.insert(name, value);
  request.body() = std::move(body);
  try {
    return impl_->Send(request);
  } catch (const std::invalid_argument& e) {  // e.g. TRACE with a body
    return Failure(Errc::kBadRequest, e.what());
  }
}

namespace {

Headers TokenHeader(std::uint64_t token) {
  return {{"Fencing-Token", std::to_string(token)}};
}

Headers JsonTokenHeaders(std::uint64_t token) {
  return {{"Fencing-Token", std::to_string(token)},
          {"Content-Type", "application/json"}};
}

}  // namespace

Result Client::Put(std::string_view key, std::uint64_t token,
                   std::string body) {
  return Send("PUT", "/" + EncodeKey(key), TokenHeader(token), std::move(body));
}

Result Client::Delete(std::string_view key, std::uint64_t token) {
  return Send("DELETE", "/" + EncodeKey(key), TokenHeader(token));
}

namespace {

Headers WithCondition(Headers headers, const Condition& condition) {
  if (!condition.if_match.empty()) {
    headers.emplace_back("If-Match", condition.if_match);
  }
  if (condition.if_none_match) headers.emplace_back("If-None-Match", "*");
  return headers;
}

}  // namespace

Result Client::Put(std::string_view key, std::uint64_t token, std::string body,
                   const Condition& condition) {
  return Send("PUT", "/" + EncodeKey(key),
              WithCondition(TokenHeader(token), condition), std::move(body));
}

Result Client::Delete(std::string_view key, std::uint64_t token,
                      const Condition& condition) {
  return Send("DELETE", "/" + EncodeKey(key),
              WithCondition(TokenHeader(token), condition));
}

Result Client::Get(std::string_view key) {
  return Send("GET", "/" + EncodeKey(key));
}

Result Client::Get(std::string_view key, std::uint64_t token) {
  return Send("GET", "/" + EncodeKey(key), TokenHeader(token));
}

Result Client::Batch(std::uint64_t token, const std::vector<BatchOp>& ops) {
  std::size_t size = 16;
  for (const BatchOp& op : ops) {
    size += 48 + op.key.size() + (op.value.size() + 2) / 3 * 4;
  }
  std::string body;
  body.reserve(size);
  body += "{\"ops\":[";
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const BatchOp& op = ops[i];
    if (i > 0) body += ',';
    const bool put = op.kind == BatchOp::Kind::kPut;
    body += put ? "{\"op\":\"put\",\"key\":" : "{\"op\":\"delete\",\"key\":";
    body += JsonQuote(op.key);
    if (put) {
      body += ",\"value\":\"";
      body += Base64Encode(op.value);
      body += '"';
    }
    if (!op.condition.if_match.empty()) {
      body += ",\"if_match\":" + JsonQuote(op.condition.if_match);
    }
    if (op.condition.if_none_match) body += ",\"if_none_match\":\"*\"";
    body += '}';
  }
  body += "]}";
  return Send("POST", "/", JsonTokenHeaders(token), std::move(body));
}

namespace {

// URL text as it is where RFC 3986 allows it (pchar and '/', '?' too in a
// query, '%' so that escapes stay), every other byte as a %XX escape.
std::string EncodeUrlText(std::string_view text, bool query) {
  static constexpr std::string_view kSafe = "-._~!$&'()*+,;=:@/%";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || kSafe.find(c) != std::string_view::npos ||
        (query && c == '?')) {
      out += c;
    } else {
      out += '%';
      out += "0123456789ABCDEF"[u >> 4];
      out += "0123456789ABCDEF"[u & 0xF];
    }
  }
  return out;
}

bool IsEffectCall(const EffectCall& call) {
  const std::string_view name = call.target;
  const std::string_view m = call.method;
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(),
                     [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) ||
                              c == '.' || c == '_' || c == '-';
                     }) &&
         (m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE");
}

}  // namespace

EffectResult Client::Effect(const EffectCall& call) {
  std::string target = "/v1/effects/" + call.target;
  if (!call.path.empty()) {
    target += EncodeUrlText(
        call.path.front() == '/' ? call.path : "/" + call.path, false);
  }
  if (!call.query.empty()) target += "?" + EncodeUrlText(call.query, true);
  Headers headers = {{"Fencing-Token", std::to_string(call.token)},
                     {"Fence-Key", call.fence_key},
                     {"Idempotency-Key", call.idempotency_key}};
  if (!call.content_type.empty()) {
    headers.emplace_back("Content-Type", call.content_type);
  }
  Result r = IsEffectCall(call)
                 ? Send(call.method, target, headers, call.body)
                 : Failure(Errc::kBadRequest,
                           "not an effect target name and method: '" +
                               call.target + "', '" + call.method + "'");
  const auto replayed = r.response.headers.find("effect-replayed");
  const bool relayed = replayed != r.response.headers.end();
  return {r.error,
          std::move(r.detail),
          relayed,
          relayed && Lower(replayed->second) == "true",
          r.response.status,
          r.response.header("content-type"),
          std::move(r.response.body)};
}

Result Client::GetFence(std::string_view key) {
  return Send("GET", "/v1/fences/" + EncodeKey(key));
}

Result Client::Bump(std::string_view key, std::uint64_t token) {
  return Send("PUT", "/v1/fences/" + EncodeKey(key), TokenHeader(token));
}

Result Client::AcquireLease(std::string_view name, std::string_view holder,
                            std::chrono::milliseconds ttl) {
  std::string body = "{\"holder\":" + JsonQuote(holder) +
                     ",\"ttl_ms\":" + std::to_string(ttl.count()) + "}";
  return Send("PUT", "/v1/leases/" + EncodeKey(name),
              {{"Content-Type", "application/json"}}, std::move(body));
}

Result Client::ReleaseLease(std::string_view name, std::string_view holder,
                            std::uint64_t token) {
  std::string body = "{\"holder\":" + JsonQuote(holder) + "}";
  return Send("DELETE", "/v1/leases/" + EncodeKey(name),
              JsonTokenHeaders(token), std::move(body));
}

Result Client::GetLease(std::string_view name) {
  return Send("GET", "/v1/leases/" + EncodeKey(name));
}

}  // namespace fencepost::client
