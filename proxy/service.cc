#include "proxy/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include "fence/errc.h"
#include "fence/key.h"
#include "proxy/json.h"
#include "proxy/logging.h"
#include "proxy/problem.h"
#include "storage/errc.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using metrics::RejectReason;

namespace {

constexpr std::string_view kTokenHeader = "Fencing-Token";
constexpr std::string_view kFencesPath = "/v1/fences";
constexpr std::string_view kLeasesPath = "/v1/leases";
constexpr std::size_t kMaxHolderBytes = 256;
constexpr std::uint64_t kMinTtlMs = 100, kMaxTtlMs = 3600000;

Response Problemed(const Request& req, Problem problem) {
  return MakeProblemResponse(problem, req.version());
}

Response Text(const Request& req, http::status status, std::string body,
              std::string_view content_type = "text/plain; charset=utf-8") {
  Response res(status, req.version());
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response MethodNotAllowed(const Request& req, std::string_view allow) {
  Response res = Problemed(
      req, {ProblemType::kMethodNotAllowed,
            std::string(req.method_string()) +
                " is not allowed here; allowed: " + std::string(allow),
            std::nullopt, std::nullopt, std::nullopt});
  res.set(http::field::allow, allow);
  return res;
}

enum class TokenState { kOk, kMissing, kInvalid };

TokenState ReadToken(const Request& req, fence::Token* token) {
  const auto count = req.count(kTokenHeader);
  if (count == 0) return TokenState::kMissing;
  if (count > 1) return TokenState::kInvalid;
  const auto parsed = fence::ParseToken(req[kTokenHeader]);
  if (!parsed) return TokenState::kInvalid;
  *token = *parsed;
  return TokenState::kOk;
}

// The 400 or 428 for a write whose token is invalid or (unless
// `allow_missing`) missing, counted; nullopt when the write may go on.
std::optional<Response> RefuseToken(const Request& req, const std::string& key,
                                    TokenState state, bool allow_missing,
                                    metrics::Metrics& metrics) {
  if (state == TokenState::kInvalid) {
    metrics.WriteRejected(RejectReason::kInvalidToken);
    return Problemed(req, {ProblemType::kInvalidToken,
                           "Fencing-Token must be one header of 1 to 20 "
                           "decimal digits, at most 18446744073709551615",
                           key, std::nullopt, std::nullopt});
  }
  if (state == TokenState::kMissing && !allow_missing) {
    metrics.WriteRejected(RejectReason::kMissingToken);
    return Problemed(req, {ProblemType::kMissingToken,
                           "writes and bumps must carry a Fencing-Token header",
                           key, std::nullopt, std::nullopt});
  }
  return std::nullopt;
}

std::string_view PathOf(std::string_view target) {
  return target.substr(0, target.find('?'));
}

// One query parameter, percent-decoded with '+' as space; nullopt if absent
// or malformed.
std::optional<std::string> QueryParam(std::string_view target,
                                      std::string_view name) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  std::optional<std::string> found;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    const std::string_view raw =
        eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    std::string value;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '+') {
        value.push_back(' ');
      } else if (raw[i] == '%' && i + 2 < raw.size() &&
                 std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
                 std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
        value.push_back(static_cast<char>(
            std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16)));
        i += 2;
      } else {
        value.push_back(raw[i]);
      }
    }
    found = std::move(value);
  }
  return found;
}

void AppendFence(std::string* out, const fence::FenceRecord& fence) {
  *out += "{\"fence\":";
  AppendJsonString(out, fence.name);
  *out += ",\"token\":" + std::to_string(fence.token) + ",\"updated_at\":";
  AppendJsonString(out, FormatRfc3339(fence.updated_at_ns));
  *out += "}";
}

Response FenceDocument(const Request& req, http::status status,
                       const fence::FenceRecord& fence) {
  std::string body;
  AppendFence(&body, fence);
  body += "\n";
  Response res = Text(req, status, std::move(body), "application/json");
  res.set(kTokenHeader, std::to_string(fence.token));
  return res;
}

Problem StaleToken(const std::string& key, fence::Token presented,
                   std::optional<fence::Token> current) {
  return {ProblemType::kStaleToken,
          "token " + std::to_string(presented) +
              " is lower than the fence's highest token " +
              std::to_string(current.value_or(0)),
          key, presented, current};
}

storage::WriteKind KindOf(http::verb verb) {
  switch (verb) {
    case http::verb::delete_:
      return storage::WriteKind::kDelete;
    case http::verb::post:
      return storage::WriteKind::kPost;
    case http::verb::patch:
      return storage::WriteKind::kPatch;
    default:
      return storage::WriteKind::kPut;
  }
}

}  // namespace

Service::Service(const Config& config, fence::Shards& shards,
                 storage::Backend& backend, metrics::Metrics& metrics,
                 BearerAuth auth)
    : config_(config),
      shards_(shards),
      backend_(backend),
      auth_(std::move(auth)),
      metrics_(metrics),
      scopes_(config.fence_scopes),
      fences_(shards.envs()) {}

