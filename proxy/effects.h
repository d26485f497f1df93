#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fence/effect.h"
#include "http/coro.h"
#include "proxy/config.h"
#include "proxy/http_types.h"
#include "proxy/problem.h"
#include "storage/backend.h"
#include "storage/http_pool.h"

namespace boost::asio::ssl {
class context;
}

namespace fencepost::proxy {

class RouteContext;

inline constexpr std::string_view kEffectsPath = "/v1/effects";

// Fenced side effects (SPEC "Fenced side effects"): a leader's call out
// (a payment, a webhook) made through fencepost, sent at most once, never
// by a stale leader, its answer kept for the retries.
//
// A call's record (fence::EffectRecord) lives in the fence store as a value
// under a key no data port request can name (fence::EffectRecordKey), so it
// goes through the same commits, log and replicas as every fence: the
// record in flight is written with the fence's check and raise in one
// durable commit (If-None-Match, or If-Match the record read, so that two
// replicas cannot both begin it), the call goes out once (no redirects
// followed, only Content-Type, Idempotency-Key and Fencing-Token sent with
// the body), then its outcome is recorded durably (If-Match the record in
// flight), then relayed. The verdicts are fence/effect.h's.
//
// Within this process a record is decided, sent and recorded by one
// request at a time (`busy_`): another request for it meanwhile is 409
// effect-in-progress (or 422 when it is another request).
//
// Thread safety: the server's one io thread, as RouteContext.
class Effects {
 public:
  // Throws std::runtime_error when a https:// target's CA cannot be loaded.
  // `records`: the backend that keeps values with the fences (the fence
  // store's own, whatever --backend is).
  Effects(boost::asio::io_context& io, RouteContext& context,
          storage::Backend& records);
  ~Effects();
  Effects(const Effects&) = delete;
  Effects& operator=(const Effects&) = delete;

  // The data port: POST|PUT|PATCH|DELETE /v1/effects/NAME[/REST][?QUERY].
  Awaitable<Response> Call(const Request& req, const std::string& client);
  // The admin port: GET /v1/effects (the records, paged) and DELETE
  // /v1/effects/NAME/ID (forgets one, with a token at least its fence's).
  Awaitable<Response> List(const Request& req);
  Awaitable<Response> Forget(const Request& req, const std::string& client);

  // Removes answered and unsent records older than --effect-retention,
  // every so often, until Stop.
  void Start();
  void Stop();

 private:
  struct Target {
    EffectTargetConfig config;
    std::unique_ptr<storage::HttpPool> pool;
  };
  // A request for an effect, as parsed.
  struct Ask {
    const Target* target = nullptr;
    std::string rest_and_query;  // what follows NAME, as sent
    std::string id;              // Idempotency-Key
    std::string fence_key;       // Fence-Key
    std::string fence;           // the fence that guards it
    fence::Token token = 0;
    std::string record_key;
    std::string hash;
  };
  // A record as read, with its entity tag in the store.
  struct Stored {
    std::error_code error;
    std::optional<fence::EffectRecord> record;
    std::string etag;
  };

  std::optional<Response> Parse(const Request& req, Ask* ask);
  Awaitable<Stored> Read(const std::string& record_key,
                         const std::string& fence);
  // The record `next` put in place of what `etag` names (empty: none), with
  // `token` (nullopt: a write of the record alone, the fence untouched).
  Awaitable<fence::WriteOutcome> Put(const std::string& record_key,
                                     const fence::EffectRecord& next,
                                     std::optional<fence::Token> token,
                                     const std::string& etag);
  // A request whose record says it must not be sent (a replay, 409, 422).
  Awaitable<Response> Answer(const Request& req, const Ask& ask,
                             const std::string& client, const Stored& stored,
                             fence::EffectVerdict verdict);
  // Records the call in flight, sends it, records and relays its outcome;
  // nullopt when another replica changed the record since `stored`.
  Awaitable<std::optional<Response>> Send(const Request& req, const Ask& ask,
                                          const std::string& client,
                                          const Stored& stored);
  Awaitable<Response> Deliver(const Request& req, const Ask& ask,
                              fence::EffectRecord record,
                              const std::string& etag);
  // The answer once the call's outcome was recorded (`ended`).
  Response Outcome(const Request& req, const Ask& ask,
                   const fence::EffectRecord& record,
                   const storage::HttpPool::Exchange& exchange,
                   const fence::WriteOutcome& ended);
  // The 409 of a token below the fence, counted.
  Response Stale(const Request& req, const Ask& ask, const std::string& client,
                 std::optional<fence::Token> current);
  void Tell(const Ask& ask, std::string_view outcome);
  Awaitable<void> Sweep();

  boost::asio::io_context& io_;
  RouteContext& context_;
  storage::Backend& records_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::vector<Target> targets_;
  // Record keys a request of this process is deciding or sending, with
  // that request's hash.
  std::map<std::string, std::string, std::less<>> busy_;
  boost::asio::steady_timer sweep_timer_;
  bool stopped_ = false;
};

}  // namespace fencepost::proxy
