#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fence/lease_table.h"
#include "fence/scope.h"
#include "fence/token.h"
#include "fence/write.h"
#include "metrics/metrics.h"
#include "proxy/auth.h"
#include "proxy/config.h"
#include "proxy/http_types.h"
#include "proxy/journal.h"
#include "proxy/logging.h"
#include "proxy/problem.h"
#include "storage/backend.h"
#include "storage/fences.h"
#include "storage/watch_hub.h"

namespace fencepost::proxy {

class Effects;
class Elections;

// Who made a write that was refused or stored, for the journal, the log
// line and the rejection event: each door fills it from its own request.
struct Asker {
  std::string_view method;  // "PUT", "DELETE", "POST" (a batch), ...
  std::string_view body;
  std::string_view client;  // address:port
};

// What the data, admin and lease routes share: the stores, the counters,
// the rejection journal and its log limit, and the refusals every route
// answers alike. One per Service; the route units hold a reference.
//
// Thread safety: the server's one io thread (see Service).
class RouteContext {
 public:
  // `fences` holds the fences and leases (and `backend` the values).
  RouteContext(const Config& config, storage::Fences& fences,
               storage::Backend& backend, metrics::Metrics& metrics,
               BearerAuth auth);
  // The store outlives the context: it tells no one after this.
  ~RouteContext();

  const Config& config() const { return config_; }
  storage::Fences& fences() { return fences_; }
  storage::Backend& backend() { return backend_; }
  metrics::Metrics& metrics() { return metrics_; }
  const fence::Scopes& scopes() const { return scopes_; }
  const Journal& journal() const { return journal_; }
  // The changes watchers are told of (GET /v1/watch, long polls).
  storage::WatchHub& watches() { return watches_; }

  // The elections watched at their source (--election); set once, before
  // serving. Null: none.
  void SetElections(Elections* elections) { elections_ = elections; }
  Elections* elections() const { return elections_; }
  // Whether the fence named `fence` follows an election.
  bool Elected(const std::string& fence) const;
  // What a write or bump with `token` on `fence` (of `key`) needs first
  // when the fence follows an election (Elections::Admit): nullopt to go
  // on, else its refusal (409 unverified-token, 503 election-unavailable).
  Awaitable<std::optional<Problem>> AdmitElected(const std::string& fence,
                                                 fence::Token token,
                                                 const std::string& key);

  // The fenced side effects (--effect-target); set once, before serving.
  // Null: none.
  void SetEffects(Effects* effects) { effects_ = effects; }
  Effects* effects() const { return effects_; }

  bool draining() const { return draining_; }
  void StartDraining() { draining_ = true; }
  // Reports rejections the log rate limit held back.
  void FlushLogSummaries() { log_limiter_.Flush(); }
  // Whether a line about `fence_name` may be logged now (rate limited per
  // fence).
  bool AdmitLog(const std::string& fence_name) {
    return log_limiter_.Admit(fence_name);
  }

  // The 400 for a target that is not a name; sets *key when it is one. On
  // the data port a name is a key; on the admin port (a fence's, a lease's)
  // it may also be a configured scope's prefix (fence::DecodeName).
  std::optional<Response> RefuseKey(const Request& request, metrics::Port port,
                                    std::string_view target, std::string* key);
  // The 401, 400 or 428 a fenced write or bump earns before its fence is
  // looked at: a missing or wrong credential, an invalid token, or a
  // missing one unless `allow_missing_token` (observe mode).
  std::optional<Response> RefuseWrite(const Request& request,
                                      const std::string& key,
                                      bool allow_missing_token);
  // The invalid-token or missing-token problem of a token in `state`,
  // counted; nullopt for a token that may go on. `sent` is every value of
  // the token's field (shown in an invalid-token problem).
  std::optional<Problem> RefuseToken(const std::string& key,
                                     fence::TokenState state,
                                     const std::vector<std::string_view>& sent,
                                     bool allow_missing_token);
  // 401 with WWW-Authenticate when auth is on and `request` lacks a token.
  std::optional<Response> RefuseUnauthorized(const Request& request,
                                             const std::string& key);
  // The 409 for a stale write (or batch, named by `event` in the log):
  // counts it, records it in the rejection journal and logs it (rate
  // limited per fence).
  Problem RefuseStale(const Asker& asker, const std::string& key,
                      const std::string& fence_name, fence::Token token,
                      std::optional<fence::Token> current,
                      std::string_view event);
  // The 409 for a fenced read below its fence (fence::ReadAdmitted): logged
  // as RefuseStale logs (rate limited per fence); neither counted among
  // rejected writes nor journalled, for nothing was written.
  Problem RefuseStaleRead(const std::string& key, const std::string& fence_name,
                          fence::Token token, fence::Token current,
                          const std::string& client);
  // A write (or batch op) whose If-Match / If-None-Match did not hold,
  // after its token was accepted: counts it, records it in the journal and
  // logs it as RefuseStale does (RecordPreconditionFailed alone, for an
  // upstream's 412 that is relayed as it is). `current_tag` is the value's
  // entity tag, unquoted (nullopt: no value or not known). Returns the 412
  // with `detail` and `current_etag`.
  void RecordPreconditionFailed(const Asker& asker, const std::string& key,
                                const std::string& fence_name,
                                fence::Token token,
                                const std::optional<std::string>& current_tag);
  Problem RefusePrecondition(const Asker& asker, const std::string& key,
                             const std::string& fence_name, fence::Token token,
                             const std::optional<std::string>& current_tag,
                             std::string detail);
  // The one answer to a storage error: its problem (with retry_after: the
  // backend's `retry_after` seconds when it gives them, 1 when overloaded),
  // its count (overloaded, upstream outcome unknown, backend error) and,
  // when it is storage's fault (5xx) rather than the request's, its log
  // line. `what` names the operation in the log line, `detail` (the
  // backend's account of what failed, if any) is one of its fields. With
  // `store_error` (storage::Errc::kStoreRefused), the store's own answer is
  // relayed: its status, code and request id in a store-error problem.
  Problem StorageFailure(std::error_code error, const std::string& key,
                         std::string_view what, int retry_after = 0,
                         std::string_view detail = {},
                         const storage::StoreError* store_error = nullptr);
  // The one way changes reach watchers (storage/changes.h): a change the
  // store made durable, from its own commit or, with replicas, from its
  // feed (Change::from_feed). Tells watchers (only what the feed tells,
  // when the store feeds them: WatchHub::fed_by_store), and counts and
  // logs a lease that ran out, once, where this process noticed it.
  void Changed(const storage::Change& change);

