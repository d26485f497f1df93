#include "storage/etcd_client.h"

#include <openssl/ssl.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <stdexcept>

#include "http/host_port.h"

namespace fencepost::storage {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kMaxIdle = 16;
// etcd's answers: a page of fences or a value (at most etcd's own request
// limit, 1.5 MiB by default, base64-encoded).
constexpr std::uint64_t kMaxAnswer = 16ull << 20;
constexpr std::size_t kMaxAnswerBuffer = 64 * 1024;

}  // namespace

std::string ParseEtcdSpec(std::string_view url, EtcdSpec* spec) {
  constexpr std::string_view kScheme = "etcd://", kTlsScheme = "etcds://";
  EtcdSpec out;
  std::string_view rest;
  if (url.substr(0, kScheme.size()) == kScheme) {
    rest = url.substr(kScheme.size());
  } else if (url.substr(0, kTlsScheme.size()) == kTlsScheme) {
    rest = url.substr(kTlsScheme.size());
    out.tls = true;
  } else {
    return "an etcd fence store is etcd[s]://HOST:PORT[,HOST:PORT...][/PREFIX]";
  }
  const std::size_t slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash + 1);
    while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
    if (!prefix.empty()) out.prefix = prefix;
  }
  if (hosts.empty()) return "no etcd endpoint";
  while (true) {
    const std::size_t comma = hosts.find(',');
    const std::string_view one = hosts.substr(0, comma);
    const auto parsed = http::SplitHostPort(one);
    if (!parsed || parsed->host.empty() || !parsed->port ||
        parsed->port->empty() ||
        parsed->port->find_first_not_of("0123456789") != std::string::npos ||
        parsed->port->size() > 5 || std::stoi(*parsed->port) > 65535) {
      return "an etcd endpoint is HOST:PORT, not '" + std::string(one) + "'";
    }
    out.endpoints.push_back({parsed->host, *parsed->port});
    if (comma == std::string_view::npos) break;
    hosts.remove_prefix(comma + 1);
  }
  *spec = std::move(out);
  return "";
}