asio::awaitable<Response> Service::Handle(metrics::Port port,
                                          const Request& request,
                                          const std::string& client) {
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

asio::awaitable<Response> Service::HandleData(const Request& req,
                                              const std::string& client) {
  if (PathOf(req.target()) == "/" && req.method() == http::verb::post) {
    co_return co_await Batch(req, client);
  }
  std::string key;
  if (auto refused = RefuseKey(req, req.target(), &key)) {
    co_return std::move(*refused);
  }
  switch (req.method()) {
    case http::verb::get:
    case http::verb::head:
      co_return co_await Read(req, key);
    case http::verb::put:
    case http::verb::delete_:
      co_return co_await Write(req, key, client);
    case http::verb::post:
    case http::verb::patch:
      if (backend_.supports_post_patch()) {
        co_return co_await Write(req, key, client);
      }
      [[fallthrough]];
    default:
      co_return MethodNotAllowed(req,
                                 backend_.supports_post_patch()
                                     ? "GET, HEAD, PUT, DELETE, POST, PATCH"
                                     : "GET, HEAD, PUT, DELETE");
  }
}

asio::awaitable<Response> Service::Read(const Request& req,
                                        const std::string& key) {
  const bool head = req.method() == http::verb::head;
  storage::ReadRequest request{key, std::string(scopes_.FenceFor(key)), head,
                               &req};
  storage::ReadResult read = co_await backend_.Read(request);
  if (read.error) {
    co_return Problemed(req, StorageProblem(read.error, key, "read"));
  }
  if (read.upstream) {
    read.upstream->version(req.version());
    co_return std::move(*read.upstream);
  }
  if (!read.found) {
    co_return Problemed(req, {ProblemType::kNotFound, "no value for this key",
                              key, std::nullopt, std::nullopt});
  }
  Response res(http::status::ok, req.version());
  res.set(http::field::content_type, "application/octet-stream");
  if (read.token) res.set(kTokenHeader, std::to_string(*read.token));
  if (head) {
    res.content_length(read.size);
  } else {
    res.body() = std::move(read.body);
    res.prepare_payload();
  }
  co_return res;
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

std::optional<Response> Service::RefuseKey(const Request& req,
                                           std::string_view target,
                                           std::string* key) {
  const fence::KeyError error = fence::DecodeKey(target, key);
  if (error == fence::KeyError::kOk) return std::nullopt;
  std::string_view shown = PathOf(target);
  if (!shown.empty() && shown.front() == '/') shown.remove_prefix(1);
  return Problemed(req,
                   {ProblemType::kBadKey, std::string(fence::Describe(error)),
                    std::string(shown), std::nullopt, std::nullopt});
}

asio::awaitable<Response> Service::Write(const Request& req,
                                         const std::string& key,
                                         const std::string& client) {
  const bool observe = config_.mode == Mode::kObserve;
  if (auto refused = RefuseWrite(req, key, observe)) {
    co_return std::move(*refused);
  }
  fence::Token token = 0;
  const TokenState state = ReadToken(req, &token);

  storage::WriteRequest write;
  write.kind = KindOf(req.method());
  write.fence = std::string(scopes_.FenceFor(key));
  write.key = key;
  if (state == TokenState::kOk) write.token = token;
  write.observe = observe;
  write.body = req.body();
  write.original = &req;
  const std::string fence_name = write.fence;
  storage::WriteResult result = co_await backend_.Write(write);
  const fence::WriteOutcome& outcome = result.outcome;

  using Verdict = fence::WriteOutcome::Verdict;
  switch (outcome.verdict) {
    case Verdict::kFailed: {
      if (outcome.error == storage::Errc::kOutcomeUnknown) {
        metrics_.OutcomeUnknown();
      }
      Response res =
          Problemed(req, StorageProblem(outcome.error, key, "write"));
      if (result.retry_after > 0) {
        res.set(http::field::retry_after, std::to_string(result.retry_after));
      } else if (outcome.error == fence::Errc::kOverloaded) {
        res.set(http::field::retry_after, "1");
      }
      co_return res;
    }
    case Verdict::kRejected:
      co_return RefuseStale(req, key, fence_name, token, outcome.current,
                            client, "stale_write_rejected");
    case Verdict::kObserved:
      metrics_.WouldReject();
      if (log_limiter_.Admit(fence_name)) {
        LogEvent(
            spdlog::level::warn, "stale_write_observed",
            "observe mode stored a write enforce would reject",
            {{"key", key},
             {"fence", fence_name},
             {"presented_token",
              state == TokenState::kOk ? std::to_string(token) : "null", true},
             {"current_token",
              outcome.current ? std::to_string(*outcome.current) : "null",
              true},
             {"client", client}});
      }
      break;
    case Verdict::kAccepted:
      metrics_.WriteAccepted(outcome.decision.advances);
      break;
  }
  if (result.upstream) {
    // The upstream's answer, with the fence's token.
    Response res = std::move(*result.upstream);
    res.version(req.version());
    if (outcome.current) {
      res.set(kTokenHeader, std::to_string(*outcome.current));
    }
    co_return res;
  }
  // PUT: 201 when it made the value, else 200 with an empty body. DELETE:
  // 204, which RFC 9110 forbids to carry Content-Length.
  http::status status = http::status::ok;
  if (req.method() == http::verb::delete_) {
    status = http::status::no_content;
  } else if (result.created) {
    status = http::status::created;
  }
  Response res(status, req.version());
  if (outcome.current) res.set(kTokenHeader, std::to_string(*outcome.current));
  if (status != http::status::no_content) res.prepare_payload();
  co_return res;
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

Problem Service::StorageProblem(std::error_code error, const std::string& key,
                                std::string_view what) {
  Problem problem = ProblemFromStorage(error, key);
  if (problem.type == ProblemType::kOverloaded) {
    metrics_.Overloaded();
  } else if (static_cast<unsigned>(StatusOf(problem.type)) >= 500 &&
             problem.type != ProblemType::kFenceHeld) {
    metrics_.BackendError();
    LogEvent(spdlog::level::err, "backend_failed",
             std::string(what) + " failed",
             {{"key", key},
              {"backend", config_.backend},
              {"error", error.message()},
              {"code", std::string(error.category().name()) + ":" +
                           std::to_string(error.value())}});
  }
  return problem;
}

asio::awaitable<Response> Service::HandleAdmin(const Request& req) {
  const std::string_view path = PathOf(req.target());
  const bool get =
      req.method() == http::verb::get || req.method() == http::verb::head;
  if (path == "/metrics" || path == "/livez" || path == "/healthz" ||
      path == "/readyz" || path == kFencesPath) {
    if (!get) co_return MethodNotAllowed(req, "GET, HEAD");
    if (path == "/metrics") co_return Metrics(req);
    if (path == "/readyz") co_return co_await Ready(req);
    if (path == kFencesPath) co_return ListFences(req);
    co_return Text(req, http::status::ok, "ok\n");
  }
  if (path == kLeasesPath) {
    if (!get) co_return MethodNotAllowed(req, "GET, HEAD");
    co_return ListLeases(req);
  }
  if (path.substr(0, kLeasesPath.size() + 1) == "/v1/leases/") {
    std::string name;
    const std::string_view rest = req.target().substr(kLeasesPath.size());
    if (auto refused = RefuseKey(req, rest, &name)) {
      co_return std::move(*refused);
    }
    if (get) co_return GetLease(req, name);
    if (req.method() == http::verb::put) {
      co_return co_await AcquireLease(req, name);
    }
    if (req.method() == http::verb::delete_) {
      co_return co_await ReleaseLease(req, name);
    }
    co_return MethodNotAllowed(req, "GET, HEAD, PUT, DELETE");
  }
  if (path == "/v1/rejections") {
    if (!get) co_return MethodNotAllowed(req, "GET, HEAD");
    co_return ListRejections(req);
  }
  if (path == "/v1/log-level") {
    if (!get && req.method() != http::verb::put) {
      co_return MethodNotAllowed(req, "GET, HEAD, PUT");
    }
    co_return LogLevel(req);
  }
  if (path.substr(0, kFencesPath.size() + 1) == "/v1/fences/") {
    std::string key;
    const std::string_view rest = req.target().substr(kFencesPath.size());
    if (auto refused = RefuseKey(req, rest, &key)) {
      co_return std::move(*refused);
    }
    if (get) co_return GetFence(req, key);
    if (req.method() == http::verb::put) co_return co_await Bump(req, key);
    co_return MethodNotAllowed(req, "GET, HEAD, PUT");
  }
  co_return Problemed(req, {ProblemType::kNotFound, "no such admin endpoint",
                            std::nullopt, std::nullopt, std::nullopt});
}

Response Service::Metrics(const Request& req) {
  const std::int64_t now = shards_.SteadyNow();
  std::size_t held = 0;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    for (const auto& [name, lease] :
         shards_.env(i).lease_table().NoticeExpired(now)) {
      LeaseExpired(name, lease);
    }
    held += shards_.env(i).lease_table().Live(now);
  }
  metrics_.SetLeasesHeld(static_cast<double>(held));
  std::uint64_t count = 0;
  if (!fences_.Count(&count)) metrics_.SetFences(static_cast<double>(count));
  std::uint64_t used = 0, size = 0, max = 0;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    used += shards_.env(i).used_bytes();
    size += shards_.env(i).map_size();
    max += shards_.env(i).max_map_size();
  }
  metrics_.SetMap(static_cast<double>(used), static_cast<double>(size),
                  static_cast<double>(max));
  return Text(req, http::status::ok, metrics_.Serialize(),
              "text/plain; version=0.0.4; charset=utf-8");
}

asio::awaitable<Response> Service::Ready(const Request& req) {
  bool backend_ready = false;
  if (!draining_) backend_ready = co_await backend_.Ready();
  std::string_view answer = "ok\n";
  if (draining_) {
    answer = "draining\n";
  } else if (!backend_ready) {
    answer = "backend not ready\n";
  }
  co_return Text(
      req,
      answer == "ok\n" ? http::status::ok : http::status::service_unavailable,
      std::string(answer));
}

Response Service::GetFence(const Request& req, const std::string& key) {
  std::optional<fence::FenceRecord> fence;
  if (auto error = fences_.Get(scopes_.FenceFor(key), &fence)) {
    metrics_.BackendError();
    return Problemed(req, ProblemFromStorage(error, key));
  }
  if (!fence) {
    return Problemed(
        req, {ProblemType::kNotFound, "no fence guards this key yet", key,
              std::nullopt, std::nullopt});
  }
  return FenceDocument(req, http::status::ok, *fence);
}

asio::awaitable<Response> Service::Bump(const Request& req,
                                        const std::string& key) {
  if (auto refused = RefuseWrite(req, key, false)) {
    co_return std::move(*refused);
  }
  fence::Token token = 0;
  ReadToken(req, &token);
  fence::FenceWrite write;
  write.fence = std::string(scopes_.FenceFor(key));
  write.token = token;
  fence::FenceRecord fence{write.fence, token, 0};
  const fence::WriteOutcome outcome = co_await storage::AsyncCommit(
      shards_.CommitterOf(fence.name), std::move(write));
  switch (outcome.verdict) {
    case fence::WriteOutcome::Verdict::kAccepted:
      metrics_.WriteAccepted(outcome.decision.advances);
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
      metrics_.StaleRejected(token, outcome.current.value_or(token));
      co_return Problemed(req, StaleToken(key, token, outcome.current));
    case fence::WriteOutcome::Verdict::kFailed:
      break;
  }
  Response res = Problemed(req, StorageProblem(outcome.error, key, "bump"));
  if (outcome.error == fence::Errc::kOverloaded) {
    res.set(http::field::retry_after, "1");
  }
  co_return res;
}

namespace {

// The `limit` query parameter: 100 when absent, clamped to 1000; 0 or a
// non-number is a 400, returned in *refused.
std::size_t LimitOf(const Request& req, std::optional<Response>* refused) {
  constexpr std::size_t kDefaultLimit = 100, kMaxLimit = 1000;
  auto text = QueryParam(req.target(), "limit");
  if (!text) return kDefaultLimit;
  const bool digits = !text->empty() && text->find_first_not_of("0123456789") ==
                                            std::string::npos;
  std::uint64_t n = 0;
  auto [end, ec] =
      std::from_chars(text->data(), text->data() + text->size(), n);
  if (!digits || (ec == std::errc() && n == 0)) {
    *refused = Problemed(req, {ProblemType::kBadRequest,
                               "limit must be a whole number from 1 to 1000",
                               std::nullopt, std::nullopt, std::nullopt});
    return 0;
  }
  return ec == std::errc() ? std::min<std::uint64_t>(n, kMaxLimit) : kMaxLimit;
}

}  // namespace

Response Service::ListRejections(const Request& req) {
  std::optional<Response> refused;
  const std::size_t limit = LimitOf(req, &refused);
  if (refused) return std::move(*refused);
  std::string body = "{\"rejections\":[";
  bool first = true;
  for (const Rejection& r : journal_.Recent(limit)) {
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
    body += "}";
  }
  body += "]}\n";
  return Text(req, http::status::ok, std::move(body), "application/json");
}

Response Service::LogLevel(const Request& req) {
  if (req.method() == http::verb::put) {
    if (auto refused = RefuseUnauthorized(req, "")) return std::move(*refused);
    std::string_view wanted = req.body();
    while (!wanted.empty() &&
           std::isspace(static_cast<unsigned char>(wanted.back()))) {
      wanted.remove_suffix(1);
    }
    const auto level = spdlog::level::from_str(std::string(wanted));
    if (wanted != "off" && level == spdlog::level::off) {
      return Problemed(req, {ProblemType::kBadRequest,
                             "the body must be one of trace, debug, info, "
                             "warn, error, critical, off",
                             std::nullopt, std::nullopt, std::nullopt});
    }
    spdlog::set_level(level);
    spdlog::warn("log level set to {}", wanted);
  }
  std::string body = "{\"level\":";
  const auto name = spdlog::level::to_string_view(spdlog::get_level());
  AppendJsonString(&body, std::string_view(name.data(), name.size()));
  body += "}\n";
  return Text(req, http::status::ok, std::move(body), "application/json");
}

Response Service::ListFences(const Request& req) {
  std::optional<Response> refused;
  const std::size_t limit = LimitOf(req, &refused);
  if (refused) return std::move(*refused);
  const std::string prefix = QueryParam(req.target(), "prefix").value_or("");
  const std::string after = QueryParam(req.target(), "after").value_or("");

  fence::FenceList list;
  if (auto error = fences_.List(prefix, after, limit, &list)) {
    metrics_.BackendError();
    return Problemed(req, ProblemFromStorage(error, ""));
  }
  std::string body = "{\"fences\":[";
  for (std::size_t i = 0; i < list.fences.size(); ++i) {
    if (i > 0) body += ",";
    AppendFence(&body, list.fences[i]);
  }
  body += "],\"next\":";
  if (list.next) {
    AppendJsonString(&body, *list.next);
  } else {
    body += "null";
  }
  body += "}\n";
  return Text(req, http::status::ok, std::move(body), "application/json");
}

namespace {

// The lease document; `holder` is null unless the lease is live at `now`.
void AppendLease(std::string* out, const std::string& name,
                 const fence::LeaseTable::Entry& entry, std::int64_t now) {
  const fence::LeaseRecord& lease = entry.record;
  const bool live = fence::IsLive(entry, now);
  *out += "{\"name\":";
  AppendJsonString(out, name);
  *out += ",\"holder\":";
  if (live) {
    AppendJsonString(out, lease.holder);
  } else {
    *out += "null";
  }
  const std::int64_t left_ms =
      live ? (entry.deadline_ns - now + 999999) / 1000000 : 0;
  *out += ",\"token\":" + std::to_string(lease.token) +
          ",\"ttl_ms\":" + std::to_string(lease.ttl_ms) +
          ",\"expires_in_ms\":" + std::to_string(left_ms) + ",\"acquired_at\":";
  AppendJsonString(out, FormatRfc3339(lease.acquired_at_ns));
  *out += ",\"renewed_at\":";
  AppendJsonString(out, FormatRfc3339(lease.renewed_at_ns));
  *out += ",\"transitions\":" + std::to_string(lease.transitions) + "}";
}

Response LeaseDocument(const Request& req, const std::string& name,
                       const fence::LeaseTable::Entry& entry,
                       std::int64_t now) {
  std::string body;
  AppendLease(&body, name, entry, now);
  body += "\n";
  Response res =
      Text(req, http::status::ok, std::move(body), "application/json");
  res.set(kTokenHeader, std::to_string(entry.record.token));
  return res;
}

Response BadLeaseBody(const Request& req, const std::string& name,
                      std::string detail) {
  return Problemed(req, {ProblemType::kBadRequest, std::move(detail), name,
                         std::nullopt, std::nullopt});
}

// A holder ID: 1 to 256 bytes of UTF-8 (checked by the JSON reader)
// without control characters (C0, DEL, C1) or the invisible format
// characters that can disguise text where it is shown or logged (soft
// hyphen, zero-width and bidirectional marks and overrides, line and
// paragraph separators, the byte order mark).
bool IsValidHolder(std::string_view holder) {
  if (holder.empty() || holder.size() > kMaxHolderBytes) return false;
  for (std::size_t i = 0; i < holder.size(); ++i) {
    const auto c = static_cast<unsigned char>(holder[i]);
    if (c < 0x20 || c == 0x7F) return false;
    const auto next = [&](std::size_t k) {
      return i + k < holder.size() ? static_cast<unsigned char>(holder[i + k])
                                   : 0;
    };
    if (c == 0xC2 && (next(1) < 0xA0 || next(1) == 0xAD)) {
      return false;  // U+0080..U+009F, U+00AD
    }
    if (c == 0xE2 && next(1) == 0x80 &&
        ((next(2) >= 0x8B && next(2) <= 0x8F) ||
         (next(2) >= 0xA8 && next(2) <= 0xAE))) {
      return false;  // U+200B..U+200F, U+2028..U+202E
    }
    if (c == 0xE2 && next(1) == 0x81 && next(2) >= 0xA0 && next(2) <= 0xAF) {
      return false;  // U+2060..U+206F
    }
    if (c == 0xEF && next(1) == 0xBB && next(2) == 0xBF) {
      return false;  // U+FEFF
    }
  }
  return true;
}

// Reads a lease body's members: `holder` always, `ttl_ms` when `ttl` is
// given. Returns what is wrong with the body, or an empty string.
std::string ReadLeaseBody(std::string_view body, std::string* holder,
                          std::uint64_t* ttl) {
  std::map<std::string, JsonScalar> members;
  if (std::string error = ParseFlatObject(body, &members, 4); !error.empty()) {
    return "the body must be a JSON object: " + error;
  }
  for (const auto& [name, value] : members) {
    if (name != "holder" && !(ttl && name == "ttl_ms")) {
      return "unknown member \"" + name.substr(0, 64) + "\"";
    }
  }
  auto h = members.find("holder");
  if (h == members.end() || h->second.kind != JsonScalar::Kind::kString ||
      !IsValidHolder(h->second.text)) {
    return "holder must be a string of 1 to 256 bytes of UTF-8 without "
           "control characters";
  }
  *holder = h->second.text;
  if (!ttl) return {};
  auto t = members.find("ttl_ms");
  const std::string_view text =
      t == members.end() ? std::string_view() : t->second.text;
  std::uint64_t n = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), n);
  if (t == members.end() || t->second.kind != JsonScalar::Kind::kNumber ||
      ec != std::errc() || end != text.data() + text.size() || n < kMinTtlMs ||
      n > kMaxTtlMs) {
    return "ttl_ms must be a whole number of milliseconds from 100 to "
           "3600000";
  }
  *ttl = n;
  return {};
}

}  // namespace

