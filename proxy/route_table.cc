#include "proxy/route_table.h"

#include <iterator>

#include "proxy/admin_routes.h"
#include "proxy/data_routes.h"
#include "proxy/effects.h"
#include "proxy/lease_routes.h"
#include "proxy/route_context.h"
#include "proxy/routes.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using Match = Route::Match;
using KeyAt = Route::KeyAt;
using metrics::Port;
using routes::kFencesPath;
using routes::kLeasesPath;

namespace {

constexpr Verbs kGet = VerbBit(http::verb::get) | VerbBit(http::verb::head);
constexpr Verbs kPut = VerbBit(http::verb::put);
constexpr Verbs kDelete = VerbBit(http::verb::delete_);
constexpr Verbs kPost = VerbBit(http::verb::post);
constexpr Verbs kPostPatch = kPost | VerbBit(http::verb::patch);

bool SupportsBatches(const RouteUnits& u, const Request&) {
  return u.context.backend().supports_batches();
}

bool SupportsPostPatch(const RouteUnits& u, const Request&) {
  return u.context.backend().supports_post_patch();
}

bool HasEffects(const RouteUnits& u, const Request&) {
  return u.context.effects() != nullptr;
}
bool NamesScope(const RouteUnits& u, const Request& req) {
  return u.admin.NamesScope(req);
}

// A route that `answer` answers.
Route Answered(Port port, Match match, std::string_view path, Verbs verbs,
               KeyAt key, unsigned needs, Route::When when,
               Route::Answer answer) {
  return {port, match, path, verbs, key, needs, when, answer, {}};
}

// GET and HEAD of an admin path without a key.
Route AdminRead(std::string_view path, Route::Answer answer) {
  return Answered(Port::kAdmin, Match::kExact, path, kGet, KeyAt::kNone,
                  kNothing, nullptr, answer);
}

// The 405 for every method the routes before it on its path do not take.
Route NotAllowed(Port port, Match match, std::string_view path, KeyAt key,
                 unsigned needs, std::string_view allow,
                 Route::When when = nullptr) {
  return {port, match, path, kAnyVerb, key, needs, when, nullptr, allow};
}

// Tried in order; the first that takes a request answers it.
const Route kRoutes[] = {
    // The data port: batches; then reads and writes of the key the whole
    // target names.
    Answered(Port::kData, Match::kExact, "/", kPost, KeyAt::kNone, kToken,
             &SupportsBatches,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.data.Batch(c.request, c.client);
             }),
    Answered(
        Port::kData, Match::kExact, "/", kPost, KeyAt::kNone, kNothing, nullptr,
        [](const RouteUnits& u, const RouteCall& c) -> Awaitable<Response> {
          co_return u.data.BatchesUnsupported(c.request);
        }),
    // With --effect-target, /v1/effects/ is the gate of the calls out.
    Answered(Port::kData, Match::kUnder, kEffectsPath,
             kPostPatch | kPut | kDelete, KeyAt::kNone, kToken, &HasEffects,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.context.effects()->Call(c.request, c.client);
             }),
    NotAllowed(Port::kData, Match::kUnder, kEffectsPath, KeyAt::kNone, kNothing,
               "POST, PUT, PATCH, DELETE", &HasEffects),
    Answered(Port::kData, Match::kAny, "", kGet, KeyAt::kTarget, kKey, nullptr,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.data.Read(c.request, c.key, c.client, c.answer_body);
             }),
    Answered(Port::kData, Match::kAny, "", kPut | kDelete, KeyAt::kTarget,
             kKey | kTokenUnlessObserve, nullptr,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.data.Write(c.request, c.key, c.client, c.body);
             }),
    Answered(Port::kData, Match::kAny, "", kPostPatch, KeyAt::kTarget,
             kKey | kTokenUnlessObserve, &SupportsPostPatch,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.data.Write(c.request, c.key, c.client);
             }),
    NotAllowed(Port::kData, Match::kAny, "", KeyAt::kTarget, kKey,
               "GET, HEAD, PUT, DELETE, POST, PATCH", &SupportsPostPatch),
    NotAllowed(Port::kData, Match::kAny, "", KeyAt::kTarget, kKey,
               "GET, HEAD, PUT, DELETE"),

    // The admin port: health and metrics.
    AdminRead(
        "/metrics",
        [](const RouteUnits& u, const RouteCall& c) -> Awaitable<Response> {
          co_return u.admin.Metrics(c.request);
        }),
    NotAllowed(Port::kAdmin, Match::kExact, "/metrics", KeyAt::kNone, kNothing,
               "GET, HEAD"),
    AdminRead("/livez",
              [](const RouteUnits&, const RouteCall& c) -> Awaitable<Response> {
                co_return routes::Text(c.request, http::status::ok, "ok\n");
              }),
    NotAllowed(Port::kAdmin, Match::kExact, "/livez", KeyAt::kNone, kNothing,
               "GET, HEAD"),
    AdminRead("/healthz",
              [](const RouteUnits&, const RouteCall& c) -> Awaitable<Response> {
                co_return routes::Text(c.request, http::status::ok, "ok\n");
              }),
    NotAllowed(Port::kAdmin, Match::kExact, "/healthz", KeyAt::kNone, kNothing,
               "GET, HEAD"),
    AdminRead("/readyz",
              [](const RouteUnits& u, const RouteCall& c) {
                return u.admin.Ready(c.request);
              }),
    NotAllowed(Port::kAdmin, Match::kExact, "/readyz", KeyAt::kNone, kNothing,
               "GET, HEAD"),
    // Fences: the list, a scope's fence by its exact name, a key's fence
    // and its bump.
    AdminRead(kFencesPath,
              [](const RouteUnits& u, const RouteCall& c) {
                return u.admin.ListFences(c.request);
              }),
    NotAllowed(Port::kAdmin, Match::kExact, kFencesPath, KeyAt::kNone, kNothing,
               "GET, HEAD"),
    Answered(Port::kAdmin, Match::kUnder, kFencesPath, kGet, KeyAt::kNone,
             kNothing, &NamesScope,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.admin.GetScopeFence(c.request);
             }),
    Answered(Port::kAdmin, Match::kUnder, kFencesPath, kGet, KeyAt::kAfterPath,
             kNothing, nullptr,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.admin.GetFence(c.request, c.key);
             }),
    Answered(Port::kAdmin, Match::kUnder, kFencesPath, kPut, KeyAt::kAfterPath,
             kKey | kToken, nullptr,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.admin.Bump(c.request, c.key, c.client);
             }),
    NotAllowed(Port::kAdmin, Match::kUnder, kFencesPath, KeyAt::kAfterPath,
               kNothing, "GET, HEAD, PUT"),
    // Effects: the records, and one forgotten.
    Answered(Port::kAdmin, Match::kExact, kEffectsPath, kGet, KeyAt::kNone,
             kNothing, &HasEffects,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.context.effects()->List(c.request);
             }),
    NotAllowed(Port::kAdmin, Match::kExact, kEffectsPath, KeyAt::kNone,
               kNothing, "GET, HEAD", &HasEffects),
    Answered(Port::kAdmin, Match::kUnder, kEffectsPath, kDelete, KeyAt::kNone,
             kToken, &HasEffects,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.context.effects()->Forget(c.request, c.client);
             }),
    NotAllowed(Port::kAdmin, Match::kUnder, kEffectsPath, KeyAt::kNone,
               kNothing, "DELETE", &HasEffects),
    // Leases: the list, then one lease by its name.
    AdminRead(kLeasesPath,
              [](const RouteUnits& u, const RouteCall& c) {
                return u.leases.ListLeases(c.request);
              }),
    NotAllowed(Port::kAdmin, Match::kExact, kLeasesPath, KeyAt::kNone, kNothing,
               "GET, HEAD"),
    Answered(Port::kAdmin, Match::kUnder, kLeasesPath, kGet, KeyAt::kAfterPath,
             kKey, nullptr,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.leases.GetLease(c.request, c.key);
             }),
    Answered(Port::kAdmin, Match::kUnder, kLeasesPath, kPut, KeyAt::kAfterPath,
             kKey | kBearer, nullptr,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.leases.AcquireLease(c.request, c.key);
             }),
    Answered(Port::kAdmin, Match::kUnder, kLeasesPath, kDelete,
             KeyAt::kAfterPath, kKey | kToken, nullptr,
             [](const RouteUnits& u, const RouteCall& c) {
               return u.leases.ReleaseLease(c.request, c.key);
             }),
    NotAllowed(Port::kAdmin, Match::kUnder, kLeasesPath, KeyAt::kAfterPath,
               kKey, "GET, HEAD, PUT, DELETE"),
    // Watches: the event stream (the long poll is GET /v1/fences/KEY).
    Answered(
        Port::kAdmin, Match::kExact, "/v1/watch", kGet, KeyAt::kNone, kNothing,
        nullptr,
        [](const RouteUnits& u, const RouteCall& c) -> Awaitable<Response> {
          co_return u.admin.OpenWatch(c.request);
        }),
    NotAllowed(Port::kAdmin, Match::kExact, "/v1/watch", KeyAt::kNone, kNothing,
               "GET"),
    // The rejection journal and the log level.
    AdminRead(
        "/v1/rejections",
        [](const RouteUnits& u, const RouteCall& c) -> Awaitable<Response> {
          co_return u.admin.ListRejections(c.request);
        }),
    NotAllowed(Port::kAdmin, Match::kExact, "/v1/rejections", KeyAt::kNone,
               kNothing, "GET, HEAD"),
    Answered(
        Port::kAdmin, Match::kExact, "/v1/log-level", kGet, KeyAt::kNone,
        kNothing, nullptr,
        [](const RouteUnits& u, const RouteCall& c) -> Awaitable<Response> {
          co_return u.admin.LogLevel(c.request);
        }),
    Answered(
        Port::kAdmin, Match::kExact, "/v1/log-level", kPut, KeyAt::kNone,
        kBearer, nullptr,
        [](const RouteUnits& u, const RouteCall& c) -> Awaitable<Response> {
          co_return u.admin.LogLevel(c.request);
        }),
    NotAllowed(Port::kAdmin, Match::kExact, "/v1/log-level", KeyAt::kNone,
               kNothing, "GET, HEAD, PUT"),
};

