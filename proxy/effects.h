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
#include <unordered_map>
#include <vector>

#include "fence/effect.h"
#include "http/coro.h"
#include "proxy/config.h"
#include "proxy/http_types.h"
#include "proxy/problem.h"
#include "storage/backend.h"
#include "storage/fence_locks.h"
#include "storage/fences.h"
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
// The calls of one fence go out in its turn, as the writes of a store kept
// elsewhere do (storage/value_gate.h): one at a time, in arrival order,
// from the commit that records the call until its outcome is recorded
// (storage::FenceLocks here, and the fence's turn among replicas,
// Fences::CommitInTurn); a call whose outcome is unknown holds the fence
// closed for --upstream-settle (here and among replicas), and every fence
// is held from the start for what the last process may have left on the
// wire. So a call a target runs always carries the highest token its fence
// had accepted when the target got it: a replaced leader's slow call is
// not overtaken by its successor's.
//
// Within this process a record is decided, sent and recorded by one
// request at a time (`busy_`): another request for it meanwhile is 409
// effect-in-progress (or 422 when it is another request). Another
// replica's record in flight is in progress until its deadline.
//
// Thread safety: the server's one io thread, as RouteContext.
class Effects {
 public:
  // Throws std::runtime_error when a https:// target's CA cannot be loaded.
  // `records`: the backend that keeps values with the fences (the fence
  // store's own, whatever --backend is). `hold_at_start`: how long every
  // fence is held closed from now (what the last process may have sent).
  Effects(boost::asio::io_context& io, RouteContext& context,
          storage::Backend& records, std::chrono::milliseconds hold_at_start);
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
  // How long the longest hold still has to run (0: none): a clean stop
  // hands it on to the next process.
  std::chrono::milliseconds HoldLeft() const;

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
  // The write that puts the record `next` in place of what `etag` names
  // (empty: none), with `token` (nullopt: a write of the record alone, the
  // fence untouched).
  static fence::FencedWrite RecordWrite(const std::string& record_key,
                                        const fence::EffectRecord& next,
                                        std::optional<fence::Token> token,
                                        const std::string& etag);
  // A request whose record says it must not be sent (a replay, 409, 422),
  // its token decided already.
  Response Answer(const Request& req, const Ask& ask, const Stored& stored,
                  fence::EffectVerdict verdict);
  // The fence's token before anything else: its 409 when `ask` is stale.
  Awaitable<std::optional<Response>> RefuseStale(const Request& req,
                                                 const Ask& ask,
                                                 const std::string& client);
  // The record read, then a replay, a refusal or, in the fence's turn, the
  // call (Send).
  Awaitable<Response> Decide(const Request& req, const Ask& ask,
                             const std::string& client);
  // Records the call in flight, sends it, records and relays its outcome;
  // nullopt when another replica changed the record since `stored`.
  Awaitable<std::optional<Response>> Send(const Request& req, const Ask& ask,
                                          const std::string& client,
                                          const Stored& stored);
  Awaitable<Response> Deliver(const Request& req, const Ask& ask,
                              fence::EffectRecord record,
                              const std::string& etag,
                              storage::Fences::Turn turn);
  // The clock a record in flight is judged on (fence::InProgress): the
  // wall clock with replicas, whose records in flight are another live
  // process's until their deadline; without, the end of time: the data
  // directory is this process's alone, so a record in flight that it is
  // not sending was left by a process that stopped.
  std::int64_t RecordClock() const;
  // Seconds `fence` stays held closed from now (Retry-After), 0 when not.
  int HeldSeconds(const std::string& fence) const;
  // The answer once the call's outcome was recorded (`ended`).
  Response Outcome(const Request& req, const Ask& ask,
                   const fence::EffectRecord& record,
                   const storage::HttpPool::Exchange& exchange,
                   const fence::WriteOutcome& ended);
  // A problem about one call, with its `target`, `idempotency_key` and
  // `state`.
  static Problem EffectProblem(ProblemType type, std::string detail,
                               const std::string& target, const std::string& id,
                               std::string_view state);
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
  storage::FenceLocks locks_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point>
      held_until_;
  std::chrono::steady_clock::time_point all_held_until_;
  std::chrono::milliseconds settle_;
  // How long after it is recorded in flight a call can still be on its way.
  std::chrono::milliseconds on_its_way_;
};

}  // namespace fencepost::proxy