void Service::LeaseExpired(const std::string& name,
                           const fence::LeaseRecord& lease) {
  metrics_.LeasesExpired(1);
  LogEvent(spdlog::level::warn, "lease_lost", "lease lost",
           {{"lease", name},
            {"holder", lease.holder},
            {"token", std::to_string(lease.token), true},
            {"transitions", std::to_string(lease.transitions), true},
            {"ttl_ms", std::to_string(lease.ttl_ms), true},
            {"reason", "no renewal within ttl_ms; it ran out"}});
}

Response Service::LeaseFailure(const Request& req, const std::string& name,
                               const fence::WriteOutcome& outcome) {
  if (outcome.lease && outcome.lease->expired) {
    LeaseExpired(name, *outcome.lease->expired);
  }
  Response res = Problemed(req, StorageProblem(outcome.error, name, "lease"));
  if (outcome.error == fence::Errc::kOverloaded) {
    res.set(http::field::retry_after, "1");
  }
  return res;
}

asio::awaitable<fence::WriteOutcome> Service::CommitLease(fence::LeaseOp op) {
  fence::FenceWrite write;
  write.fence = std::string(scopes_.FenceFor(op.name));
  write.lease = std::move(op);
  fence::Committer& committer = shards_.CommitterOf(write.fence);
  co_return co_await storage::AsyncCommit(committer, std::move(write));
}