bool PathMatches(const Route& route, std::string_view path) {
  switch (route.match) {
    case Match::kExact:
      return path == route.path;
    case Match::kUnder:
      return path.size() > route.path.size() &&
             path.substr(0, route.path.size()) == route.path &&
             path[route.path.size()] == '/';
    case Match::kAny:
      break;
  }
  return true;
}

}  // namespace

const Route* FindRoute(Port port, const Request& request,
                       const RouteUnits& units) {
  const std::string_view path = routes::PathOf(request.target());
  const Verbs verb = VerbBit(request.method());
  for (const Route& route : kRoutes) {
    if (route.port == port && (route.verbs & verb) != 0 &&
        PathMatches(route, path) &&
        (route.when == nullptr || route.when(units, request))) {
      return &route;
    }
  }
  return nullptr;
}

std::string_view KeyTarget(const Route& route, std::string_view target) {
  return route.key == KeyAt::kAfterPath ? target.substr(route.path.size())
                                        : target;
}

std::optional<std::string_view> KeyTargetOf(Port port,
                                            std::string_view target) {
  const std::string_view path = routes::PathOf(target);
  for (const Route& route : kRoutes) {
    if (route.port == port && route.key != KeyAt::kNone &&
        PathMatches(route, path)) {
      return KeyTarget(route, target);
    }
  }
  return std::nullopt;
}

}  // namespace fencepost::proxy
