#include "proxy/effects.h"

#include <spdlog/spdlog.h>

#include <boost/asio/ssl/context.hpp>

#include "fence/errc.h"
#include "fence/key.h"
#include "fence/rules.h"
#include "proxy/logging.h"
#include "proxy/route_context.h"
#include "proxy/routes.h"
#include "sigv4/crypto.h"
#include "storage/async_commit.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;
using fence::EffectRecord;
using fence::EffectVerdict;
using routes::Problemed;
using Verdict = fence::WriteOutcome::Verdict;

namespace {

constexpr std::string_view kFenceKeyHeader = "Fence-Key";
constexpr std::string_view kIdempotencyKeyHeader = "Idempotency-Key";
constexpr std::string_view kReplayedHeader = "Effect-Replayed";

std::int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The one value of header `name`: nullopt when absent; sets *twice when it
// came more than once.
std::optional<std::string> OneHeader(const Request& req, std::string_view name,
                                     bool* twice) {
  const auto [first, last] = req.equal_range(name);
  if (first == last) return std::nullopt;
  if (std::next(first) != last) *twice = true;
  return std::string(first->value());
}

// The target's answer as `record` keeps it: its status, Content-Type and
// body, and whether it is a replay.
Response Relay(const Request& req, const EffectRecord& record, bool replayed) {
  Response res{static_cast<http::status>(record.status), req.version()};
  if (!record.content_type.empty()) {
    res.set(http::field::content_type, record.content_type);
  }
  res.set(kReplayedHeader, replayed ? "true" : "false");
  res.body() = record.body;
  res.prepare_payload();
  return res;
}

Problem EffectProblem(fence::EffectRecord::State state, bool here,
                      ProblemType type, std::string detail,
                      const std::string& target, const std::string& id) {
  Problem problem(type, std::move(detail));
  problem.fields = {
      {"target", target},
      {"idempotency_key", id},
      {"state", std::string(fence::EffectStateName(state, here))}};
  return problem;
}

}  // namespace

Effects::Effects(boost::asio::io_context& io, RouteContext& context,
                 storage::Backend& records)
    : io_(io), context_(context), records_(records), sweep_timer_(io) {
  const Config& config = context.config();
  for (const EffectTargetConfig& target : config.effect_targets) {
    storage::HttpPool::Options options;
    options.host = target.spec.host;
    options.port = target.spec.port;
    options.timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(config.upstream_timeout * 1000));
    options.max_body = config.max_body;
    if (target.spec.tls) {
      if (!tls_) tls_ = storage::MakeClientTls(config.upstream_tls_ca);
      options.tls = tls_.get();
    }
    targets_.push_back(
        {target, std::make_unique<storage::HttpPool>(io, std::move(options))});
    context.metrics().AddEffectTarget(target.name);
  }
}

Effects::~Effects() = default;

std::optional<Response> Effects::Parse(const Request& req, Ask* ask) {
  std::string_view rest = req.target();
  rest.remove_prefix(kEffectsPath.size() + 1);
  const std::size_t end = rest.find_first_of("/?");
  const std::string_view name = rest.substr(0, end);
  for (const Target& target : targets_) {
    if (target.config.name == name) ask->target = &target;
  }
  if (ask->target == nullptr) {
    return Problemed(
        req, {ProblemType::kNotFound,
              "no --effect-target is named '" + std::string(name) + "'"});
  }
  ask->rest_and_query = std::string(rest.substr(name.size()));
  if (!fence::StaysUnderTarget(routes::PathOf(ask->rest_and_query))) {
    return Problemed(req, {ProblemType::kBadRequest,
                           "the path after the target's name has a \".\" "
                           "or \"..\" segment: a call stays under its "
                           "target's URL"});
  }
  bool twice = false;
  std::optional<std::string> fence_key =
      OneHeader(req, kFenceKeyHeader, &twice);
  std::optional<std::string> id = OneHeader(req, kIdempotencyKeyHeader, &twice);
  if (twice) {
    return Problemed(req, {ProblemType::kBadRequest,
                           "Fence-Key and Idempotency-Key are sent once each"});
  }
  if (!fence_key || !id) {
    return Problemed(req, {ProblemType::kMissingEffectHeader,
                           "an effect needs Fence-Key (the key whose fence "
                           "guards it) and Idempotency-Key"});
  }
  if (fence::ValidateKey(*fence_key) != fence::KeyError::kOk) {
    return Problemed(
        req, {ProblemType::kBadKey, "Fence-Key is not a key", *fence_key});
  }
  if (!fence::IsIdempotencyKey(*id)) {
    return Problemed(req, {ProblemType::kBadRequest,
                           "Idempotency-Key must be 1 to 255 visible ASCII "
                           "characters"});
  }
  routes::ReadToken(req, &ask->token);
  ask->id = std::move(*id);
  ask->fence_key = std::move(*fence_key);
  ask->fence = std::string(context_.scopes().FenceFor(ask->fence_key));
  ask->record_key = fence::EffectRecordKey(name, ask->id);
  const std::string_view sent = ask->rest_and_query;
  const std::size_t query = sent.find('?');
  ask->hash = sigv4::HexSha256(fence::EffectRequestText(
      req.method_string(), ask->fence_key, sent.substr(0, query),
      query == std::string_view::npos ? std::string_view()
                                      : sent.substr(query + 1),
      req.body()));
  return std::nullopt;
}

