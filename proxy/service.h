#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <atomic>
#include <boost/asio/awaitable.hpp>

#include "fence/scope.h"
#include "metrics/metrics.h"
#include "proxy/auth.h"
#include "proxy/config.h"
#include "proxy/http_types.h"
#include "proxy/journal.h"
#include "proxy/logging.h"
#include "proxy/problem.h"
#include "storage/async_commit.h"
#include "storage/backend.h"
#include "storage/fences.h"

namespace fencepost::proxy {

// Turns one complete request into one response; no sockets. The data port's
// key space and the admin port's routes both live here, so tests drive them
// directly. Counts fenced-write outcomes; the server counts requests.
//
// The routes are defined by port: data_routes.cc (reads, writes, batches),
// admin_routes.cc (health, metrics, fences, rejections, log level) and
// lease_routes.cc; service.cc keeps what they share (dispatch, the refusals
// before a fence is looked at, stale-write and storage-error accounting).
//
// Thread safety: Handle and Screen on the server's one io thread, which the
// fs: and http:// backends also resume on (see FsBackend, HttpBackend).
class Service {
 public:
  // `fences` holds the fences and leases (and `backend` the values).
  Service(const Config& config, storage::Fences& fences,
          storage::Backend& backend, metrics::Metrics& metrics,
          BearerAuth auth = {});

  // The response is complete (Content-Length set); the caller sets keep-alive.
  // `client` (address:port) goes into the rejection journal.
  boost::asio::awaitable<Response> Handle(metrics::Port port,
                                          const Request& request,
                                          const std::string& client);
  boost::asio::awaitable<Response> Handle(metrics::Port port,
                                          const Request& request);

  // The refusal `request` earns from its header alone (a bad key, a missing
  // credential or token), or nullopt when its body may be read. For
  // `Expect: 100-continue`: only a request that passes is invited to send
  // its body. Handle makes the same checks again; a refusal is counted
  // here as it would be there.
  std::optional<Response> Screen(metrics::Port port, const Request& request);

  // Every lease record must sit where its fence is under the current
  // --fence-scope settings (a grant raises the fence in the same record).
  // Returns what is wrong, or an empty string; called once at start.
  std::string CheckLeases() const { return fences_.CheckLeases(scopes_); }

  // From now on /readyz answers 503.
  void StartDraining() { draining_ = true; }
  // Reports rejections the log rate limit held back; call once a second.
  void FlushLogSummaries() { log_limiter_.Flush(); }

 private:
  boost::asio::awaitable<Response> HandleData(const Request& request,
                                              const std::string& client);
  boost::asio::awaitable<Response> HandleAdmin(const Request& request);
  // Coroutines take references: their callers co_await them at once.
  boost::asio::awaitable<Response> Read(const Request& request,
                                        const std::string& key);
  boost::asio::awaitable<Response> Write(const Request& request,
                                         const std::string& key,
                                         const std::string& client);
  boost::asio::awaitable<Response> Bump(const Request& request,
                                        const std::string& key);
  // POST /: a batch of puts and deletes applied in one transaction.
  boost::asio::awaitable<Response> Batch(const Request& request,
                                         const std::string& client);
  // The fence guarding `key` (or the scope named `key`).
  boost::asio::awaitable<Response> GetFence(const Request& request,
                                            const std::string& key);
  // Whether `name` is exactly a configured --fence-scope prefix.
  bool IsScope(std::string_view name) const;
  // Leases (/v1/leases): acquire or renew, release, read, list.
  boost::asio::awaitable<Response> AcquireLease(const Request& request,
                                                const std::string& name);
  boost::asio::awaitable<Response> ReleaseLease(const Request& request,
                                                const std::string& name);
  boost::asio::awaitable<Response> GetLease(const Request& request,
                                            const std::string& name);
  boost::asio::awaitable<Response> ListLeases(const Request& request);
  // The 507 for an acquire that would make a live lease past --max-leases
  // (fence::OverLeaseLimit); nullopt otherwise.
  boost::asio::awaitable<std::optional<Response>> RefuseLeaseLimit(
      const Request& request, const fence::LeaseOp& op);
  // Counts and logs a lease that ran out without a release (noticed once).
  void LeaseExpired(const std::string& name, const fence::LeaseRecord& lease);
  // The answer to a lease operation that failed (counts a noticed expiry).
  Response LeaseFailure(const Request& request, const std::string& name,
                        const fence::WriteOutcome& outcome);
  // Submits a lease operation to the committer of its fence.
  boost::asio::awaitable<fence::WriteOutcome> CommitLease(fence::LeaseOp op);
  boost::asio::awaitable<Response> ListFences(const Request& request);
  Response ListRejections(const Request& request);
  Response LogLevel(const Request& request);
  Response Metrics(const Request& request);
  boost::asio::awaitable<Response> Ready(const Request& request);
  // The 400 for a target of the wrong shape (fence::CheckTarget), on any
  // route of either port: `bad-key` where the target names a key (the data
  // port, /v1/leases/NAME, /v1/fences/KEY), else `bad-request`.
  std::optional<Response> RefuseTarget(metrics::Port port,
                                       const Request& request);
  // The 400 for a target that is not a key; sets *key when it is one.
  std::optional<Response> RefuseKey(const Request& request,
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
  // The one answer to a storage error: its problem (with Retry-After: the
  // backend's `retry_after` seconds when it gives them, 1 when overloaded),
  // its count (overloaded, upstream outcome unknown, backend error) and,
  // when it is storage's fault (5xx) rather than the request's, its log
  // line. `what` names the operation in the log line, `detail` (the
  // backend's account of what failed, if any) is one of its fields.
  Response StorageFailure(const Request& request, std::error_code error,
                          const std::string& key, std::string_view what,
                          int retry_after = 0, std::string_view detail = {});

  const Config& config_;
  storage::Fences& fences_;
  storage::Backend& backend_;
  BearerAuth auth_;
  metrics::Metrics& metrics_;
  fence::Scopes scopes_;
  std::atomic<bool> draining_ = false;
  Journal journal_;
  RejectionLogLimiter log_limiter_;
};

// Counts and logs a lease that ran out without a release (each is reported
// once, by whoever noticed it: a route, or the store on its own).
void ReportLeaseLost(metrics::Metrics& metrics, const std::string& name,
                     const fence::LeaseRecord& lease);

}  // namespace fencepost::proxy
