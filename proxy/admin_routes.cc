#include "proxy/admin_routes.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "codec/percent.h"
#include "http/json.h"
#include "proxy/elections.h"
#include "proxy/logging.h"
#include "proxy/routes.h"
#include "storage/async_commit.h"
#include "storage/errc.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using routes::kFencesPath;
using routes::kTokenHeader;
using routes::LimitOf;
using routes::PathOf;
using routes::Problemed;
using routes::QueryParam;
using routes::ReadToken;
using routes::Text;

namespace {

// What a read of fences saw: "local" or "linearizable" (Fences).
constexpr std::string_view kConsistencyHeader = "Fencepost-Consistency";

Response FenceDocument(const Request& req, http::status status,
                       const fence::FenceRecord& fence) {
  std::string body;
  routes::AppendFence(&body, fence);
  body += "\n";
  Response res = Text(req, status, std::move(body), "application/json");
  res.set(kTokenHeader, std::to_string(fence.token));
  return res;
}

// A scope's fence is named by its prefix, which ends in '/' and so is not a
// key: the rest of /v1/fences/NAME, percent-decoded, names it exactly.
std::optional<std::string> ScopeNamed(const Request& req) {
  const std::string_view path = PathOf(req.target());
  return codec::PercentDecode(path.substr(kFencesPath.size() + 1),
                              codec::PercentMode::kStrict);
}

}  // namespace

AdminRoutes::AdminRoutes(RouteContext& context) : RouteUnit(context) {}

Response AdminRoutes::Metrics(const Request& req) {
  const storage::Fences::Stats stats = fences_.Statistics();
  if (stats.live_leases) {
    metrics_.SetLeasesHeld(static_cast<double>(*stats.live_leases));
  }
  if (stats.map) {
    metrics_.SetMap(static_cast<double>(stats.map->used),
                    static_cast<double>(stats.map->size),
                    static_cast<double>(stats.map->max));
  }
  // Without a log of this process's own (etcd://) they stay at 0.
  const fence::CommitStats log = stats.log.value_or(fence::CommitStats{});
  const auto counts = [](const fence::Buckets& b) {
    return metrics::Metrics::BucketCounts{b.bounds(), b.counts(), b.sum()};
  };
  metrics_.SetLog(counts(log.group_writes), counts(log.sync_seconds),
                  counts(log.group_wait_seconds));
  if (auto count = fences_.Count()) {
    metrics_.SetFences(static_cast<double>(*count));
  }
  const storage::WatchHub& hub = context_.watches();
  metrics_.SetWatches(static_cast<double>(hub.watchers()), hub.events_total(),
                      hub.dropped_total());
  return Text(req, http::status::ok, metrics_.Serialize(),
              "text/plain; version=0.0.4; charset=utf-8");
}

Awaitable<Response> AdminRoutes::Ready(const Request& req) {
  const bool draining = context_.draining();
  bool backend_ready = false;
  if (!draining) backend_ready = co_await backend_.Ready();
  const std::string why = backend_ready ? "" : backend_.not_ready_reason();
  const Elections* elections = context_.elections();
  std::string answer = "ok\n";
  if (draining) {
    answer = "draining\n";
  } else if (!backend_ready) {
    answer = why.empty() ? "backend not ready\n"
                         : "backend not ready: " + why + "\n";
  } else if (elections != nullptr && !elections->Ready()) {
    answer = "an election was not read yet\n";
  }
  if (!draining) NoteReadiness(backend_ready, why);
  const http::status status =
      answer == "ok\n" ? http::status::ok : http::status::service_unavailable;
  co_return Text(req, status, std::move(answer));
}

void AdminRoutes::NoteReadiness(bool ready, const std::string& reason) {
  // Logged when it changes, not at every probe.
  const std::string now = ready ? std::string() : reason;
  if (now == logged_not_ready_) return;
  if (now.empty()) {
    LogEvent(spdlog::level::info, "backend_ready", "the backend is ready again",
             {{"backend", config_.backend}});
  } else {
    LogEvent(spdlog::level::warn, "backend_not_ready",
             "the backend is not ready",
             {{"backend", config_.backend}, {"reason", now}});
  }
  logged_not_ready_ = now;
}

bool AdminRoutes::IsScope(std::string_view name) const {
  return std::find(config_.fence_scopes.begin(), config_.fence_scopes.end(),
                   name) != config_.fence_scopes.end();
}

bool AdminRoutes::NamesScope(const Request& req) const {
  const std::optional<std::string> scope = ScopeNamed(req);
  return scope && IsScope(*scope);
}

Awaitable<Response> AdminRoutes::GetScopeFence(const Request& req) {
  const std::string scope = ScopeNamed(req).value_or("");
  co_return co_await GetFence(req, scope);
}

Awaitable<Response> AdminRoutes::GetFence(const Request& req,
                                          const std::string& key) {
  if (QueryParam(req.target(), "wait_above")) {
    co_return co_await WaitFence(req, key);
  }
  const storage::Fences::Read read =
      co_await fences_.Get(std::string(scopes_.FenceFor(key)));
  co_return FenceAnswer(req, key, read);
}

Response AdminRoutes::FenceAnswer(const Request& req, const std::string& key,
                                  const storage::Fences::Read& read) {
  if (read.error) {
    return Problemed(req, context_.StorageFailure(read.error, key, "fence read",
                                                  0, fences_.last_error()));
  }
  if (!read.fence) {
    return Problemed(
        req, {ProblemType::kNotFound, "no fence guards this key yet", key,
              std::nullopt, std::nullopt});
  }
  Response res = FenceDocument(req, http::status::ok, *read.fence);
  res.set(kConsistencyHeader, fences_.consistency());
  return res;
}

