#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <string>
#include <string_view>

#include "fence/scope.h"
#include "http/coro.h"
#include "metrics/metrics.h"
#include "proxy/config.h"
#include "proxy/http_types.h"
#include "proxy/route_context.h"
#include "storage/backend.h"
#include "storage/fences.h"

namespace fencepost::proxy {

// The admin port: health, metrics, fences, the rejection journal and the
// log level (leases are LeaseRoutes). The route table (route_table.h) has
// checked the key, the credential and the token before these run.
//
// Coroutines take references: their callers co_await them at once.
class AdminRoutes : private RouteUnit {
 public:
  explicit AdminRoutes(RouteContext& context);

  Response Metrics(const Request& request);
  Awaitable<Response> Ready(const Request& request);
  // The fence guarding `key` (or the scope named `key`); with wait_above,
  // a long poll (WaitFence).
  Awaitable<Response> GetFence(const Request& request, const std::string& key);
  // The fence of the scope that /v1/fences/NAME names (NamesScope).
  Awaitable<Response> GetScopeFence(const Request& request);
  // Whether the target is /v1/fences/NAME with NAME exactly a configured
  // --fence-scope prefix (which ends in '/' and so is not a key).
  bool NamesScope(const Request& request) const;
  // PUT /v1/fences/KEY: raises the fence guarding `key` (or the scope
  // named `key`). A stale token is refused as a stale write is
  // (RouteContext::RefuseStale), `client` in the rejection journal.
  Awaitable<Response> Bump(const Request& request, const std::string& key,
                           const std::string& client);
  Awaitable<Response> ListFences(const Request& request);
  Response ListRejections(const Request& request);
  Response LogLevel(const Request& request);
  // GET /v1/watch: checks the query and answers the head of an event
  // stream (watch::IsEventStream), which the server then streams; or 400.
  Response OpenWatch(const Request& request);

 private:
  // GET /v1/fences/KEY?wait_above=N&timeout_ms=T: answers as soon as the
  // fence is above N, or after T ms with the fence as it stands (404 when
  // none) and Fencepost-Watch: timeout (watch_routes.cc).
  Awaitable<Response> WaitFence(const Request& request, const std::string& key);
  // The answer to a read of `key`'s fence: the document, 404, or the
  // storage failure.
  Response FenceAnswer(const Request& request, const std::string& key,
                       const storage::Fences::Read& read);
  // Whether `name` is exactly a configured --fence-scope prefix.
  bool IsScope(std::string_view name) const;
  // Logs readiness when it changes: a warning with the backend's reason
  // when it is lost, a line when it is back.
  void NoteReadiness(bool ready, const std::string& reason);

  std::string logged_not_ready_;  // the reason last logged ("": ready)
};

}  // namespace fencepost::proxy
