#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/coro.h"
#include "metrics/metrics.h"
#include "proxy/http_types.h"

// The routes of both ports in one table: which methods each path takes,
// what a request must show before its body is read, and who answers it.
// Service::Screen asks it what to check before `100 Continue`;
// Service::Handle checks the same and dispatches from it. Internal to
// proxy/.
namespace fencepost::proxy {

class AdminRoutes;
class DataRoutes;
class LeaseRoutes;
class RouteContext;

// What a route answers with.
struct RouteUnits {
  RouteContext& context;
  DataRoutes& data;
  AdminRoutes& admin;
  LeaseRoutes& leases;
};

// One request as its route sees it: `key` is the decoded key or lease name
// (empty for a route without one), `client` (address:port) goes into the
// rejection journal.
struct RouteCall {
  const Request& request;
  const std::string& key;
  const std::string& client;
  // A streamed body (Service::StreamsBody), else null: the request's own.
  BodySource* body = nullptr;
  // Where the answer's body goes when it is streamed (a large value read
  // from the store), else null.
  std::unique_ptr<BodySource>* answer_body = nullptr;
};

// What a route checks before the request's body is read, in this order.
enum RouteNeeds : unsigned {
  kNothing = 0,
  // The key the target names is valid (else 400 bad-key). A keyed route
  // without it checks its key only once the request is whole.
  kKey = 1u << 0,
  // The bearer credential, when --auth-token-file is set (else 401).
  kBearer = 1u << 1,
  // The credential, then one valid Fencing-Token (else 401, 400, or 428
  // when it is missing).
  kToken = 1u << 2,
  // As kToken, but observe mode takes a write without a token.
  kTokenUnlessObserve = 1u << 3,
};

// A set of methods, one bit per boost::beast::http::verb.
using Verbs = std::uint64_t;
constexpr Verbs VerbBit(boost::beast::http::verb verb) {
  return Verbs{1} << static_cast<unsigned>(verb);
}
inline constexpr Verbs kAnyVerb = ~Verbs{0};

struct Route {
  enum class Match {
    kExact,  // the path is `path`
    kUnder,  // the path is `path` + "/" + something
    kAny,    // any path
  };
  // Where the key a route serves is in the target.
  enum class KeyAt {
    kNone,
    kAfterPath,  // what follows `path` (kUnder)
    kTarget,     // the whole target (the data port)
  };
  using When = bool (*)(const RouteUnits& units, const Request& request);
  using Answer = Awaitable<Response> (*)(const RouteUnits& units,
                                         const RouteCall& call);

  metrics::Port port;
  Match match;
  std::string_view path;
  Verbs verbs;
  KeyAt key = KeyAt::kNone;
  unsigned needs = kNothing;  // RouteNeeds
  // When set, the route is taken only when it holds (a backend's ability,
  // a scope's name); otherwise the next route that matches is.
  When when = nullptr;
  // Who answers; none for a 405 with `allow`.
  Answer answer = nullptr;
  std::string_view allow;
};

// The first route on `port` that takes `request` (its path, its method and
// its `when`), or nullptr: no admin endpoint has that path.
const Route* FindRoute(metrics::Port port, const Request& request,
                       const RouteUnits& units);

// The part of `target` that `route` decodes its key from.
std::string_view KeyTarget(const Route& route, std::string_view target);

// The part of `target` that names a key by the first keyed route on `port`
// whose path it matches, whatever the method; nullopt when no keyed route
// serves its path.
std::optional<std::string_view> KeyTargetOf(metrics::Port port,
                                            std::string_view target);

}  // namespace fencepost::proxy
