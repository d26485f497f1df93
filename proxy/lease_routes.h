#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <optional>
#include <string>

#include "fence/lease.h"
#include "fence/scope.h"
#include "fence/write.h"
#include "http/coro.h"
#include "metrics/metrics.h"
#include "proxy/config.h"
#include "proxy/http_types.h"
#include "proxy/route_context.h"
#include "storage/fences.h"

namespace fencepost::proxy {

// The admin port's leases (/v1/leases): acquire or renew, release, read,
// list. The route table (route_table.h) has checked the name, the
// credential and the token before these run.
//
// Coroutines take references: their callers co_await them at once.
class LeaseRoutes : private RouteUnit {
 public:
  explicit LeaseRoutes(RouteContext& context);

  Awaitable<Response> AcquireLease(const Request& request,
                                   const std::string& name);
  Awaitable<Response> ReleaseLease(const Request& request,
                                   const std::string& name);
  Awaitable<Response> GetLease(const Request& request, const std::string& name);
  Awaitable<Response> ListLeases(const Request& request);

  // Every lease record must sit where its fence is under the current
  // --fence-scope settings (a grant raises the fence in the same record).
  // Returns what is wrong, or an empty string; called once at start.
  std::string CheckLeases() const;

 private:
  // The 507 for a grant the engine refused past --max-leases.
  Response TooManyLeases(const Request& request, const std::string& name);
  // The answer to a lease operation that failed (counts a noticed expiry).
  Response LeaseFailure(const Request& request, const std::string& name,
                        const fence::WriteOutcome& outcome);
  // Submits a lease operation to the committer of its fence.
  Awaitable<fence::WriteOutcome> CommitLease(fence::LeaseOp op);
};

}  // namespace fencepost::proxy
