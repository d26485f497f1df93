#include "storage/etcd_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "http/host_port.h"

namespace fencepost::storage {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kMaxIdle = 16;
// etcd's answers: a page of fences or a value (at most etcd's own request
// limit, 1.5 MiB by default, base64-encoded).
constexpr std::uint64_t kMaxAnswer = 16ull << 20;
constexpr std::size_t kMaxAnswerBuffer = 64 * 1024;

}  // namespace

std::string ParseEtcdSpec(std::string_view url, EtcdSpec* spec) {
  constexpr std::string_view kScheme = "etcd://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return "an etcd fence store is etcd://HOST:PORT[,HOST:PORT...][/PREFIX]";
  }
  std::string_view rest = url.substr(kScheme.size());
  const std::size_t slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  EtcdSpec out;
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

struct EtcdClient::Attempt {
  bool sent = false;  // some of the request may have reached etcd
  Reply reply;
};

EtcdClient::EtcdClient(asio::io_context& io, EtcdSpec spec,
                       std::chrono::milliseconds timeout, Observer observer)
    : io_(io),
      spec_(std::move(spec)),
      timeout_(timeout),
      observer_(std::move(observer)) {}

EtcdClient::~EtcdClient() = default;

asio::awaitable<EtcdClient::Reply> EtcdClient::Call(std::string_view path,
                                                    std::string body) {
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
    if (attempt.sent) break;  // etcd may apply it: not ours to repeat
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
    std::unique_ptr<beast::tcp_stream> conn;
    bool reused = false;
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
      reused = true;
    } else {
      conn = std::make_unique<beast::tcp_stream>(io_);
      tcp::resolver resolver(io_);
      const auto found =
          co_await resolver.async_resolve(where.host, where.port, token);
      if (ec) {
        out.reply.error = name + ": cannot resolve: " + ec.message();
        co_return out;
      }
      conn->expires_after(timeout_);
      co_await conn->async_connect(found, token);
      if (ec) {
        out.reply.error = name + ": connect: " + ec.message();
        co_return out;
      }
      conn->socket().set_option(tcp::no_delay(true), ec);
    }
    conn->expires_after(timeout_);
    const std::size_t written = co_await bhttp::async_write(*conn, request, token);
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
    co_await bhttp::async_read(*conn, buffer, parser, token);
    if (ec) {
      // A kept-alive connection etcd had closed before reading this
      // request: once more on a new one. etcd answers every request it
      // reads, so no answer byte means it did not read it... unless it
      // closed mid-request; that is as unknown as any timeout.
      if (reused && !parser.got_some() &&
          (ec == bhttp::error::end_of_stream ||
           ec == asio::error::connection_reset || ec == asio::error::eof)) {
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
      conn->expires_never();
      idle_endpoint_ = endpoint;
      idle_.push_back(std::move(conn));
    }
    co_return out;
  }
  co_return out;
}

}  // namespace fencepost::storage