Awaitable<Response> AdminRoutes::Bump(const Request& req,
                                      const std::string& key,
                                      const std::string& client) {
  fence::Token token = 0;
  ReadToken(req, &token);
  fence::FencedWrite write;
  write.fence = std::string(scopes_.FenceFor(key));
  write.token = token;
  fence::FenceRecord fence{write.fence, token, 0};
  std::optional<Problem> unconfirmed =
      co_await context_.AdmitElected(write.fence, token, key);
  if (unconfirmed) co_return Problemed(req, std::move(*unconfirmed));
  const fence::WriteOutcome outcome =
      co_await storage::AsyncCommit(fences_, std::move(write));
  switch (outcome.verdict) {
    case fence::WriteOutcome::Verdict::kAccepted:
      context_.Accepted(outcome);
      fence.updated_at_ns = outcome.updated_at_ns;
      if (outcome.decision.advances) {
        LogEvent(
            spdlog::level::info, "fence_bumped", "fence bumped",
            {{"fence", fence.name}, {"token", std::to_string(token), true}});
      }
      co_return FenceDocument(
          req,
          outcome.decision.creates ? http::status::created : http::status::ok,
          fence);
    case fence::WriteOutcome::Verdict::kRejected:
    case fence::WriteOutcome::Verdict::kObserved:
      co_return Problemed(req, context_.RefuseStale(
                                   AskerOf(req, client), key, fence.name, token,
                                   outcome.current, "stale_bump_rejected"));
    case fence::WriteOutcome::Verdict::kFailed:
    case fence::WriteOutcome::Verdict::kPreconditionFailed:  // bumps have none
      break;
  }
  co_return Problemed(req, context_.StorageFailure(outcome.error, key, "bump",
                                                   0, fences_.last_error()));
}

Response AdminRoutes::ListRejections(const Request& req) {
  std::optional<Response> refused;
  const std::size_t limit = LimitOf(req, &refused);
  if (refused) return std::move(*refused);
  std::string body = "{\"rejections\":[";
  bool first = true;
  for (const Rejection& r : context_.journal().Recent(limit)) {
    if (!first) body += ",";
    first = false;
    body += "{\"time\":";
    AppendJsonString(&body, FormatRfc3339(r.time_ns));
    body += ",\"key\":";
    AppendJsonString(&body, r.key);
    body += ",\"fence\":";
    AppendJsonString(&body, r.fence);
    body += ",\"presented_token\":" + std::to_string(r.presented);
    body += ",\"current_token\":" + std::to_string(r.current);
    body += ",\"client\":";
    AppendJsonString(&body, r.client);
    body += ",\"body_length\":" + std::to_string(r.body_length);
    body += ",\"body_sha256\":";
    AppendJsonString(&body, r.body_sha256);
    body += ",\"reason\":";
    AppendJsonString(&body, r.reason);
    if (r.reason == "precondition_failed") {
      body += ",\"current_etag\":";
      if (r.current_etag) {
        AppendJsonString(&body, *r.current_etag);
      } else {
        body += "null";
      }
    }
    body += "}";
  }
  body += "]}\n";
  return Text(req, http::status::ok, std::move(body), "application/json");
}

Response AdminRoutes::LogLevel(const Request& req) {
  if (req.method() == http::verb::put) {
    std::string_view wanted = req.body();
    while (!wanted.empty() &&
           std::isspace(static_cast<unsigned char>(wanted.back()))) {
      wanted.remove_suffix(1);
    }
    const auto level = ParseLogLevel(wanted);
    if (!level) {
      return Problemed(req, {ProblemType::kBadRequest,
                             "the body must be " + std::string(kLevelNames),
                             std::nullopt, std::nullopt, std::nullopt});
    }
    spdlog::set_level(*level);
    spdlog::warn("log level set to {}", wanted);
  }
  std::string body = "{\"level\":";
  AppendJsonString(&body, LevelName(spdlog::get_level()));
  body += "}\n";
  return Text(req, http::status::ok, std::move(body), "application/json");
}

Awaitable<Response> AdminRoutes::ListFences(const Request& req) {
  std::optional<Response> refused;
  const std::size_t limit = LimitOf(req, &refused);
  if (refused) co_return std::move(*refused);
  std::string prefix = QueryParam(req.target(), "prefix").value_or("");
  std::string after = QueryParam(req.target(), "after").value_or("");

  storage::Fences::ListRead read =
      co_await fences_.List(std::move(prefix), std::move(after), limit);
  if (read.error) {
    co_return Problemed(req,
                        context_.StorageFailure(read.error, "", "fence list", 0,
                                                fences_.last_error()));
  }
  const fence::FenceList& list = read.list;
  std::string body = "{\"fences\":[";
  for (std::size_t i = 0; i < list.fences.size(); ++i) {
    if (i > 0) body += ",";
    routes::AppendFence(&body, list.fences[i]);
  }
  body += "],\"next\":";
  if (list.next) {
    AppendJsonString(&body, *list.next);
  } else {
    body += "null";
  }
  body += "}\n";
  Response res =
      Text(req, http::status::ok, std::move(body), "application/json");
  res.set(kConsistencyHeader, fences_.consistency());
  co_return res;
}

}  // namespace fencepost::proxy