asio::awaitable<Response> Service::AcquireLease(const Request& req,
                                                const std::string& name) {
  if (auto refused = RefuseUnauthorized(req, name)) {
    co_return std::move(*refused);
  }
  fence::LeaseOp op;
  op.kind = fence::LeaseOp::Kind::kAcquire;
  op.name = name;
  if (std::string error = ReadLeaseBody(req.body(), &op.holder, &op.ttl_ms);
      !error.empty()) {
    co_return BadLeaseBody(req, name, std::move(error));
  }
  const std::string holder = op.holder;
  const fence::WriteOutcome outcome = co_await CommitLease(std::move(op));
  if (outcome.verdict == fence::WriteOutcome::Verdict::kFailed) {
    co_return LeaseFailure(req, name, outcome);
  }
  const fence::LeaseOutcome& lease = *outcome.lease;
  if (lease.expired) LeaseExpired(name, *lease.expired);
  using V = fence::LeaseOutcome::Verdict;
  if (lease.verdict == V::kDenied) {
    metrics_.LeaseDenied();
    Problem problem{ProblemType::kLeaseHeld,
                    lease.blocking_lease.empty()
                        ? "the lease is held by another holder until it is "
                          "released or runs out"
                        : "the lease " + lease.blocking_lease +
                              " shares this lease's fence and is held; one "
                              "live lease per fence",
                    name, std::nullopt, std::nullopt};
    problem.holder = lease.lease.holder;
    problem.expires_in_ms = lease.expires_in_ms;
    co_return Problemed(req, std::move(problem));
  }
  const std::string token = std::to_string(lease.lease.token);
  if (lease.verdict == V::kGranted) {
    // A grant raises a fence as a bump does.
    metrics_.WriteAccepted(outcome.decision.advances);
    metrics_.LeaseGranted();
    using R = fence::LeaseOutcome::GrantReason;
    const char* reason = lease.reason == R::kFirst      ? "first grant"
                         : lease.reason == R::kReleased ? "released"
                         : lease.reason == R::kExpired
                             ? "the previous holder's lease ran out"
                             : "the fence went above the lease's token";
    LogEvent(spdlog::level::info, "lease_granted", "lease granted",
             {{"lease", name},
              {"holder", holder},
              {"token", token, true},
              {"transitions", std::to_string(lease.lease.transitions), true},
              {"ttl_ms", std::to_string(lease.lease.ttl_ms), true},
              {"previous_holder", lease.previous_holder},
              {"reason", reason}});
  } else {
    metrics_.LeaseRenewed();
  }
  fence::LeaseTable::Entry entry;
  entry.record = lease.lease;
  const std::int64_t now = shards_.SteadyNow();
  entry.deadline_ns = now + lease.expires_in_ms * 1000000;
  co_return LeaseDocument(req, name, entry, now);
}