  // An accepted write (a write, a batch's op, a bump, a lease grant):
  // counts it. Watchers hear of it from the store (Changed).
  void Accepted(const fence::WriteOutcome& outcome);
  // A stale write observe mode stored (enforce would refuse it): counts it,
  // tells watchers, and logs it (rate limited per fence).
  void Observed(const Asker& asker, const std::string& key,
                const std::string& fence_name,
                std::optional<fence::Token> token,
                std::optional<fence::Token> current);

 private:
  // A storage failure answered 5xx, as an error line.
  void LogBackendFailure(std::error_code error, const std::string& key,
                         std::string_view what, std::string_view detail);
  // A store's 4xx refusal (but 412), as a warning once a minute per kind.
  void LogStoreRefusal(const storage::StoreError& store_error,
                       const std::string& key, std::string_view what);

  const Config& config_;
  storage::Fences& fences_;
  storage::Backend& backend_;
  BearerAuth auth_;
  metrics::Metrics& metrics_;
  fence::Scopes scopes_;
  std::atomic<bool> draining_ = false;
  Elections* elections_ = nullptr;
  Effects* effects_ = nullptr;
  Journal journal_;
  RejectionLogLimiter log_limiter_;
  OncePerInterval refusal_log_{std::chrono::seconds(60)};
  storage::WatchHub watches_;

  // A lease's change for watchers: "granted", "renewed", "released" or
  // "expired"; the lease document as it stands at `now`.
  void PublishLease(const std::string& name,
                    const fence::LeaseTable::Entry& entry, std::int64_t now,
                    std::string_view change);
  // `cause`: storage::Change::cause, in the event when not empty.
  void PublishFence(const fence::FenceRecord& fence, std::string_view cause);
  // The `rejection` event of a refused write (`would_reject`: one observe
  // mode stored).
  void PublishRejection(const Asker& asker, const std::string& key,
                        const std::string& fence_name,
                        std::optional<fence::Token> presented,
                        std::optional<fence::Token> current, bool would_reject);
};

// What a unit of routes (DataRoutes, AdminRoutes, LeaseRoutes) uses of the
// context, by the names the routes use.
class RouteUnit {
 protected:
  explicit RouteUnit(RouteContext& context)
      : context_(context),
        config_(context.config()),
        fences_(context.fences()),
        backend_(context.backend()),
        metrics_(context.metrics()),
        scopes_(context.scopes()) {}

  RouteContext& context_;
  const Config& config_;
  storage::Fences& fences_;
  storage::Backend& backend_;
  metrics::Metrics& metrics_;
  const fence::Scopes& scopes_;
};

// The Asker of a request of the data or admin port.
inline Asker AskerOf(const Request& request, const std::string& client) {
  return {request.method_string(), request.body(), client};
}

// Counts and logs a lease that ran out without a release (each is reported
// once, by whoever noticed it: a route, or the store on its own).
void ReportLeaseLost(metrics::Metrics& metrics, const std::string& name,
                     const fence::LeaseRecord& lease);

}  // namespace fencepost::proxy
