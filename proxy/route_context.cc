#include "proxy/route_context.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "fence/key.h"
#include "proxy/elections.h"
#include "proxy/logging.h"
#include "proxy/problem.h"
#include "proxy/routes.h"
#include "sigv4/crypto.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;
using metrics::RejectReason;
using routes::Problemed;
using routes::ReadToken;
using routes::StaleToken;
using routes::TokenState;

RouteContext::RouteContext(const Config& config, storage::Fences& fences,
                           storage::Backend& backend, metrics::Metrics& metrics,
                           BearerAuth auth)
    : config_(config),
      fences_(fences),
      backend_(backend),
      auth_(std::move(auth)),
      metrics_(metrics),
      scopes_(config.fence_scopes) {
  // The one channel the store's changes reach watchers by.
  fences_.TellChanges([this](storage::Change change) { Changed(change); });
}

RouteContext::~RouteContext() { fences_.TellChanges(nullptr); }

std::optional<Response> RouteContext::RefuseUnauthorized(
    const Request& req, const std::string& key) {
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

std::optional<Response> RouteContext::RefuseWrite(const Request& req,
                                                  const std::string& key,
                                                  bool allow_missing_token) {
  if (auto refused = RefuseUnauthorized(req, key)) return refused;
  fence::Token token = 0;
  const TokenState state = ReadToken(req, &token);
  std::optional<Problem> problem =
      RefuseToken(key, state, routes::TokenValues(req), allow_missing_token);
  if (!problem) return std::nullopt;
  return Problemed(req, std::move(*problem));
}

std::optional<Problem> RouteContext::RefuseToken(
    const std::string& key, TokenState state,
    const std::vector<std::string_view>& sent, bool allow_missing_token) {
  if (state == TokenState::kInvalid) {
    metrics_.WriteRejected(RejectReason::kInvalidToken);
    Problem problem{ProblemType::kInvalidToken,
                    "Fencing-Token must be one header of 1 to 20 decimal "
                    "digits, at most 18446744073709551615",
                    key};
    problem.presented = fence::ShowPresented(sent);
    return problem;
  }
  if (state == TokenState::kMissing && !allow_missing_token) {
    metrics_.WriteRejected(RejectReason::kMissingToken);
    return Problem{ProblemType::kMissingToken,
                   "writes and bumps must carry a Fencing-Token header", key};
  }
  return std::nullopt;
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

Problem RouteContext::RefuseStale(const Asker& asker, const std::string& key,
                                  const std::string& fence_name,
                                  fence::Token token,
                                  std::optional<fence::Token> current,
                                  std::string_view event) {
  metrics_.StaleRejected(token, current.value_or(token));
  PublishRejection(asker, key, fence_name, token, current, false);
  journal_.Add({std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count(),
                key, fence_name, token, current.value_or(0),
                std::string(asker.client), asker.body.size(),
                sigv4::HexSha256(asker.body), "stale_token", std::nullopt});
  if (log_limiter_.Admit(fence_name)) {
    LogEvent(spdlog::level::info, event, "stale write rejected",
             {{"key", key},
              {"fence", fence_name},
              {"presented_token", std::to_string(token), true},
              {"current_token", std::to_string(current.value_or(0)), true},
              {"client", std::string(asker.client)}});
  }
  return StaleToken(key, token, current);
}

Problem RouteContext::RefuseStaleRead(const std::string& key,
                                      const std::string& fence_name,
                                      fence::Token token, fence::Token current,
                                      const std::string& client) {
  if (log_limiter_.Admit(fence_name)) {
    LogEvent(spdlog::level::info, "stale_read_refused", "stale read refused",
             {{"key", key},
              {"fence", fence_name},
              {"presented_token", std::to_string(token), true},
              {"current_token", std::to_string(current), true},
              {"client", client}});
  }
  return StaleToken(key, token, current);
}

void RouteContext::RecordPreconditionFailed(
    const Asker& asker, const std::string& key, const std::string& fence_name,
    fence::Token token, const std::optional<std::string>& current_tag) {
  metrics_.WriteRejected(RejectReason::kPreconditionFailed);
  Rejection entry{std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count(),
                  key,
                  fence_name,
                  token,
                  token,
                  std::string(asker.client),
                  asker.body.size(),
                  sigv4::HexSha256(asker.body),
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
              {"client", std::string(asker.client)}});
  }
}

Problem RouteContext::RefusePrecondition(
    const Asker& asker, const std::string& key, const std::string& fence_name,
    fence::Token token, const std::optional<std::string>& current_tag,
    std::string detail) {
  RecordPreconditionFailed(asker, key, fence_name, token, current_tag);
  Problem problem(ProblemType::kPreconditionFailed, std::move(detail), key);
  problem.with_current_etag = true;
  if (current_tag) problem.current_etag = QuoteTag(*current_tag);
  return problem;
}

