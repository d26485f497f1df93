#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <optional>
#include <string>

#include "http/coro.h"
#include "metrics/metrics.h"
#include "proxy/admin_routes.h"
#include "proxy/auth.h"
#include "proxy/config.h"
#include "proxy/core.h"
#include "proxy/data_routes.h"
#include "proxy/http_types.h"
#include "proxy/lease_routes.h"
#include "proxy/route_context.h"
#include "proxy/route_table.h"
#include "proxy/s3_door.h"
#include "storage/backend.h"
#include "storage/fences.h"

namespace fencepost::proxy {

// Turns one complete request into one response; no sockets. The data port's
// key space and the admin port's routes both live here, so tests drive them
// directly. Counts fenced-write outcomes; the server counts requests.
//
// One route table (route_table.h) says which unit answers a request and
// what it must show first; the units are DataRoutes (reads, writes,
// batches), AdminRoutes (health, metrics, fences, rejections, log level)
// and LeaseRoutes, sharing a RouteContext (the stores, the counters, the
// journal, the refusals).
//
// Thread safety: Handle and Screen on the server's one io thread, which the
// fs: and http:// backends also resume on (see FsBackend, HttpBackend).
class Service {
 public:
  // `fences` holds the fences (and `backend` the values); leases and
  // batches need the local ones (Fences::shards()).
  Service(const Config& config, storage::Fences& fences,
          storage::Backend& backend, metrics::Metrics& metrics,
          BearerAuth auth = {});

  // The response is complete (Content-Length set); the caller sets keep-alive.
  // `client` (address:port) goes into the rejection journal.
  // `body`: the body of a request whose header alone was read (StreamsBody),
  // else null.
  // `answer_body`: where the answer's body goes when it is streamed (a
  // large value read from the store); null: every answer is whole.
  Awaitable<Response> Handle(
      metrics::Port port, const Request& request, const std::string& client,
      BodySource* body = nullptr,
      std::unique_ptr<BodySource>* answer_body = nullptr);
  Awaitable<Response> Handle(metrics::Port port, const Request& request);

  // Whether `request`'s body (of a known length, over --max-body: the
  // server asks) is read by its handler as it arrives instead of whole
  // first: a PUT of an object through the S3 front door, or of a value on
  // the data port with a backend that streams values (s3://).
  bool StreamsBody(metrics::Port port, const Request& request);

  // The refusal `request` earns from its header alone (a bad key, a missing
  // credential or token), or nullopt when its body may be read. For
  // `Expect: 100-continue`: only a request that passes is invited to send
  // its body. Handle makes the same checks again; a refusal is counted
  // here as it would be there.
  std::optional<Response> Screen(metrics::Port port, const Request& request);

  // Every lease record must sit where its fence is under the current
  // --fence-scope settings (a grant raises the fence in the same record).
  // Returns what is wrong, or an empty string; called once at start.
  std::string CheckLeases() const { return leases_.CheckLeases(); }

  // The S3 front door answers Port::kS3 (set once, before serving).
  void SetS3Door(S3Door* door) { s3_door_ = door; }
  // The typed core the doors call (the S3 front door's object requests).
  Core& core() { return core_; }

  // The changes watchers are told of.
  storage::WatchHub& watches() { return context_.watches(); }
  // What the routes share; the assembly feeds it the store's changes
  // (RouteContext::Changed).
  RouteContext& context() { return context_; }

  // From now on /readyz answers 503.
  void StartDraining() { context_.StartDraining(); }
  // Reports rejections the log rate limit held back; call once a second.
  void FlushLogSummaries() { context_.FlushLogSummaries(); }

 private:
  // The 400 for a target of the wrong shape (fence::CheckTarget), on any
  // route of either port: `bad-key` where the target names a key (the data
  // port, /v1/leases/NAME, /v1/fences/KEY), else `bad-request`.
  std::optional<Response> RefuseTarget(metrics::Port port,
                                       const Request& request);
  // What `route` checks before the body is read (RouteNeeds), or, once the
  // request is whole (`whole`), also the key of a route without kKey. Sets
  // *key to the decoded key.
  std::optional<Response> Admit(const Route& route, const Request& request,
                                bool whole, std::string* key);

  S3Door* s3_door_ = nullptr;
  RouteContext context_;
  Core core_;
  DataRoutes data_;
  AdminRoutes admin_;
  LeaseRoutes leases_;
  RouteUnits units_;
};

}  // namespace fencepost::proxy