Awaitable<Response> Effects::Call(const Request& req,
                                  const std::string& client) {
  Ask ask;
  if (std::optional<Response> refused = Parse(req, &ask)) {
    co_return std::move(*refused);
  }
  std::optional<Problem> unconfirmed =
      co_await context_.AdmitElected(ask.fence, ask.token, ask.fence_key);
  if (unconfirmed) co_return Problemed(req, std::move(*unconfirmed));
  if (const auto it = busy_.find(ask.record_key); it != busy_.end()) {
    const bool same = it->second == ask.hash;
    co_return Problemed(
        req, EffectProblem(EffectRecord::State::kInFlight, true,
                           same ? ProblemType::kEffectInProgress
                                : ProblemType::kIdempotencyKeyReused,
                           same ? "the call is in flight"
                                : "the Idempotency-Key is in use by another "
                                  "request",
                           ask.target->config.name, ask.id));
  }
  busy_.emplace(ask.record_key, ask.hash);
  struct Release {
    std::map<std::string, std::string, std::less<>>& busy;
    const std::string& key;
    ~Release() { busy.erase(key); }
  } release{busy_, ask.record_key};
  // Another replica may begin the same record between the read and the
  // commit: the commit's precondition fails, and the record is read again.
  for (int attempt = 0;; ++attempt) {
    const Stored stored = co_await Read(ask.record_key, ask.fence);
    if (stored.error) {
      co_return Problemed(req, context_.StorageFailure(
                                   stored.error, ask.fence_key, "effect read"));
    }
    const EffectVerdict verdict = fence::DecideEffect(
        stored.record ? &*stored.record : nullptr, ask.hash, false);
    if (verdict != EffectVerdict::kSend || attempt == 3) {
      co_return co_await Answer(req, ask, client, stored, verdict);
    }
    std::optional<Response> sent = co_await Send(req, ask, client, stored);
    if (sent) co_return std::move(*sent);
  }
}

Awaitable<Effects::Stored> Effects::Read(const std::string& record_key,
                                         const std::string& fence) {
  storage::ReadRequest request;
  request.key = record_key;
  request.fence = fence;
  const storage::ReadResult read = co_await records_.Read(request);
  Stored out;
  out.error = read.error;
  if (read.error || !read.found) co_return out;
  EffectRecord record;
  if (!fence::DecodeEffect(read.body, &record)) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  out.record = std::move(record);
  out.etag = read.etag;
  co_return out;
}

Awaitable<fence::WriteOutcome> Effects::Put(const std::string& record_key,
                                            const EffectRecord& next,
                                            std::optional<fence::Token> token,
                                            const std::string& etag) {
  fence::FencedWrite write;
  write.fence = next.fence;
  write.token = token;
  write.observe = !token.has_value();
  write.value = fence::ValueOp{fence::ValueOp::Kind::kPut, record_key,
                               fence::EncodeEffect(next), ""};
  if (etag.empty()) {
    write.precondition.has_none_match = true;
    write.precondition.none_match_any = true;
  } else {
    write.precondition.has_match = true;
    write.precondition.match.push_back(etag);
  }
  co_return co_await storage::AsyncCommit(context_.fences(), std::move(write));
}