asio::awaitable<Response> Service::ReleaseLease(const Request& req,
                                                const std::string& name) {
  if (auto refused = RefuseWrite(req, name, false)) {
    co_return std::move(*refused);
  }
  fence::LeaseOp op;
  op.kind = fence::LeaseOp::Kind::kRelease;
  op.name = name;
  ReadToken(req, &op.token);
  if (std::string error = ReadLeaseBody(req.body(), &op.holder, nullptr);
      !error.empty()) {
    co_return BadLeaseBody(req, name, std::move(error));
  }
  const std::string holder = op.holder;
  const fence::Token token = op.token;
  const fence::WriteOutcome outcome = co_await CommitLease(std::move(op));
  if (outcome.verdict == fence::WriteOutcome::Verdict::kFailed) {
    co_return LeaseFailure(req, name, outcome);
  }
  if (outcome.lease->expired) LeaseExpired(name, *outcome.lease->expired);
  if (outcome.lease->verdict != fence::LeaseOutcome::Verdict::kReleased) {
    co_return Problemed(
        req, {ProblemType::kLeaseNotHeld,
              "only the live lease's holder can release it, with its token",
              name, token, std::nullopt});
  }
  metrics_.LeaseReleased();
  LogEvent(
      spdlog::level::info, "lease_released", "lease released",
      {{"lease", name},
       {"holder", holder},
       {"token", std::to_string(token), true},
       {"generation", std::to_string(outcome.lease->lease.transitions), true},
       {"reason", "released by its holder"}});
  Response res(http::status::no_content, req.version());
  co_return res;
}

