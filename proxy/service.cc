#include "proxy/service.h"

#include "fence/key.h"
#include "proxy/effects.h"
#include "proxy/problem.h"
#include "proxy/routes.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
using routes::Problemed;

Service::Service(const Config& config, storage::Fences& fences,
                 storage::Backend& backend, metrics::Metrics& metrics,
                 BearerAuth auth)
    : context_(config, fences, backend, metrics, std::move(auth)),
      core_(context_),
      data_(context_, core_),
      admin_(context_),
      leases_(context_),
      units_{context_, data_, admin_, leases_} {}

bool Service::StreamsBody(metrics::Port port, const Request& request) {
  if (port == metrics::Port::kS3) {
    return s3_door_ != nullptr && S3Door::StreamsBody(request);
  }
  // An effect's body is sent whole, and hashed: never streamed.
  return port == metrics::Port::kData &&
         request.method() == boost::beast::http::verb::put &&
         context_.backend().streams_values() &&
         !(context_.effects() != nullptr &&
           routes::PathOf(request.target()).starts_with(kEffectsPath));
}

Awaitable<Response> Service::Handle(metrics::Port port, const Request& request,
                                    const std::string& client, BodySource* body,
                                    std::unique_ptr<BodySource>* answer_body) {
  if (port == metrics::Port::kS3 && s3_door_ != nullptr) {
    co_return co_await s3_door_->Handle(request, client, body, answer_body);
  }
  if (auto refused = RefuseTarget(port, request)) co_return std::move(*refused);
  const Route* route = FindRoute(port, request, units_);
  if (route == nullptr) {
    co_return Problemed(request,
                        {ProblemType::kNotFound, "no such admin endpoint",
                         std::nullopt, std::nullopt, std::nullopt});
  }
  std::string key;
  if (auto refused = Admit(*route, request, true, &key)) {
    co_return std::move(*refused);
  }
  if (route->answer == nullptr) {
    co_return routes::MethodNotAllowed(request, route->allow);
  }
  const RouteCall call{request, key, client, body, answer_body};
  co_return co_await route->answer(units_, call);
}

Awaitable<Response> Service::Handle(metrics::Port port,
                                    const Request& request) {
  static const std::string kUnknown = "unknown";
  co_return co_await Handle(port, request, kUnknown);
}

std::optional<Response> Service::Screen(metrics::Port port,
                                        const Request& req) {
  // The S3 front door checks a request's signature once it is whole.
  if (port == metrics::Port::kS3) return std::nullopt;
  if (auto refused = RefuseTarget(port, req)) return refused;
  const Route* route = FindRoute(port, req, units_);
  if (route == nullptr) return std::nullopt;
  std::string key;
  return Admit(*route, req, false, &key);
}

std::optional<Response> Service::Admit(const Route& route, const Request& req,
                                       bool whole, std::string* key) {
  if (route.key != Route::KeyAt::kNone && (whole || (route.needs & kKey))) {
    const std::string_view target = KeyTarget(route, req.target());
    if (auto refused = context_.RefuseKey(req, route.port, target, key)) {
      return refused;
    }
  }
  if (route.needs & kBearer) return context_.RefuseUnauthorized(req, *key);
  if (route.needs & kToken) return context_.RefuseWrite(req, *key, false);
  if (route.needs & kTokenUnlessObserve) {
    return context_.RefuseWrite(req, *key,
                                context_.config().mode == Mode::kObserve);
  }
  return std::nullopt;
}

std::optional<Response> Service::RefuseTarget(metrics::Port port,
                                              const Request& req) {
  const std::string_view target = req.target();
  const fence::KeyError error = fence::CheckTarget(target);
  if (error == fence::KeyError::kOk) return std::nullopt;
  const std::optional<std::string_view> key_target = KeyTargetOf(port, target);
  if (!key_target) {
    return Problemed(
        req, {ProblemType::kBadRequest, std::string(fence::Describe(error)),
              std::nullopt, std::nullopt, std::nullopt});
  }
  return Problemed(req,
                   {ProblemType::kBadKey, std::string(fence::Describe(error)),
                    routes::ShownKey(*key_target)});
}

}  // namespace fencepost::proxy