std::string EncodeBase64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t n = (std::uint8_t(bytes[i]) << 16) |
                            (std::uint8_t(bytes[i + 1]) << 8) |
                            std::uint8_t(bytes[i + 2]);
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (const std::size_t left = bytes.size() - i; left > 0) {
    std::uint32_t n = std::uint8_t(bytes[i]) << 16;
    if (left == 2) n |= std::uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[n >> 18];
    out += kAlphabet[(n >> 12) & 63];
    out += left == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// One connection, plain or TLS.
struct EtcdClient::Conn {
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

struct EtcdClient::Attempt {
  bool sent = false;  // some of the request may have reached etcd
  Reply reply;
};

EtcdClient::EtcdClient(asio::io_context& io, EtcdSpec spec,
                       std::chrono::milliseconds timeout, Observer observer)
    : io_(io),
      spec_(std::move(spec)),
      timeout_(timeout),
      observer_(std::move(observer)) {
  if (!spec_.tls) return;
  tls_ = std::make_unique<ssl::context>(ssl::context::tls_client);
  tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                    ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                    ssl::context::no_tlsv1_1);
  tls_->set_verify_mode(ssl::verify_peer);
  beast::error_code ec;
  if (spec_.ca_file.empty()) {
    tls_->set_default_verify_paths(ec);
  } else {
    tls_->load_verify_file(spec_.ca_file, ec);
  }
  if (ec) {
    throw std::runtime_error("cannot load the etcd CA file '" + spec_.ca_file +
                             "': " + ec.message());
  }
  if (!spec_.cert_file.empty()) {
    tls_->use_certificate_chain_file(spec_.cert_file, ec);
    if (ec) {
      throw std::runtime_error("cannot load the etcd client certificate '" +
                               spec_.cert_file + "': " + ec.message());
    }
    tls_->use_private_key_file(spec_.key_file, ssl::context::pem, ec);
    if (ec) {
      throw std::runtime_error("cannot load the etcd client key '" +
                               spec_.key_file + "': " + ec.message());
    }
  }
}

EtcdClient::~EtcdClient() = default;

asio::awaitable<EtcdClient::Reply> EtcdClient::Call(std::string_view path,
                                                    std::string body,
                                                    bool idempotent) {
  const auto start = std::chrono::steady_clock::now();
  Reply reply;
  const std::size_t count = spec_.endpoints.size();
  for (std::size_t tried = 0; tried < count; ++tried) {
    const std::size_t endpoint = current_;
    Attempt attempt = co_await Once(endpoint, path, body);
    reply = std::move(attempt.reply);
    if (reply.ok) break;
    // Leave this endpoint behind: later calls start at the next one.
    if (current_ == endpoint) current_ = (endpoint + 1) % count;
    // etcd may apply it: not ours to repeat, unless it is a read.
    if (attempt.sent && !idempotent) break;
  }
  if (observer_) {
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    observer_(path, took.count(), reply.ok);
  }
  co_return reply;
}

asio::awaitable<EtcdClient::Attempt> EtcdClient::Once(std::size_t endpoint,
                                                      std::string_view path,
                                                      const std::string& body) {
  Attempt out;
  const EtcdSpec::Endpoint& where = spec_.endpoints[endpoint];
  const std::string name = http::FormatHostPort(where.host, where.port);
  beast::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);

  bhttp::request<bhttp::string_body> request(bhttp::verb::post,
                                             std::string(path), 11);
  request.set(bhttp::field::host, name);
  request.set(bhttp::field::content_type, "application/json");
  request.body() = body;
  request.prepare_payload();

  if (idle_endpoint_ != endpoint) idle_.clear();
  for (int round = 0; round < 2; ++round) {
    std::unique_ptr<Conn> conn;
    bool reused = false;
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
      reused = true;
    } else {
      conn = std::make_unique<Conn>(io_, tls_.get());
      tcp::resolver resolver(io_);
      const auto found =
          co_await resolver.async_resolve(where.host, where.port, token);
      if (ec) {
        out.reply.error = name + ": cannot resolve: " + ec.message();
        co_return out;
      }
      conn->tcp().expires_after(timeout_);
      co_await conn->tcp().async_connect(found, token);
      if (ec) {
        out.reply.error = name + ": connect: " + ec.message();
        co_return out;
      }
      conn->tcp().socket().set_option(tcp::no_delay(true), ec);
      if (conn->secure) {
        beast::error_code not_ip;
        asio::ip::make_address(where.host, not_ip);
        // SNI names a host; RFC 6066 leaves IP literals out.
        if (not_ip && SSL_set_tlsext_host_name(conn->secure->native_handle(),
                                               where.host.c_str()) != 1) {
          out.reply.error = name + ": cannot set SNI";
          co_return out;
        }
        conn->secure->set_verify_callback(
            ssl::host_name_verification(where.host));
        co_await conn->secure->async_handshake(ssl::stream_base::client, token);
        if (ec) {
          out.reply.error = name + ": TLS handshake: " + ec.message();
          co_return out;
        }
      }
    }
    conn->tcp().expires_after(timeout_);
    const std::size_t written =
        conn->secure ? co_await bhttp::async_write(*conn->secure, request, token)
                     : co_await bhttp::async_write(*conn->plain, request, token);
    if (ec) {
      if (written == 0 && reused) continue;  // it had closed; nothing sent
      out.sent = written > 0;
      out.reply.maybe_applied = out.sent;
      out.reply.error = name + ": send: " + ec.message();
      co_return out;
    }
    out.sent = true;
    beast::flat_buffer buffer(kMaxAnswerBuffer);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(kMaxAnswer);
    if (conn->secure) {
      co_await bhttp::async_read(*conn->secure, buffer, parser, token);
    } else {
      co_await bhttp::async_read(*conn->plain, buffer, parser, token);
    }
    if (ec) {
      // A kept-alive connection etcd had closed before reading this
      // request: once more on a new one. etcd answers every request it
      // reads, so no answer byte means it did not read it... unless it
      // closed mid-request; that is as unknown as any timeout.
      if (reused && !parser.got_some() &&
          (ec == bhttp::error::end_of_stream ||
           ec == asio::error::connection_reset || ec == asio::error::eof ||
           ec == ssl::error::stream_truncated)) {
        continue;
      }
      out.reply.maybe_applied = true;
      out.reply.error = name + ": answer: " + ec.message();
      co_return out;
    }
    auto response = parser.release();
    std::string parse_error = http::ParseJson(
        response.body(), &out.reply.json,
        http::JsonLimits{16, 100000, 64});
    if (response.result_int() != 200) {
      out.reply.maybe_applied = true;
      const http::JsonValue* message = out.reply.json.Find("error");
      if (message == nullptr) message = out.reply.json.Find("message");
      out.reply.error = name + ": etcd answered " +
                        std::to_string(response.result_int()) +
                        (message != nullptr ? ": " + message->text : "");
      co_return out;
    }
    if (!parse_error.empty() ||
        out.reply.json.kind != http::JsonValue::Kind::kObject) {
      out.reply.maybe_applied = true;
      out.reply.error = name + ": etcd's answer is not a JSON object: " +
                        (parse_error.empty() ? "another value" : parse_error);
      co_return out;
    }
    out.reply.ok = true;
    if (response.keep_alive() && buffer.size() == 0 && idle_.size() < kMaxIdle) {
      conn->tcp().expires_never();
      idle_endpoint_ = endpoint;
      idle_.push_back(std::move(conn));
    }
    co_return out;
  }
  co_return out;
}

}  // namespace fencepost::storage