Awaitable<Response> Effects::Answer(const Request& req, const Ask& ask,
                                    const std::string& client,
                                    const Stored& stored,
                                    EffectVerdict verdict) {
  // The token first: a stale one learns nothing of the record.
  const storage::Fences::Read fence = co_await context_.fences().Get(ask.fence);
  if (fence.error) {
    co_return Problemed(req, context_.StorageFailure(fence.error, ask.fence_key,
                                                     "effect read"));
  }
  if (fence.fence && ask.token < fence.fence->token) {
    co_return Stale(req, ask, client, fence.fence->token);
  }
  const std::string& name = ask.target->config.name;
  if (!stored.record) {  // begun and forgotten by others, three times over
    co_return Problemed(
        req,
        EffectProblem(EffectRecord::State::kInFlight, false,
                      ProblemType::kEffectInProgress,
                      "the call is being decided elsewhere", name, ask.id));
  }
  const EffectRecord& record = *stored.record;
  switch (verdict) {
    case EffectVerdict::kReplay: {
      Tell(ask, "replayed");
      co_return Relay(req, record, true);
    }
    case EffectVerdict::kKeyReused:
      co_return Problemed(
          req,
          EffectProblem(record.state, false, ProblemType::kIdempotencyKeyReused,
                        "the Idempotency-Key was used for another request "
                        "(another method, Fence-Key, path, query or body)",
                        name, ask.id));
    case EffectVerdict::kSend:  // sent three times over by other replicas
    case EffectVerdict::kInProgress:
      co_return Problemed(
          req,
          EffectProblem(record.state, false, ProblemType::kEffectInProgress,
                        "the call is in flight", name, ask.id));
    case EffectVerdict::kOutcomeUnknown:
      break;
  }
  co_return Problemed(
      req,
      EffectProblem(record.state, false, ProblemType::kEffectOutcomeUnknown,
                    "the call was sent and its outcome is not known; "
                    "fencepost never sends it again: check with the "
                    "target, then DELETE /v1/effects/" +
                        name + "/ID on the admin port to forget it",
                    name, ask.id));
}

Awaitable<std::optional<Response>> Effects::Send(const Request& req,
                                                 const Ask& ask,
                                                 const std::string& client,
                                                 const Stored& stored) {
  EffectRecord record;
  record.state = EffectRecord::State::kInFlight;
  record.fence = ask.fence;
  record.token = ask.token;
  record.request_hash = ask.hash;
  record.created_at_ns = UnixNowNs();
  const fence::WriteOutcome begun =
      co_await Put(ask.record_key, record, ask.token, stored.etag);
  switch (begun.verdict) {
    case Verdict::kAccepted:
      context_.Accepted(begun);
      co_return co_await Deliver(req, ask, std::move(record), begun.etag);
    case Verdict::kRejected:
    case Verdict::kObserved:
      co_return Stale(req, ask, client, begun.current);
    case Verdict::kPreconditionFailed:
      co_return std::nullopt;
    case Verdict::kFailed:
      break;
  }
  co_return Problemed(
      req, context_.StorageFailure(begun.error, ask.fence_key, "effect record",
                                   0, context_.fences().last_error()));
}