Response Service::GetLease(const Request& req, const std::string& name) {
  fence::LeaseTable& table = shards_.LeasesOf(scopes_.FenceFor(name));
  const std::int64_t now = shards_.SteadyNow();
  if (auto expired = table.NoticeExpired(name, now)) {
    LeaseExpired(name, *expired);
  }
  const auto entry = table.Find(name);
  if (!entry) {
    return Problemed(
        req, {ProblemType::kNotFound, "this lease was never granted", name,
              std::nullopt, std::nullopt});
  }
  return LeaseDocument(req, name, *entry, now);
}

Response Service::ListLeases(const Request& req) {
  std::optional<Response> refused;
  const std::size_t limit = LimitOf(req, &refused);
  if (refused) return std::move(*refused);
  const std::string prefix = QueryParam(req.target(), "prefix").value_or("");
  const std::string after = QueryParam(req.target(), "after").value_or("");
  const std::int64_t now = shards_.SteadyNow();
  std::vector<std::pair<std::string, fence::LeaseTable::Entry>> leases;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    fence::LeaseTable& table = shards_.env(i).lease_table();
    for (const auto& [expired_name, lease] : table.NoticeExpired(now)) {
      LeaseExpired(expired_name, lease);
    }
    auto part = table.List(prefix, after, limit + 1);
    std::move(part.begin(), part.end(), std::back_inserter(leases));
  }
  std::sort(leases.begin(), leases.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::optional<std::string> next;
  if (leases.size() > limit) {
    leases.resize(limit);
    next = leases.back().first;
  }
  std::string body = "{\"leases\":[";
  for (std::size_t i = 0; i < leases.size(); ++i) {
    if (i > 0) body += ",";
    AppendLease(&body, leases[i].first, leases[i].second, now);
  }
  body += "],\"next\":";
  if (next) {
    AppendJsonString(&body, *next);
  } else {
    body += "null";
  }
  body += "}\n";
  return Text(req, http::status::ok, std::move(body), "application/json");
}

