#include "proxy/route_context.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "fence/key.h"
#include "proxy/logging.h"
#include "proxy/problem.h"
#include "proxy/routes.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;
using metrics::RejectReason;
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

}  // namespace

RouteContext::RouteContext(const Config& config, storage::Fences& fences,
                           storage::Backend& backend, metrics::Metrics& metrics,
                           BearerAuth auth)
    : config_(config),
      fences_(fences),
      backend_(backend),
      auth_(std::move(auth)),
      metrics_(metrics),
      scopes_(config.fence_scopes) {
  // Told where the backend makes the raise durable, unless the store's feed
  // tells every replica's.
  backend_tells_raises_ =
      backend_.TellRaises([this](const fence::FenceRecord& fence) {
        if (!watches_.fed_by_store()) PublishFence(fence);
      });
}

std::optional<Response> RouteContext::RefuseUnauthorized(
    const Request& req, const std::string& key) {
  if (trusted_.count(&req) > 0 || auth_.Allows(req)) return std::nullopt;
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

std::optional<Response> RouteContext::RefuseWrite(const Request& req,
                                                  const std::string& key,
                                                  bool allow_missing_token) {
  if (auto refused = RefuseUnauthorized(req, key)) return refused;
  fence::Token token = 0;
  const TokenState state = ReadToken(req, &token);
  return RefuseToken(req, key, state, allow_missing_token, metrics_);
}

std::optional<Response> RouteContext::RefuseKey(const Request& req,
                                                metrics::Port port,
                                                std::string_view target,
                                                std::string* key) {
  const fence::KeyError error = port == metrics::Port::kAdmin
                                    ? fence::DecodeName(target, scopes_, key)
                                    : fence::DecodeKey(target, key);
  if (error == fence::KeyError::kOk) return std::nullopt;
  return Problemed(req,
                   {ProblemType::kBadKey, std::string(fence::Describe(error)),
                    routes::ShownKey(target)});
}

Response RouteContext::RefuseStale(const Request& req, const std::string& key,
                                   const std::string& fence_name,
                                   fence::Token token,
                                   std::optional<fence::Token> current,
                                   const std::string& client,
                                   std::string_view event) {
  metrics_.StaleRejected(token, current.value_or(token));
  PublishRejection(req, key, fence_name, token, current, false);
  journal_.Add({std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count(),
                key, fence_name, token, current.value_or(0), client,
                req.body().size(), Sha256Hex(req.body()), "stale_token",
                std::nullopt});
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

void RouteContext::RecordPreconditionFailed(
    const Request& req, const std::string& key, const std::string& fence_name,
    fence::Token token, const std::optional<std::string>& current_tag,
    const std::string& client) {
  metrics_.WriteRejected(RejectReason::kPreconditionFailed);
  Rejection entry{std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count(),
                  key,
                  fence_name,
                  token,
                  token,
                  client,
                  req.body().size(),
                  Sha256Hex(req.body()),
                  "precondition_failed",
                  std::nullopt};
  if (current_tag) entry.current_etag = QuoteTag(*current_tag);
  journal_.Add(std::move(entry));
  if (log_limiter_.Admit(fence_name)) {
    LogEvent(spdlog::level::info, "precondition_failed",
             "write refused: its precondition does not hold",
             {{"key", key},
              {"fence", fence_name},
              {"presented_token", std::to_string(token), true},
              {"current_etag", current_tag ? QuoteTag(*current_tag) : "null"},
              {"client", client}});
  }
}

Response RouteContext::RefusePrecondition(
    const Request& req, const std::string& key, const std::string& fence_name,
    fence::Token token, const std::optional<std::string>& current_tag,
    const std::string& client, std::string detail) {
  RecordPreconditionFailed(req, key, fence_name, token, current_tag, client);
  Problem problem(ProblemType::kPreconditionFailed, std::move(detail), key);
  problem.with_current_etag = true;
  if (current_tag) problem.current_etag = QuoteTag(*current_tag);
  Response res = Problemed(req, std::move(problem));
  if (current_tag) res.set(http::field::etag, QuoteTag(*current_tag));
  return res;
}

Response RouteContext::StorageFailure(const Request& req, std::error_code error,
                                      const std::string& key,
                                      std::string_view what, int retry_after,
                                      std::string_view detail,
                                      const storage::StoreError* store_error) {
  Problem problem = ProblemFromStorage(error, key);
  if (store_error != nullptr) {
    problem.type = ProblemType::kStoreError;
    problem.status = store_error->status;
    problem.store_code = store_error->code;
    problem.store_request_id = store_error->request_id;
    problem.detail = "the store answered " +
                     std::to_string(store_error->status) +
                     (store_error->code.empty() ? "" : " " + store_error->code);
    retry_after = std::max(retry_after, store_error->retry_after);
  }
  const bool server_fault =
      problem.status.value_or(static_cast<unsigned>(StatusOf(problem.type))) >=
          500 &&
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

void RouteContext::LeaseExpired(const std::string& name,
                                const fence::LeaseRecord& lease) {
  ReportLeaseLost(metrics_, name, lease);
  fence::LeaseTable::Entry entry;
  entry.record = lease;
  PublishLease(name, entry, fences_.SteadyNow(), "expired");
}

void RouteContext::Accepted(const std::string& fence_name,
                            const fence::WriteOutcome& outcome,
                            bool backend_write) {
  metrics_.WriteAccepted(outcome.decision.advances);
  if (!fence::RaisesFence(outcome) || !outcome.current ||
      watches_.fed_by_store() || (backend_write && backend_tells_raises_)) {
    return;
  }
  PublishFence({fence_name, *outcome.current, outcome.updated_at_ns});
}

void RouteContext::PublishFence(const fence::FenceRecord& fence) {
  std::string data;
  routes::AppendFence(&data, fence);
  watches_.Publish("fence", fence.name, std::move(data));
}

void RouteContext::PublishLease(const std::string& name,
                                const fence::LeaseTable::Entry& entry,
                                std::int64_t now, std::string_view change,
                                bool from_store) {
  if (watches_.fed_by_store() && !from_store) return;
  std::string data;
  routes::AppendLease(&data, name, entry, now);
  data.pop_back();  // the closing brace: the change goes in
  data += ",\"change\":";
  AppendJsonString(&data, change);
  data += "}";
  watches_.Publish("lease", name, std::move(data));
}

void RouteContext::Observed(const Request& req, const std::string& key,
                            const std::string& fence_name,
                            std::optional<fence::Token> token,
                            std::optional<fence::Token> current,
                            const std::string& client) {
  metrics_.WouldReject();
  PublishRejection(req, key, fence_name, token, current, true);
  if (!log_limiter_.Admit(fence_name)) return;
  LogEvent(
      spdlog::level::warn, "stale_write_observed",
      "observe mode stored a write enforce would reject",
      {{"key", key},
       {"fence", fence_name},
       {"presented_token", token ? std::to_string(*token) : "null", true},
       {"current_token", current ? std::to_string(*current) : "null", true},
       {"client", client}});
}

void RouteContext::PublishRejection(const Request& req, const std::string& key,
                                    const std::string& fence_name,
                                    std::optional<fence::Token> presented,
                                    std::optional<fence::Token> current,
                                    bool would_reject) {
  const auto number = [](std::optional<fence::Token> t) {
    return t ? std::to_string(*t) : std::string("null");
  };
  std::string data = "{\"key\":";
  AppendJsonString(&data, key);
  data += ",\"fence\":";
  AppendJsonString(&data, fence_name);
  data += ",\"presented_token\":" + number(presented) +
          ",\"current_token\":" + number(current) + ",\"method\":";
  AppendJsonString(&data, req.method_string());
  data += ",\"at\":";
  AppendJsonString(
      &data,
      FormatRfc3339(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()));
  data += ",\"outcome\":";
  AppendJsonString(&data, would_reject ? "would-reject" : "rejected");
  data += "}";
  watches_.Publish("rejection", key, std::move(data));
}

void ReportLeaseLost(metrics::Metrics& metrics, const std::string& name,
                     const fence::LeaseRecord& lease) {
  metrics.LeasesExpired(1);
  LogEvent(spdlog::level::warn, "lease_lost", "lease lost",
           {{"lease", name},
            {"holder", lease.holder},
            {"token", std::to_string(lease.token), true},
            {"generation", std::to_string(lease.transitions), true},
            {"ttl_ms", std::to_string(lease.ttl_ms), true},
            {"expires_at", routes::ExpiresAt(lease)},
            {"reason", "no renewal within ttl_ms; it ran out"}});
}

}  // namespace fencepost::proxy