Awaitable<Response> Effects::Deliver(const Request& req, const Ask& ask,
                                     EffectRecord record,
                                     const std::string& etag) {
  const EffectTargetConfig& target = ask.target->config;
  std::string path = target.spec.base + ask.rest_and_query;
  if (path.empty() || path.front() != '/') path.insert(0, "/");
  Request out{req.method(), path, 11};
  out.set(http::field::host,
          target.spec.host.find(':') == std::string::npos
              ? target.spec.host + ":" + target.spec.port
              : "[" + target.spec.host + "]:" + target.spec.port);
  if (auto type = req.find(http::field::content_type); type != req.end()) {
    out.set(http::field::content_type, type->value());
  }
  out.set(kIdempotencyKeyHeader, ask.id);
  out.set(routes::kTokenHeader, std::to_string(ask.token));
  out.body() = req.body();
  out.prepare_payload();
  const storage::HttpPool::Exchange exchange =
      co_await ask.target->pool->RoundTrip(out,
                                           storage::HttpPool::Resend::kNever);
  using Sent = storage::HttpPool::Sent;
  record.state = exchange.sent == Sent::kAnswered ? EffectRecord::State::kDone
                 : exchange.sent == Sent::kNotSent
                     ? EffectRecord::State::kNotSent
                     : EffectRecord::State::kUnknown;
  if (exchange.sent == Sent::kAnswered) {
    record.status = exchange.response.result_int();
    if (auto type = exchange.response.find(http::field::content_type);
        type != exchange.response.end()) {
      record.content_type = std::string(type->value());
    }
    record.body = exchange.response.body();
  }
  const fence::WriteOutcome ended =
      co_await Put(ask.record_key, record, std::nullopt, etag);
  co_return Outcome(req, ask, record, exchange, ended);
}

Response Effects::Outcome(const Request& req, const Ask& ask,
                          const EffectRecord& record,
                          const storage::HttpPool::Exchange& exchange,
                          const fence::WriteOutcome& ended) {
  const std::string& name = ask.target->config.name;
  const std::string status = std::to_string(record.status);
  if (!fence::Applied(ended)) {
    // The record stays in flight: a repeat is told the outcome is unknown.
    Tell(ask, "unknown");
    return Problemed(
        req, context_.StorageFailure(
                 ended.error ? ended.error
                             : std::make_error_code(std::errc::io_error),
                 ask.fence_key, "effect outcome", 0,
                 record.state == EffectRecord::State::kDone
                     ? "the target answered " + status +
                           ", and the answer could not be recorded"
                     : "the call's outcome could not be recorded"));
  }
  switch (record.state) {
    case EffectRecord::State::kDone: {
      Tell(ask, "sent");
      return Relay(req, record, false);
    }
    case EffectRecord::State::kNotSent:
      Tell(ask, "not_sent");
      LogEvent(spdlog::level::warn, "effect_not_sent",
               "an effect's call could not be sent",
               {{"target", name},
                {"idempotency_key", ask.id},
                {"error", exchange.error}});
      return Problemed(req, {ProblemType::kUpstreamFailed,
                             "the call could not be sent to '" + name + "' (" +
                                 exchange.error +
                                 "); nothing reached it, and a repeat sends "
                                 "it"});
    case EffectRecord::State::kInFlight:
    case EffectRecord::State::kUnknown:
      break;
  }
  Tell(ask, "unknown");
  LogEvent(spdlog::level::warn, "effect_outcome_unknown",
           "an effect's call was sent and no answer came",
           {{"target", name},
            {"idempotency_key", ask.id},
            {"fence", ask.fence},
            {"token", std::to_string(ask.token), true},
            {"error", exchange.error}});
  return Problemed(
      req, EffectProblem(record.state, false, ProblemType::kOutcomeUnknown,
                         "the call was sent to '" + name +
                             "' and no answer came (" + exchange.error +
                             "); it is never sent again by fencepost",
                         name, ask.id));
}

Response Effects::Stale(const Request& req, const Ask& ask,
                        const std::string& client,
                        std::optional<fence::Token> current) {
  Tell(ask, "stale");
  return Problemed(
      req, context_.RefuseStale({req.method_string(), req.body(), client},
                                ask.fence_key, ask.fence, ask.token, current,
                                "stale_effect_rejected"));
}

void Effects::Tell(const Ask& ask, std::string_view outcome) {
  const std::string& name = ask.target->config.name;
  context_.metrics().Effect(name, outcome);
  std::string data = "{\"target\":";
  AppendJsonString(&data, name);
  data += ",\"idempotency_key\":";
  AppendJsonString(&data, ask.id);
  data += ",\"outcome\":";
  AppendJsonString(&data, outcome);
  data += ",\"fence\":";
  AppendJsonString(&data, ask.fence);
  data += ",\"token\":" + std::to_string(ask.token) + ",\"at\":";
  AppendJsonString(&data, FormatRfc3339(UnixNowNs()));
  data += "}";
  context_.watches().Publish("effect", ask.fence_key, std::move(data));
}

}  // namespace fencepost::proxy