std::string Service::CheckLeases() const {
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    for (const auto& [name, entry] : shards_.env(i).lease_table().List(
             "", "", std::numeric_limits<std::size_t>::max())) {
      const std::string_view fence = scopes_.FenceFor(name);
      if (fence != entry.record.fence || shards_.IndexOf(fence) != i) {
        return "the lease " + name + " was granted under the fence " +
               entry.record.fence + ", but with these --fence-scope settings " +
               "its fence is " + std::string(fence) +
               "; start with the scopes it was granted under";
      }
    }
  }
  return {};
}

namespace {

constexpr std::size_t kMaxBatchOps = 1000;

// A batch body's ops as fence writes (SPEC "Batches"); an empty string, or
// the 400's detail and the offending key (if any).
struct BatchOps {
  std::vector<fence::FenceWrite> writes;
  std::string error;
  std::string key;
  bool bad_key = false;  // the error is the key's (bad-key), not the op's
};

BatchOps ReadBatch(std::string_view body, fence::Token token, bool observe,
                   const fence::Scopes& scopes) {
  BatchOps out;
  JsonValue doc;
  if (std::string e = ParseJson(body, &doc, {4, kMaxBatchOps, 8}); !e.empty()) {
    out.error = "the body must be {\"ops\": [...]} in JSON: " + e;
    return out;
  }
  const JsonValue* ops =
      doc.kind == JsonValue::Kind::kObject && doc.members.size() == 1
          ? doc.Find("ops")
          : nullptr;
  if (ops == nullptr || ops->kind != JsonValue::Kind::kArray ||
      ops->items.empty()) {
    out.error = "the body must be {\"ops\": [...]} with 1 to 1000 ops";
    return out;
  }
  std::set<std::string_view> keys;
  for (std::size_t i = 0; i < ops->items.size(); ++i) {
    const JsonValue& op = ops->items[i];
    const std::string at = "op " + std::to_string(i) + ": ";
    const JsonValue* kind = op.Find("op");
    const JsonValue* key = op.Find("key");
    const JsonValue* value = op.Find("value");
    const bool put =
        kind && kind->kind == JsonValue::Kind::kString && kind->text == "put";
    const bool del = kind && kind->kind == JsonValue::Kind::kString &&
                     kind->text == "delete";
    if (op.kind != JsonValue::Kind::kObject || !(put || del) || !key ||
        key->kind != JsonValue::Kind::kString ||
        op.members.size() != (put ? 3u : 2u) || (put && !value) ||
        (value && value->kind != JsonValue::Kind::kString)) {
      out.error = at +
                  "each op is {\"op\": \"put\", \"key\": K, \"value\": "
                  "base64} or {\"op\": \"delete\", \"key\": K}";
      return out;
    }
    if (fence::KeyError e = fence::ValidateKey(key->text);
        e != fence::KeyError::kOk) {
      out.error = at + std::string(fence::Describe(e));
      out.key = key->text.substr(0, fence::kMaxNameBytes);
      out.bad_key = true;
      return out;
    }
    if (!keys.insert(key->text).second) {
      out.error = at + "a key appears twice in the batch";
      out.key = key->text;
      return out;
    }
    fence::FenceWrite& write = out.writes.emplace_back();
    write.fence = std::string(scopes.FenceFor(key->text));
    write.token = token;
    write.observe = observe;
    write.value = fence::ValueOp{
        put ? fence::ValueOp::Kind::kPut : fence::ValueOp::Kind::kDelete,
        key->text, ""};
    if (put && !DecodeBase64(value->text, &write.value->body)) {
      out.error = at + "value is not standard, padded base64";
      out.key = key->text;
      return out;
    }
  }
  return out;
}

}  // namespace

