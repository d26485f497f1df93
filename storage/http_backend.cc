#include "storage/http_backend.h"

#include <boost/asio/ip/tcp.hpp>
#include <optional>
#include <stdexcept>

#include "fence/key.h"
#include "fence/rules.h"
#include "http/fields.h"
#include "http/host_port.h"
#include "storage/async_commit.h"
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

}  // namespace

HttpPool::Options HttpBackend::PoolOptions(asio::io_context& io,
                                           const Options& options) {
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
      pool_(io, PoolOptions(io, options)) {
  if (options.hold_at_start) {
    all_held_until_ = std::chrono::steady_clock::now() + options.settle;
  }
}

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

bool HttpBackend::Held(const std::string& fence, int* seconds) {
  const auto now = std::chrono::steady_clock::now();
  auto until = all_held_until_;
  if (auto it = held_until_.find(fence); it != held_until_.end()) {
    if (now >= it->second) {
      held_until_.erase(it);
    } else {
      until = std::max(until, it->second);
    }
  }
  if (now >= until) return false;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
  *seconds = static_cast<int>((left.count() + 999) / 1000);
  return true;
}

Awaitable<ReadResult> HttpBackend::Read(const ReadRequest& request) {
  ReadResult result;
  const HttpRequest upstream = Upstream(*request.original, request.key);
  HttpPool::Exchange exchange = co_await pool_.RoundTrip(upstream, true);
  if (exchange.sent != Sent::kAnswered) {
    result.detail = "upstream " + std::string(upstream.method_string()) + " " +
                    std::string(upstream.target()) +
                    " failed: " + exchange.error;
    result.error = Errc::kUpstreamFailed;
    co_return result;
  }
  result.found = true;
  result.upstream = Relay(std::move(exchange.response), request.head);
  co_return result;
}

Awaitable<WriteResult> HttpBackend::Write(WriteRequest request) {
  WriteResult result;
  FenceLocks::Guard turn = co_await locks_.Acquire(request.fence);

  int wait = 0;
  if (!options_.disable_gate && Held(request.fence, &wait)) {
    // A stale token still gets 409 first.
    const Fences::Read read = co_await fences_.Get(request.fence);
    if (read.error) {
      result.outcome.error = read.error;
      co_return result;
    }
    const std::optional<fence::FenceRecord>& current = read.fence;
    fence::WriteOutcome stale = fence::DecideWrite(
        ToFencedWrite(request),
        current ? std::optional(current->token) : std::nullopt,
        current ? current->updated_at_ns : 0, 0);
    if (stale.verdict == fence::WriteOutcome::Verdict::kRejected) {
      result.outcome = std::move(stale);
      co_return result;
    }
    result.outcome.error = Errc::kFenceHeld;
    result.retry_after = wait;
    co_return result;
  }

  auto [outcome, shared_turn] = co_await CommitFenceInTurn(fences_, request);
  result.outcome = std::move(outcome);
  if (!fence::Applied(result.outcome)) co_return result;
  using Verdict = fence::WriteOutcome::Verdict;

  const HttpRequest upstream = Upstream(*request.original, request.key);
  // A conditional PUT or DELETE is not sent twice either: if the first
  // landed, the second would be refused (412) and the client, told its
  // write failed, would read its own write and apply its change again.
  const bool conditional = upstream.count(http::field::if_match) > 0 ||
                           upstream.count(http::field::if_none_match) > 0;
  const bool idempotent =
      (request.kind == WriteKind::kPut || request.kind == WriteKind::kDelete) &&
      !conditional;
  // POST and PATCH always take a new connection: on a kept-alive one the
  // upstream may have closed meanwhile, and they cannot be sent again.
  HttpPool::Exchange exchange = co_await pool_.RoundTrip(upstream, idempotent);
  if (exchange.sent != Sent::kAnswered) {
    result.detail =
        "upstream " + std::string(upstream.method_string()) + " " +
        std::string(upstream.target()) +
        (exchange.sent == Sent::kNotSent ? " was not sent: "
                                         : " has an unknown outcome: ") +
        exchange.error;
  }
  switch (exchange.sent) {
    case Sent::kAnswered:
      result.created = exchange.response.result() == http::status::created;
      result.upstream = Relay(std::move(exchange.response), false);
      break;
    case Sent::kNotSent:
      result.outcome.verdict = Verdict::kFailed;
      result.outcome.error = Errc::kUpstreamFailed;
      break;
    case Sent::kUnknown:
      result.outcome.verdict = Verdict::kFailed;
      result.outcome.error = Errc::kOutcomeUnknown;
      // The connection is closed (RoundTrip dropped it); the upstream may
      // still apply the write, so the fence stays closed for `settle`.
      if (!options_.disable_gate) {
        held_until_[request.fence] =
            std::chrono::steady_clock::now() + options_.settle;
      }
      break;
  }
  // Other replicas may forward under this fence once the upstream answered,
  // or once an unknown outcome has had `settle` to land.
  fences_.EndTurn(std::move(shared_turn),
                  exchange.sent == Sent::kUnknown && !options_.disable_gate
                      ? options_.settle
                      : std::chrono::milliseconds(0));
  co_return result;
}

Awaitable<bool> HttpBackend::Ready() {
  if (!co_await fences_.Ready()) co_return false;
  HttpRequest head(http::verb::head, base_.empty() ? "/" : base_, 11);
  head.set(http::field::host, host_header_);
  head.keep_alive(true);
  HttpPool::Exchange exchange = co_await pool_.RoundTrip(head, true);
  co_return exchange.sent == Sent::kAnswered;
}

}  // namespace fencepost::storage
