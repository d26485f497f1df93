#include "storage/http_backend.h"

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <cctype>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fence/key.h"
#include "fence/rules.h"
#include "http/fields.h"
#include "http/host_port.h"
#include "storage/errc.h"

namespace fencepost::storage {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kMaxIdle = 64;
constexpr std::uint64_t kMaxUpstreamBody = 64ull << 20;

// The upstream's answer made ready to relay.
HttpResponse Relay(HttpResponse response, bool head) {
  fencepost::http::StripHopByHop(response);
  const unsigned status = response.result_int();
  if (status == 204 || status == 304 || status < 200) {
    response.erase(http::field::content_length);
  } else if (!head) {
    response.content_length(response.body().size());
  }
  return response;
}

// Whether `value` starts with a URI scheme and its ':' (RFC 3986 3.1).
bool HasScheme(std::string_view value) {
  const std::size_t colon = value.find(':');
  if (colon == 0 || colon == std::string_view::npos ||
      !std::isalpha(static_cast<unsigned char>(value[0]))) {
    return false;
  }
  for (const char c : value.substr(0, colon)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' &&
        c != '.') {
      return false;
    }
  }
  return value.substr(0, colon).find('/') == std::string_view::npos;
}

// RFC 3986 5.2.4: `path` without its "." and ".." segments.
std::string RemoveDotSegments(std::string_view path) {
  std::vector<std::string_view> kept;
  const bool absolute = !path.empty() && path.front() == '/';
  std::size_t at = absolute ? 1 : 0;
  bool directory = false;  // the result ends with '/'
  while (at <= path.size()) {
    const std::size_t slash = std::min(path.find('/', at), path.size());
    const std::string_view segment = path.substr(at, slash - at);
    directory = segment == "." || segment == "..";
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();
    } else if (segment != ".") {
      kept.push_back(segment);
    }
    at = slash + 1;
  }
  std::string out = absolute ? "/" : "";
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (i > 0) out += '/';
    out += kept[i];
  }
  if (directory && !kept.empty()) out += '/';
  return out;
}

}  // namespace

std::optional<std::string> HttpBackend::OwnReference(
    std::string_view value, std::string_view upstream_target) const {
  std::string_view fragment;
  if (const std::size_t hash = value.find('#'); hash != value.npos) {
    fragment = value.substr(hash);
    value = value.substr(0, hash);
  }
  // A scheme, or "//": the authority that follows must be the upstream's.
  bool has_authority = value.substr(0, 2) == "//";
  if (HasScheme(value)) {
    const std::size_t colon = value.find(':');
    std::string scheme(value.substr(0, colon));
    for (char& c : scheme) c = static_cast<char>(std::tolower(c));
    if (scheme != (options_.upstream.tls ? "https" : "http")) {
      return std::nullopt;
    }
    value = value.substr(colon + 1);
    has_authority = value.substr(0, 2) == "//";
    if (!has_authority) return std::nullopt;
  }
  std::string path;
  if (has_authority) {
    value = value.substr(2);
    const std::size_t end = std::min(value.find_first_of("/?"), value.size());
    std::string authority(value.substr(0, end));
    for (char& c : authority) c = static_cast<char>(std::tolower(c));
    std::string own = host_header_;
    for (char& c : own) c = static_cast<char>(std::tolower(c));
    const std::string default_port_text = options_.upstream.tls ? "443" : "80";
    const bool default_port = options_.upstream.port == default_port_text &&
                              authority + ":" + default_port_text == own;
    if (authority != own && !default_port) return std::nullopt;
    value = value.substr(end);
    path = "/";  // an empty path after an authority
  }
  const std::size_t question = std::min(value.find('?'), value.size());
  const std::string_view query = value.substr(question);
  const std::string_view reference = value.substr(0, question);
  if (!reference.empty() && reference.front() == '/') {
    path = reference;
  } else if (!has_authority) {
    // Relative to the target it answers (RFC 3986 5.2.2 and 5.2.3).
    std::string_view target =
        upstream_target.substr(0, upstream_target.find('?'));
    if (!reference.empty()) target = target.substr(0, target.rfind('/') + 1);
    path = std::string(target) + std::string(reference);
  }
  path = RemoveDotSegments(path);
  // Under BASE, and a key there: fencepost's own path of that key.
  if (path.size() <= base_.size() + 1 ||
      path.compare(0, base_.size(), base_) != 0 || path[base_.size()] != '/') {
    return std::nullopt;
  }
  std::string key;
  if (fence::DecodeKey(path.substr(base_.size()) + std::string(query), &key) !=
      fence::KeyError::kOk) {
    return std::nullopt;
  }
  return "/" + fence::EncodeKey(key) + std::string(query) +
         std::string(fragment);
}

void HttpBackend::OwnLocations(HttpResponse& response,
                               std::string_view upstream_target) const {
  for (const http::field name :
       {http::field::location, http::field::content_location}) {
    const auto it = response.find(name);
    if (it == response.end()) continue;
    const std::optional<std::string> own =
        OwnReference(fencepost::http::TrimOws(it->value()), upstream_target);
    // One field of each at most: a second would be relayed unchecked.
    response.erase(name);
    if (own) response.set(name, *own);
  }
}

HttpPool::Options HttpBackend::PoolOptions(asio::io_context& io,
                                           const Options& options,
                                           asio::ssl::context* tls) {
  const BackendSpec& url = options.upstream;
  HttpPool::Options out;
  out.host = url.host;
  out.port = url.port;
  tcp::resolver resolver(io);
  beast::error_code ec;
  const auto results = resolver.resolve(url.host, url.port, ec);
  if (ec) {
    throw std::runtime_error("--backend: cannot resolve " + url.host + ": " +
                             ec.message());
  }
  for (const auto& entry : results) out.endpoints.push_back(entry.endpoint());
  out.tls = tls;
  out.timeout = options.timeout;
  out.max_idle = kMaxIdle;
  out.max_body = kMaxUpstreamBody;
  return out;
}

