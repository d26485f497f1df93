#include "proxy/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "fence/key.h"
#include "fence/percent.h"
#include "http/json.h"
#include "proxy/logging.h"
#include "proxy/problem.h"
#include "proxy/routes.h"
#include "text/utf8.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using metrics::RejectReason;
using routes::kFencesPath;
using routes::kLeasesPath;
using routes::PathOf;
using routes::Problemed;
using routes::ReadToken;
using routes::StaleToken;
using routes::TokenState;

namespace {

std::optional<Response> RefuseToken(const Request& req, const std::string& key,
                                    TokenState state, bool allow_missing,
                                    metrics::Metrics& metrics) {
  if (state == TokenState::kInvalid) {
    metrics.WriteRejected(RejectReason::kInvalidToken);
    Problem problem{ProblemType::kInvalidToken,
                    "Fencing-Token must be one header of 1 to 20 decimal "
                    "digits, at most 18446744073709551615",
                    key};
    problem.presented = routes::PresentedToken(req);
    return Problemed(req, std::move(problem));
  }
  if (state == TokenState::kMissing && !allow_missing) {
    metrics.WriteRejected(RejectReason::kMissingToken);
    return Problemed(req, {ProblemType::kMissingToken,
                           "writes and bumps must carry a Fencing-Token header",
                           key, std::nullopt, std::nullopt});
  }
  return std::nullopt;
}

// A bad key's `key` member, like every other problem's: the decoded key when
// the path decodes (well-formed escapes, UTF-8 without NUL), else the path
// as it was sent; at most kMaxNameBytes, cut on a character boundary. JSON
// escaping does the rest.
std::string ShownKey(std::string_view target) {
  std::string_view path = PathOf(target);
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  std::string shown(path);
  if (auto decoded = fence::PercentDecode(path, fence::PercentMode::kStrict);
      decoded && text::IsValidUtf8(*decoded) &&
      decoded->find('\0') == std::string::npos) {
    shown = std::move(*decoded);
  }
  if (shown.size() > fence::kMaxNameBytes) {
    std::size_t cut = fence::kMaxNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    shown.resize(cut);
  }
  return shown;
}

}  // namespace

Service::Service(const Config& config, storage::Fences& fences,
                 storage::Backend& backend, metrics::Metrics& metrics,
                 BearerAuth auth)
    : config_(config),
      fences_(fences),
      backend_(backend),
      auth_(std::move(auth)),
      metrics_(metrics),
      scopes_(config.fence_scopes) {}

asio::awaitable<Response> Service::Handle(metrics::Port port,
                                          const Request& request,
                                          const std::string& client) {
  if (auto refused = RefuseTarget(port, request)) co_return std::move(*refused);
  if (port == metrics::Port::kData) {
    co_return co_await HandleData(request, client);
  }
  co_return co_await HandleAdmin(request);
}

asio::awaitable<Response> Service::Handle(metrics::Port port,
                                          const Request& request) {
  static const std::string kUnknown = "unknown";
  co_return co_await Handle(port, request, kUnknown);
}

std::optional<Response> Service::RefuseUnauthorized(const Request& req,
                                                    const std::string& key) {
  if (auth_.Allows(req)) return std::nullopt;
  const bool presented = req.count(http::field::authorization) > 0;
  Response res = Problemed(
      req, {ProblemType::kUnauthorized,
            presented ? "the bearer token is not valid"
                      : "this request needs Authorization: Bearer <token>",
            key, std::nullopt, std::nullopt});
  res.set(http::field::www_authenticate,
          presented ? "Bearer realm=\"fencepost\", error=\"invalid_token\""
                    : "Bearer realm=\"fencepost\"");
  return res;
}

std::optional<Response> Service::RefuseWrite(const Request& req,
                                             const std::string& key,
                                             bool allow_missing_token) {
  if (auto refused = RefuseUnauthorized(req, key)) return refused;
  fence::Token token = 0;
  const TokenState state = ReadToken(req, &token);
  return RefuseToken(req, key, state, allow_missing_token, metrics_);
}