asio::awaitable<Response> Service::Batch(const Request& req,
                                         const std::string& client) {
  if (!backend_.supports_batches()) {
    // A directory or a legacy store cannot apply several writes at once.
    Response res = Problemed(
        req, {ProblemType::kMethodNotAllowed,
              "batches need the lmdb backend, which applies them atomically",
              std::nullopt, std::nullopt, std::nullopt});
    res.set(http::field::allow, "");
    co_return res;
  }
  if (auto refused = RefuseWrite(req, "", false)) co_return std::move(*refused);
  fence::Token token = 0;
  ReadToken(req, &token);
  BatchOps ops =
      ReadBatch(req.body(), token, config_.mode == Mode::kObserve, scopes_);
  if (!ops.error.empty()) {
    co_return Problemed(
        req,
        {ops.key.empty() ? ProblemType::kBadRequest : ProblemType::kBadKey,
         ops.error, ops.key.empty() ? std::nullopt : std::optional(ops.key),
         std::nullopt, std::nullopt});
  }
  const std::size_t shard = shards_.IndexOf(ops.writes.front().fence);
  for (const fence::FenceWrite& w : ops.writes) {
    if (shards_.IndexOf(w.fence) != shard) {
      co_return Problemed(req,
                          {ProblemType::kBadRequest,
                           "the batch's fences live in different LMDB shards "
                           "(--lmdb-shards), which cannot commit together",
                           w.value->key, std::nullopt, std::nullopt});
    }
  }
  fence::FenceWrite batch;
  batch.batch = std::move(ops.writes);
  std::vector<std::string> keys;
  std::vector<bool> deletes;
  for (const fence::FenceWrite& w : batch.batch) {
    keys.push_back(w.value->key);
    deletes.push_back(w.value->kind == fence::ValueOp::Kind::kDelete);
  }
  const fence::WriteOutcome outcome =
      co_await storage::AsyncCommit(shards_.committer(shard), std::move(batch));

  using Verdict = fence::WriteOutcome::Verdict;
  if (outcome.verdict == Verdict::kRejected) {
    const std::size_t at = outcome.batch.size() - 1;
    const fence::WriteOutcome& stale = outcome.batch.back();
    co_return RefuseStale(req, keys[at],
                          std::string(scopes_.FenceFor(keys[at])), token,
                          stale.current, client, "stale_batch_rejected");
  }
  if (outcome.verdict == Verdict::kFailed) {
    const std::string& key =
        outcome.batch.empty() ? keys.front() : keys[outcome.batch.size() - 1];
    Response res = Problemed(req, StorageProblem(outcome.error, key, "batch"));
    if (outcome.error == fence::Errc::kOverloaded) {
      res.set(http::field::retry_after, "1");
    }
    co_return res;
  }
  std::string body = "{\"results\":[";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const fence::WriteOutcome& one = outcome.batch[i];
    if (one.verdict == Verdict::kObserved) {
      metrics_.WouldReject();
    } else {
      metrics_.WriteAccepted(one.decision.advances);
    }
    const int status = deletes[i] ? 204 : one.created ? 201 : 200;
    if (i > 0) body += ",";
    body += "{\"key\":";
    AppendJsonString(&body, keys[i]);
    body += ",\"status\":" + std::to_string(status) + "}";
  }
  body += "]}\n";
  Response res =
      Text(req, http::status::ok, std::move(body), "application/json");
  res.set(kTokenHeader, std::to_string(token));
  co_return res;
}

}  // namespace fencepost::proxy
