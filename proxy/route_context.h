#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "fence/lease_table.h"
#include "fence/scope.h"
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
  // The backend outlives the context: it tells no one after this.
  ~RouteContext() { backend_.TellRaises(nullptr); }

  const Config& config() const { return config_; }
  storage::Fences& fences() { return fences_; }
  storage::Backend& backend() { return backend_; }
  metrics::Metrics& metrics() { return metrics_; }
  const fence::Scopes& scopes() const { return scopes_; }
  const Journal& journal() const { return journal_; }
  // The changes watchers are told of (GET /v1/watch, long polls).
  storage::WatchHub& watches() { return watches_; }

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
  // 401 with WWW-Authenticate when auth is on and `request` lacks a token.
  std::optional<Response> RefuseUnauthorized(const Request& request,
                                             const std::string& key);
  // The 409 for a stale write (or batch, named by `event` in the log):
  // counts it, records it in the rejection journal and logs it (rate
  // limited per fence).
  Response RefuseStale(const Request& request, const std::string& key,
                       const std::string& fence_name, fence::Token token,
                       std::optional<fence::Token> current,
                       const std::string& client, std::string_view event);
  // A write (or batch op) whose If-Match / If-None-Match did not hold,
  // after its token was accepted: counts it, records it in the journal and
  // logs it as RefuseStale does (RecordPreconditionFailed alone, for an
  // upstream's 412 that is relayed as it is). `current_tag` is the value's
  // entity tag, unquoted (nullopt: no value or not known). Returns the 412
  // with `detail`, `current_etag` and ETag.
  void RecordPreconditionFailed(const Request& request, const std::string& key,
                                const std::string& fence_name,
                                fence::Token token,
                                const std::optional<std::string>& current_tag,
                                const std::string& client);
  Response RefusePrecondition(const Request& request, const std::string& key,
                              const std::string& fence_name, fence::Token token,
                              const std::optional<std::string>& current_tag,
                              const std::string& client, std::string detail);
  // The one answer to a storage error: its problem (with Retry-After: the
  // backend's `retry_after` seconds when it gives them, 1 when overloaded),
  // its count (overloaded, upstream outcome unknown, backend error) and,
  // when it is storage's fault (5xx) rather than the request's, its log
  // line. `what` names the operation in the log line, `detail` (the
  // backend's account of what failed, if any) is one of its fields. With
  // `store_error` (storage::Errc::kStoreRefused), the store's own answer is
  // relayed: its status, code and request id in a store-error problem.
  // `request` (an object fencepost made, never one read from a socket) is
  // authenticated already: the bearer check lets it by until Untrust.
  void Trust(const Request* request) { trusted_.insert(request); }
  void Untrust(const Request* request) { trusted_.erase(request); }
  Response StorageFailure(const Request& request, std::error_code error,
                          const std::string& key, std::string_view what,
                          int retry_after = 0, std::string_view detail = {},
                          const storage::StoreError* store_error = nullptr);
  // Counts and logs a lease that ran out without a release (noticed once),
  // and tells watchers.
  void LeaseExpired(const std::string& name, const fence::LeaseRecord& lease);

  // An accepted write of the fence `fence_name` (a write, a batch's op, a
  // bump, a lease grant): counts it, and tells watchers when it raised the
  // fence (fence::RaisesFence), unless it is a `backend_write` (answered by
  // Backend::Write) of a backend that tells of its raises itself
  // (Backend::TellRaises).
  void Accepted(const std::string& fence_name,
                const fence::WriteOutcome& outcome, bool backend_write = false);
  // A lease's change for watchers: "granted", "renewed", "released" or
  // "expired"; the lease document as it stands at `now`. Unless
  // `from_store`, nothing when the store feeds the watchers itself
  // (WatchHub::fed_by_store).
  void PublishLease(const std::string& name,
                    const fence::LeaseTable::Entry& entry, std::int64_t now,
                    std::string_view change, bool from_store = false);
  // A fence raised, for watchers (the store's feed; Accepted for this
  // server's own writes).
  void PublishFence(const fence::FenceRecord& fence);
  // A stale write observe mode stored (enforce would refuse it): counts it,
  // tells watchers, and logs it (rate limited per fence).
  void Observed(const Request& request, const std::string& key,
                const std::string& fence_name,
                std::optional<fence::Token> token,
                std::optional<fence::Token> current, const std::string& client);

 private:
  const Config& config_;
  storage::Fences& fences_;
  storage::Backend& backend_;
  BearerAuth auth_;
  std::unordered_set<const Request*> trusted_;  // Trust's
  metrics::Metrics& metrics_;
  fence::Scopes scopes_;
  std::atomic<bool> draining_ = false;
  bool backend_tells_raises_ = false;  // Backend::TellRaises
  Journal journal_;
  RejectionLogLimiter log_limiter_;
  storage::WatchHub watches_;

  // The `rejection` event of a refused write (`would_reject`: one observe
  // mode stored).
  void PublishRejection(const Request& request, const std::string& key,
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

// Counts and logs a lease that ran out without a release (each is reported
// once, by whoever noticed it: a route, or the store on its own).
void ReportLeaseLost(metrics::Metrics& metrics, const std::string& name,
                     const fence::LeaseRecord& lease);

}  // namespace fencepost::proxy
