// The watch routes of the admin port: the long poll of GET /v1/fences/KEY
// with wait_above, and the opening of GET /v1/watch (the server streams the
// events; see Server::StreamEvents).

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <charconv>
#include <chrono>
#include <memory>

#include "fence/key.h"
#include "proxy/admin_routes.h"
#include "proxy/routes.h"
#include "proxy/watch.h"
#include "storage/watch_hub.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using routes::Problemed;
using routes::QueryParam;

namespace watch {

std::optional<std::uint64_t> ParseUnsigned(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::optional<Query> ParseQuery(const Request& req, std::string* refusal) {
  if (req.version() < 11) {
    *refusal = "a watch is a stream sent chunked: it needs HTTP/1.1";
    return std::nullopt;
  }
  Query query;
  query.prefix = QueryParam(req.target(), "prefix").value_or("");
  if (query.prefix.size() > fence::kMaxNameBytes) {
    *refusal = "prefix is longer than a key may be (" +
               std::to_string(fence::kMaxNameBytes) + " bytes)";
    return std::nullopt;
  }
  const auto last = req.find("Last-Event-ID");
  if (last != req.end()) {
    query.last_id = ParseUnsigned(last->value());
    if (!query.last_id) {
      *refusal = "Last-Event-ID must be the id of an event this server sent";
      return std::nullopt;
    }
  }
  return query;
}

bool IsStreamRequest(const Request& req) {
  return req.method() == http::verb::get &&
         routes::PathOf(req.target()) == kPath;
}

bool HoldsConnection(const Request& req) {
  if (IsStreamRequest(req)) return true;
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    return false;
  }
  const std::string_view path = routes::PathOf(req.target());
  const std::size_t at = routes::kFencesPath.size();
  return path.starts_with(routes::kFencesPath) && path.size() > at + 1 &&
         path[at] == '/' && QueryParam(req.target(), "wait_above").has_value();
}

bool IsEventStream(const Response& res) {
  return res.result() == http::status::ok &&
         res[http::field::content_type] == kEventStream;
}

}  // namespace watch

namespace {

// Keeps a long poll registered with the hub for as long as it waits.
class WaitRegistration {
 public:
  WaitRegistration(storage::WatchHub& hub, std::string name,
                   const Request& request)
      : hub_(hub), name_(std::move(name)), waiter_(hub.Wait(name_, &request)) {}
  ~WaitRegistration() { hub_.Unwait(name_, waiter_); }
  WaitRegistration(const WaitRegistration&) = delete;
  WaitRegistration& operator=(const WaitRegistration&) = delete;
  storage::WatchHub::Waiter& waiter() { return *waiter_; }

 private:
  storage::WatchHub& hub_;
  const std::string name_;
  const std::shared_ptr<storage::WatchHub::Waiter> waiter_;
};

}  // namespace

Awaitable<Response> AdminRoutes::WaitFence(const Request& req,
                                           const std::string& key) {
  const std::optional<std::uint64_t> above =
      watch::ParseUnsigned(QueryParam(req.target(), "wait_above").value_or(""));
  if (!above) {
    co_return Problemed(req, {ProblemType::kBadRequest,
                              "wait_above must be a token: 1 to 20 digits, "
                              "at most 18446744073709551615",
                              key, std::nullopt, std::nullopt});
  }
  std::uint64_t wait_ms = watch::kDefaultWaitMs;
  if (const auto timeout = QueryParam(req.target(), "timeout_ms")) {
    const auto parsed = watch::ParseUnsigned(*timeout);
    if (!parsed || *parsed > watch::kMaxWaitMs) {
      co_return Problemed(
          req, {ProblemType::kBadRequest,
                "timeout_ms must be 0 to " + std::to_string(watch::kMaxWaitMs),
                key, std::nullopt, std::nullopt});
    }
    wait_ms = *parsed;
  }
  const std::string name(scopes_.FenceFor(key));
  storage::WatchHub& hub = context_.watches();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(std::chrono::milliseconds(wait_ms));
  // Registered before the first read: a change during it is not missed;
  // and before the first suspension, so the server's ClientLeft (its client
  // closed the connection) finds it.
  WaitRegistration registration(hub, name, req);
  storage::WatchHub::Waiter& waiter = registration.waiter();
  waiter.wake = [&timer] { timer.cancel(); };
  while (true) {
    waiter.signalled = false;
    storage::Fences::Read read = co_await fences_.Get(name);
    const bool above_now =
        !read.error && read.fence && read.fence->token > *above;
    // Abandoned: the answer is not sent; the connection's slot is freed.
    if (read.error || above_now || hub.closed() || waiter.abandoned ||
        timer.expiry() <= asio::steady_timer::clock_type::now()) {
      Response res = FenceAnswer(req, key, read);
      if (!read.error && !above_now) res.set(watch::kWatchHeader, "timeout");
      co_return res;
    }
    if (!waiter.signalled) {
      boost::system::error_code ignored;
      co_await timer.async_wait(asio::redirect_error(kUseAwaitable, ignored));
    }
  }
}

Response AdminRoutes::OpenWatch(const Request& req) {
  // A stream has no head of its own: HEAD would open one and stream a body.
  if (req.method() == http::verb::head) {
    return routes::MethodNotAllowed(req, "GET");
  }
  std::string refusal;
  if (!watch::ParseQuery(req, &refusal)) {
    return Problemed(req, {ProblemType::kBadRequest, std::move(refusal),
                           std::nullopt, std::nullopt, std::nullopt});
  }
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, watch::kEventStream);
  res.set(http::field::cache_control, "no-cache");
  return res;
}

}  // namespace fencepost::proxy