HttpBackend::HttpBackend(asio::io_context& io, const Options& options,
                         Fences& fences)
    : options_(options),
      fences_(fences),
      host_header_(fencepost::http::FormatHostPort(options.upstream.host,
                                                   options.upstream.port)),
      base_(options.upstream.base),
      tls_(options.upstream.tls ? MakeClientTls(options.tls_ca) : nullptr),
      pool_(io, PoolOptions(io, options, tls_.get())),
      gate_(fences, *this,
            {options.settle, options.hold_at_start, options.disable_gate}) {}

HttpBackend::~HttpBackend() = default;

HttpRequest HttpBackend::Upstream(const HttpRequest& original,
                                  std::string_view key) const {
  HttpRequest out;
  out.method(original.method());
  // The key's canonical spelling, not the client's: the upstream then
  // writes exactly the resource that was fenced (see fence::EncodeKey).
  out.target(fence::UpstreamTarget(base_, key, original.target()));
  out.version(11);
  for (const auto& field : original) {
    out.insert(field.name_string(), field.value());
  }
  fencepost::http::StripHopByHop(out);
  // Fields some stores honour to act on another method or resource than the
  // one fenced: never forwarded.
  for (const char* name :
       {"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override",
        "X-Original-URL", "X-Rewrite-URL"}) {
    out.erase(name);
  }
  out.erase(http::field::host);
  out.erase(http::field::expect);
  out.erase(http::field::content_length);
  if (!options_.forward_token) out.erase("Fencing-Token");
  // fencepost's own credential is not the upstream's.
  if (options_.strip_authorization) out.erase(http::field::authorization);
  out.set(http::field::host, host_header_);
  out.set(http::field::via, "1.1 fencepost");
  out.body() = original.body();
  const http::verb m = original.method();
  if (!out.body().empty() || m == http::verb::put || m == http::verb::post ||
      m == http::verb::patch) {
    out.content_length(out.body().size());
  }
  out.keep_alive(true);
  return out;
}

Awaitable<ReadResult> HttpBackend::Read(const ReadRequest& request) {
  ReadResult result;
  const HttpRequest upstream = Upstream(*request.original, request.key);
  HttpPool::Exchange exchange =
      co_await pool_.RoundTrip(upstream, HttpPool::Resend::kIfUnanswered);
  if (exchange.sent != Sent::kAnswered) {
    result.detail = "upstream " + std::string(upstream.method_string()) + " " +
                    std::string(upstream.target()) +
                    " failed: " + exchange.error;
    result.error = Errc::kUpstreamFailed;
    co_return result;
  }
  result.found = true;
  result.upstream = Relay(std::move(exchange.response), request.head);
  OwnLocations(*result.upstream, upstream.target());
  co_return result;
}

Awaitable<WriteResult> HttpBackend::Write(WriteRequest request) {
  co_return co_await gate_.Write(std::move(request));
}

Awaitable<ValueStore::Stored> HttpBackend::Store(
    const WriteRequest& request, const fence::ValueNow* /*seen*/) {
  Stored stored;
  const HttpRequest upstream = Upstream(*request.original, request.key);
  // A write is never sent twice once a byte of it left, whatever its
  // method: the upstream may have read it whole, applied it and closed
  // without an answer. Sent again, a PUT's second answer (a 503, or a 412
  // for a conditional one) would tell the client its applied write was not.
  HttpPool::Exchange exchange =
      co_await pool_.RoundTrip(upstream, HttpPool::Resend::kNever);
  if (exchange.sent != Sent::kAnswered) {
    stored.detail =
        "upstream " + std::string(upstream.method_string()) + " " +
        std::string(upstream.target()) +
        (exchange.sent == Sent::kNotSent ? " was not sent: "
                                         : " has an unknown outcome: ") +
        exchange.error;
  }
  switch (exchange.sent) {
    case Sent::kAnswered:
      // Whatever the upstream answered (a 412, a 5xx) is relayed as it is.
      stored.created = exchange.response.result() == http::status::created;
      stored.upstream = Relay(std::move(exchange.response), false);
      OwnLocations(*stored.upstream, upstream.target());
      break;
    case Sent::kNotSent:
      stored.landing = fence::Landing::kNotApplied;
      stored.error = Errc::kUpstreamFailed;
      break;
    case Sent::kUnknown:
      // The connection is closed (RoundTrip dropped it); the upstream may
      // still apply the write: the gate holds the fence closed.
      stored.landing = fence::Landing::kUnknown;
      stored.error = Errc::kOutcomeUnknown;
      break;
  }
  co_return stored;
}

Awaitable<bool> HttpBackend::Ready() {
  const bool fences_ready = co_await fences_.Ready();
  if (!fences_ready) {
    const std::string why = fences_.last_error();
    not_ready_ = "fence store: " + (why.empty() ? "not ready" : why);
    co_return false;
  }
  HttpRequest head(http::verb::head, base_.empty() ? "/" : base_, 11);
  head.set(http::field::host, host_header_);
  head.keep_alive(true);
  HttpPool::Exchange exchange =
      co_await pool_.RoundTrip(head, HttpPool::Resend::kIfUnanswered);
  if (exchange.sent == Sent::kAnswered) {
    not_ready_.clear();
    co_return true;
  }
  not_ready_ = "HEAD of the base: no answer: " + exchange.error;
  co_return false;
}

}  // namespace fencepost::storage