void RouteContext::LogBackendFailure(std::error_code error,
                                     const std::string& key,
                                     std::string_view what,
                                     std::string_view detail) {
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

void RouteContext::LogStoreRefusal(const storage::StoreError& store_error,
                                   const std::string& key,
                                   std::string_view what) {
  // Once a minute per kind: a wrong secret refuses every request.
  const std::string kind =
      std::to_string(store_error.status) + " " + store_error.code;
  std::uint64_t repeated = 0;
  if (!refusal_log_.Admit(kind, &repeated)) return;
  // The store's words go in fields only, which are escaped.
  LogEvent(spdlog::level::warn, "store_refused",
           std::string(what) + " was refused by the store",
           {{"key", key},
            {"backend", config_.backend},
            {"status", std::to_string(store_error.status), true},
            {"code", store_error.code},
            {"request_id", store_error.request_id},
            {"repeated", std::to_string(repeated), true}});
}

Problem RouteContext::StorageFailure(std::error_code error,
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
  // A store's refusal of fencepost's own request (its credentials, its
  // bucket): the operator must see it, though the client is answered 4xx.
  // A 412 is the client's precondition, not a failure.
  const bool store_refused =
      !server_fault && store_error != nullptr && store_error->status != 412;
  if (server_fault || store_refused) {
    std::string code(SlugOf(problem.type));
    if (store_error != nullptr) {
      code = store_error->code.empty()
                 ? "HTTP_" + std::to_string(store_error->status)
                 : store_error->code;
    }
    metrics_.BackendError(code);
  }
  if (server_fault) LogBackendFailure(error, key, what, detail);
  if (store_refused) LogStoreRefusal(*store_error, key, what);
  problem.retry_after = retry_after;
  return problem;
}

void RouteContext::Changed(const storage::Change& change) {
  using Kind = storage::Change::Kind;
  if (change.kind == Kind::kLeaseExpired && !change.from_feed) {
    ReportLeaseLost(metrics_, change.lease_name, change.lease.record);
  }
  if (watches_.fed_by_store() && !change.from_feed) return;
  if (change.kind == Kind::kFenceRaised) {
    PublishFence(change.fence, change.cause);
  } else {
    PublishLease(change.lease_name, change.lease, change.now_ns,
                 storage::ChangeName(change.kind));
  }
}

bool RouteContext::Elected(const std::string& fence) const {
  return elections_ != nullptr && elections_->Elected(fence);
}

Awaitable<std::optional<Problem>> RouteContext::AdmitElected(
    const std::string& fence, fence::Token token, const std::string& key) {
  if (elections_ == nullptr || !elections_->Elected(fence)) {
    co_return std::nullopt;
  }
  std::optional<Problem> refused =
      co_await elections_->Admit(fence, token, key);
  co_return refused;
}

void RouteContext::Accepted(const fence::WriteOutcome& outcome) {
  metrics_.WriteAccepted(outcome.decision.advances);
}

void RouteContext::PublishFence(const fence::FenceRecord& fence,
                                std::string_view cause) {
  std::string data;
  routes::AppendFence(&data, fence);
  if (!cause.empty()) {
    data.pop_back();  // the closing brace: the cause goes in
    data += ",\"cause\":";
    AppendJsonString(&data, cause);
    data += "}";
  }
  watches_.Publish("fence", fence.name, std::move(data));
}

void RouteContext::PublishLease(const std::string& name,
                                const fence::LeaseTable::Entry& entry,
                                std::int64_t now, std::string_view change) {
  std::string data;
  routes::AppendLease(&data, name, entry, now);
  data.pop_back();  // the closing brace: the change goes in
  data += ",\"change\":";
  AppendJsonString(&data, change);
  data += "}";
  watches_.Publish("lease", name, std::move(data));
}

void RouteContext::Observed(const Asker& asker, const std::string& key,
                            const std::string& fence_name,
                            std::optional<fence::Token> token,
                            std::optional<fence::Token> current) {
  metrics_.WouldReject();
  PublishRejection(asker, key, fence_name, token, current, true);
  if (!log_limiter_.Admit(fence_name)) return;
  LogEvent(
      spdlog::level::warn, "stale_write_observed",
      "observe mode stored a write enforce would reject",
      {{"key", key},
       {"fence", fence_name},
       {"presented_token", token ? std::to_string(*token) : "null", true},
       {"current_token", current ? std::to_string(*current) : "null", true},
       {"client", std::string(asker.client)}});
}

void RouteContext::PublishRejection(const Asker& asker, const std::string& key,
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
  AppendJsonString(&data, asker.method);
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
