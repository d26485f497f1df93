#include "storage/etcd_client.h"

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/verb.hpp>
#include <stdexcept>

#include "http/host_port.h"
#include "storage/http_pool.h"

namespace fencepost::storage {

namespace asio = boost::asio;
namespace ssl = asio::ssl;

namespace {

// Idle connections kept: a group of lease renewals sends one keep-alive
// each at once (EtcdRenewals: two groups of 32 in flight), beside the
// writes' transactions.
constexpr std::size_t kMaxIdle = 80;
// etcd's answers: a page of fences or a value (at most etcd's own request
// limit, 1.5 MiB by default, base64-encoded).
constexpr std::uint64_t kMaxAnswer = 16ull << 20;

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
    const auto parsed = http::ParseServer(one);
    if (!parsed) {
      return "an etcd endpoint is HOST:PORT, not '" + std::string(one) + "'";
    }
    out.endpoints.push_back({parsed->host, *parsed->port});
    if (comma == std::string_view::npos) break;
    hosts.remove_prefix(comma + 1);
  }
  *spec = std::move(out);
  return "";
}

struct EtcdClient::Attempt {
  bool sent = false;  // some of the request may have reached etcd
  Reply reply;
};

EtcdClient::EtcdClient(asio::io_context& io, EtcdSpec spec,
                       std::chrono::milliseconds timeout, Observer observer)
    : spec_(std::move(spec)), observer_(std::move(observer)) {
  if (spec_.tls) tls_ = TlsContext(spec_);
  for (const EtcdSpec::Endpoint& where : spec_.endpoints) {
    HttpPool::Options options;
    options.host = where.host;
    options.port = where.port;
    options.tls = tls_.get();
    options.timeout = timeout;
    options.max_idle = kMaxIdle;
    options.max_body = kMaxAnswer;
    pools_.push_back(std::make_unique<HttpPool>(io, std::move(options)));
  }
}

std::unique_ptr<ssl::context> EtcdClient::TlsContext(const EtcdSpec& spec) {
  std::unique_ptr<ssl::context> tls;
  try {
    tls = MakeClientTls(spec.ca_file);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("etcd: ") + e.what());
  }
  boost::system::error_code ec;
  if (!spec.cert_file.empty()) {
    tls->use_certificate_chain_file(spec.cert_file, ec);
    if (ec) {
      throw std::runtime_error("cannot load the etcd client certificate '" +
                               spec.cert_file + "': " + ec.message());
    }
    tls->use_private_key_file(spec.key_file, ssl::context::pem, ec);
    if (ec) {
      throw std::runtime_error("cannot load the etcd client key '" +
                               spec.key_file + "': " + ec.message());
    }
  }
  return tls;
}

EtcdClient::~EtcdClient() = default;

Awaitable<EtcdClient::Reply> EtcdClient::Call(std::string_view path,
                                              std::string body,
                                              bool idempotent) {
  const auto start = std::chrono::steady_clock::now();
  Reply reply;
  const std::size_t count = spec_.endpoints.size();
  for (std::size_t tried = 0; tried < count; ++tried) {
    const std::size_t endpoint = current_;
    Attempt attempt = co_await Once(endpoint, path, body, idempotent);
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

Awaitable<EtcdClient::Attempt> EtcdClient::Once(std::size_t endpoint,
                                                std::string_view path,
                                                const std::string& body,
                                                bool idempotent) {
  if (idle_endpoint_ != endpoint) {
    pools_[idle_endpoint_]->Clear();
    idle_endpoint_ = endpoint;
  }
  const EtcdSpec::Endpoint& where = spec_.endpoints[endpoint];
  const std::string name = http::FormatHostPort(where.host, where.port);
  http::Request request(boost::beast::http::verb::post, std::string(path), 11);
  request.set(boost::beast::http::field::host, name);
  request.set(boost::beast::http::field::content_type, "application/json");
  request.body() = body;
  request.prepare_payload();

  // A connection that ends unanswered may have carried the request whole:
  // only a read is sent again.
  HttpPool::Exchange exchange = co_await pools_[endpoint]->RoundTrip(
      request,
      idempotent ? HttpPool::Resend::kIfUnanswered : HttpPool::Resend::kNever);
  Attempt out;
  out.sent = exchange.sent != HttpPool::Sent::kNotSent;
  if (exchange.sent != HttpPool::Sent::kAnswered) {
    out.reply.maybe_applied = out.sent;
    out.reply.error = name + ": " + exchange.error;
    co_return out;
  }
  out.reply = Read(name, exchange.response);
  co_return out;
}

EtcdClient::Reply EtcdClient::Read(const std::string& name,
                                   const http::Response& response) {
  Reply reply;
  const std::string parse_error = http::ParseJson(
      response.body(), &reply.json, http::JsonLimits{16, 100000, 64});
  // etcd read the request: whatever it answers, it may have applied it.
  reply.maybe_applied = true;
  if (response.result_int() != 200) {
    const http::JsonValue* message = reply.json.Find("error");
    if (message == nullptr) message = reply.json.Find("message");
    reply.error = name + ": etcd answered " +
                  std::to_string(response.result_int()) +
                  (message != nullptr ? ": " + message->text : "");
    return reply;
  }
  if (!parse_error.empty() ||
      reply.json.kind != http::JsonValue::Kind::kObject) {
    reply.error = name + ": etcd's answer is not a JSON object: " +
                  (parse_error.empty() ? "another value" : parse_error);
    return reply;
  }
  reply.ok = true;
  reply.maybe_applied = false;  // its outcome is known: the answer says it
  return reply;
}

}  // namespace fencepost::storage