std::optional<Response> Service::Screen(metrics::Port port,
                                        const Request& req) {
  if (auto refused = RefuseTarget(port, req)) return refused;
  const http::verb method = req.method();
  if (port == metrics::Port::kData) {
    if (PathOf(req.target()) == "/" && method == http::verb::post) {
      if (!backend_.supports_batches()) return std::nullopt;  // 405 later
      return RefuseWrite(req, "", false);
    }
    std::string key;
    if (auto refused = RefuseKey(req, req.target(), &key)) return refused;
    const bool fenced =
        method == http::verb::put || method == http::verb::delete_ ||
        ((method == http::verb::post || method == http::verb::patch) &&
         backend_.supports_post_patch());
    if (!fenced) return std::nullopt;
    return RefuseWrite(req, key, config_.mode == Mode::kObserve);
  }
  const std::string_view path = PathOf(req.target());
  if (path.substr(0, kLeasesPath.size() + 1) == "/v1/leases/") {
    std::string name;
    const std::string_view rest = req.target().substr(kLeasesPath.size());
    if (auto refused = RefuseKey(req, rest, &name)) return refused;
    if (method == http::verb::put) return RefuseUnauthorized(req, name);
    if (method == http::verb::delete_) return RefuseWrite(req, name, false);
    return std::nullopt;
  }
  if (method != http::verb::put) return std::nullopt;
  if (path == "/v1/log-level") return RefuseUnauthorized(req, "");
  if (path.substr(0, kFencesPath.size() + 1) == "/v1/fences/") {
    std::string key;
    const std::string_view rest = req.target().substr(kFencesPath.size());
    if (auto refused = RefuseKey(req, rest, &key)) return refused;
    return RefuseWrite(req, key, false);
  }
  return std::nullopt;
}

std::optional<Response> Service::RefuseTarget(metrics::Port port,
                                              const Request& req) {
  const std::string_view target = req.target();
  const fence::KeyError error = fence::CheckTarget(target);
  if (error == fence::KeyError::kOk) return std::nullopt;
  std::string_view key_target;
  const std::string_view path = PathOf(target);
  if (port == metrics::Port::kData) {
    key_target = target;
  } else if (path.substr(0, kLeasesPath.size() + 1) == "/v1/leases/") {
    key_target = target.substr(kLeasesPath.size());
  } else if (path.substr(0, kFencesPath.size() + 1) == "/v1/fences/") {
    key_target = target.substr(kFencesPath.size());
  } else {
    return Problemed(
        req, {ProblemType::kBadRequest, std::string(fence::Describe(error)),
              std::nullopt, std::nullopt, std::nullopt});
  }
  return Problemed(req,
                   {ProblemType::kBadKey, std::string(fence::Describe(error)),
                    ShownKey(key_target)});
}

std::optional<Response> Service::RefuseKey(const Request& req,
                                           std::string_view target,
                                           std::string* key) {
  const fence::KeyError error = fence::DecodeKey(target, key);
  if (error == fence::KeyError::kOk) return std::nullopt;
  return Problemed(req,
                   {ProblemType::kBadKey, std::string(fence::Describe(error)),
                    ShownKey(target)});
}

Response Service::RefuseStale(const Request& req, const std::string& key,
                              const std::string& fence_name, fence::Token token,
                              std::optional<fence::Token> current,
                              const std::string& client,
                              std::string_view event) {
  metrics_.StaleRejected(token, current.value_or(token));
  journal_.Add({std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count(),
                key, fence_name, token, current.value_or(0), client,
                req.body().size(), Sha256Hex(req.body())});
  if (log_limiter_.Admit(fence_name)) {
    LogEvent(spdlog::level::info, event, "stale write rejected",
             {{"key", key},
              {"fence", fence_name},
              {"presented_token", std::to_string(token), true},
              {"current_token", std::to_string(current.value_or(0)), true},
              {"client", client}});
  }
  return Problemed(req, StaleToken(key, token, current));
}

Response Service::StorageFailure(const Request& req, std::error_code error,
                                 const std::string& key, std::string_view what,
                                 int retry_after, std::string_view detail) {
  const Problem problem = ProblemFromStorage(error, key);
  const bool server_fault =
      static_cast<unsigned>(StatusOf(problem.type)) >= 500 &&
      problem.type != ProblemType::kOverloaded &&
      problem.type != ProblemType::kFenceHeld;
  if (problem.type == ProblemType::kOverloaded) {
    metrics_.Overloaded();
    retry_after = std::max(retry_after, 1);
  }
  if (problem.type == ProblemType::kStoreUnavailable ||
      problem.type == ProblemType::kFenceHeld) {
    retry_after = std::max(retry_after, 1);
  }
  if (problem.type == ProblemType::kOutcomeUnknown) metrics_.OutcomeUnknown();
  if (server_fault) {
    metrics_.BackendError();
    const std::string message = std::string(what) + " failed";
    const std::string code = std::string(error.category().name()) + ":" +
                             std::to_string(error.value());
    if (detail.empty()) {
      LogEvent(spdlog::level::err, "backend_failed", message,
               {{"key", key},
                {"backend", config_.backend},
                {"error", error.message()},
                {"code", code}});
    } else {
      LogEvent(spdlog::level::err, "backend_failed", message,
               {{"key", key},
                {"backend", config_.backend},
                {"error", error.message()},
                {"code", code},
                {"detail", std::string(detail)}});
    }
  }
  Response res = Problemed(req, problem);
  if (retry_after > 0) {
    res.set(http::field::retry_after, std::to_string(retry_after));
  }
  return res;
}

}  // namespace fencepost::proxy
