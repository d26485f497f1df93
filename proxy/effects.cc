#include "proxy/effects.h"

#include <spdlog/spdlog.h>

#include <boost/asio/ssl/context.hpp>
#include <limits>

#include "fence/errc.h"
#include "fence/key.h"
#include "fence/lease.h"
#include "fence/rules.h"
#include "proxy/logging.h"
#include "proxy/route_context.h"
#include "proxy/routes.h"
#include "sigv4/crypto.h"
#include "storage/async_commit.h"
#include "storage/errc.h"

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

}  // namespace

Problem Effects::EffectProblem(ProblemType type, std::string detail,
                               const std::string& target, const std::string& id,
                               std::string_view state) {
  Problem problem(type, std::move(detail));
  problem.fields = {{"target", target},
                    {"idempotency_key", id},
                    {"state", std::string(state)}};
  return problem;
}

Effects::Effects(boost::asio::io_context& io, RouteContext& context,
                 storage::Backend& records,
                 std::chrono::milliseconds hold_at_start)
    : io_(io),
      context_(context),
      records_(records),
      sweep_timer_(io),
      all_held_until_(std::chrono::steady_clock::now() + hold_at_start),
      settle_(
          static_cast<std::int64_t>(context.config().upstream_settle * 1000)),
      // Connecting, then sending and reading: each within the timeout.
      on_its_way_(2 * static_cast<std::int64_t>(
                          context.config().upstream_timeout * 1000) +
                  settle_.count()) {
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
  // The token first: a stale one learns nothing of the calls.
  std::optional<Response> stale = co_await RefuseStale(req, ask, client);
  if (stale) co_return std::move(*stale);
  if (const auto it = busy_.find(ask.record_key); it != busy_.end()) {
    const bool same = it->second == ask.hash;
    co_return Problemed(
        req, EffectProblem(same ? ProblemType::kEffectInProgress
                                : ProblemType::kIdempotencyKeyReused,
                           same ? "the call is in flight"
                                : "the Idempotency-Key is in use by another "
                                  "request",
                           ask.target->config.name, ask.id, "in-flight"));
  }
  busy_.emplace(ask.record_key, ask.hash);
  struct Release {
    std::map<std::string, std::string, std::less<>>& busy;
    const std::string& key;
    ~Release() { busy.erase(key); }
  } release{busy_, ask.record_key};
  co_return co_await Decide(req, ask, client);
}

Awaitable<std::optional<Response>> Effects::RefuseStale(
    const Request& req, const Ask& ask, const std::string& client) {
  const storage::Fences::Read fence = co_await context_.fences().Get(ask.fence);
  if (fence.error) {
    co_return Problemed(req, context_.StorageFailure(fence.error, ask.fence_key,
                                                     "effect read"));
  }
  if (fence.fence && ask.token < fence.fence->token) {
    co_return Stale(req, ask, client, fence.fence->token);
  }
  co_return std::nullopt;
}

Awaitable<Response> Effects::Decide(const Request& req, const Ask& ask,
                                    const std::string& client) {
  // A call to send waits for its fence's turn, then is decided again on the
  // record as it is then; another replica may also begin the same record
  // between the read and the commit: the commit's precondition fails, and
  // the record is read again.
  std::optional<storage::FenceLocks::Guard> turn;
  for (int attempt = 0;; ++attempt) {
    const Stored stored = co_await Read(ask.record_key, ask.fence);
    if (stored.error) {
      co_return Problemed(req, context_.StorageFailure(
                                   stored.error, ask.fence_key, "effect read"));
    }
    const EffectVerdict verdict =
        fence::DecideEffect(stored.record ? &*stored.record : nullptr, ask.hash,
                            false, RecordClock());
    if (verdict != EffectVerdict::kSend || attempt == 4) {
      co_return Answer(req, ask, stored, verdict);
    }
    if (const int held = HeldSeconds(ask.fence); held > 0) {
      co_return Problemed(
          req, context_.StorageFailure(storage::Errc::kFenceHeld, ask.fence_key,
                                       "effect", held));
    }
    if (!turn) {
      storage::FenceLocks::Guard acquired = co_await locks_.Acquire(ask.fence);
      turn.emplace(std::move(acquired));
      // The fence may have moved while the call waited: the token first
      // again, then the record, decided again in the turn.
      std::optional<Response> stale = co_await RefuseStale(req, ask, client);
      if (stale) co_return std::move(*stale);
      continue;
    }
    std::optional<Response> sent = co_await Send(req, ask, client, stored);
    if (sent) co_return std::move(*sent);
  }
}

std::int64_t Effects::RecordClock() const {
  return context_.config().etcd ? fence::WallNowNs()
                                : std::numeric_limits<std::int64_t>::max();
}

int Effects::HeldSeconds(const std::string& fence) const {
  auto until = all_held_until_;
  if (const auto it = held_until_.find(fence); it != held_until_.end()) {
    until = std::max(until, it->second);
  }
  const auto now = std::chrono::steady_clock::now();
  if (until <= now) return 0;
  return fence::HeldSeconds(
      0, std::chrono::duration_cast<std::chrono::nanoseconds>(until - now)
             .count());
}

std::chrono::milliseconds Effects::HoldLeft() const {
  auto until = all_held_until_;
  for (const auto& [fence, held] : held_until_) until = std::max(until, held);
  const auto now = std::chrono::steady_clock::now();
  return until <= now
             ? std::chrono::milliseconds(0)
             : std::chrono::ceil<std::chrono::milliseconds>(until - now);
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

fence::FencedWrite Effects::RecordWrite(const std::string& record_key,
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
  return write;
}

Response Effects::Answer(const Request& req, const Ask& ask,
                         const Stored& stored, EffectVerdict verdict) {
  const std::string& name = ask.target->config.name;
  if (!stored.record) {  // begun and forgotten by others, three times over
    return Problemed(req, EffectProblem(ProblemType::kEffectInProgress,
                                        "the call is being decided elsewhere",
                                        name, ask.id, "in-flight"));
  }
  const EffectRecord& record = *stored.record;
  const std::string_view state =
      fence::EffectStateName(record, false, RecordClock());
  switch (verdict) {
    case EffectVerdict::kReplay: {
      Tell(ask, "replayed");
      return Relay(req, record, true);
    }
    case EffectVerdict::kKeyReused:
      return Problemed(
          req, EffectProblem(ProblemType::kIdempotencyKeyReused,
                             "the Idempotency-Key was used for another request "
                             "(another method, Fence-Key, path, query or body)",
                             name, ask.id, state));
    case EffectVerdict::kSend:  // sent three times over by other replicas
    case EffectVerdict::kInProgress:
      return Problemed(
          req, EffectProblem(ProblemType::kEffectInProgress,
                             "the call is in flight", name, ask.id, state));
    case EffectVerdict::kOutcomeUnknown:
      break;
  }
  return Problemed(
      req, EffectProblem(ProblemType::kEffectOutcomeUnknown,
                         "the call was sent and its outcome is not known; "
                         "fencepost never sends it again: check with the "
                         "target, then DELETE /v1/effects/" +
                             name + "/ID on the admin port to forget it",
                         name, ask.id, state));
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
  record.created_at_ns = fence::WallNowNs();
  record.deadline_ns =
      record.created_at_ns +
      std::chrono::duration_cast<std::chrono::nanoseconds>(on_its_way_).count();
  fence::FencedWrite write =
      RecordWrite(ask.record_key, record, ask.token, stored.etag);
  std::pair<fence::WriteOutcome, storage::Fences::Turn> begun =
      co_await context_.fences().CommitInTurn(std::move(write));
  const fence::WriteOutcome& outcome = begun.first;
  if (outcome.verdict == Verdict::kAccepted) {
    context_.Accepted(outcome);
    co_return co_await Deliver(req, ask, std::move(record), outcome.etag,
                               std::move(begun.second));
  }
  context_.fences().EndTurn(std::move(begun.second),
                            std::chrono::milliseconds(0));
  switch (outcome.verdict) {
    case Verdict::kRejected:
    case Verdict::kObserved:
      co_return Stale(req, ask, client, outcome.current);
    case Verdict::kPreconditionFailed:
      co_return std::nullopt;
    case Verdict::kAccepted:
    case Verdict::kFailed:
      break;
  }
  co_return Problemed(req, context_.StorageFailure(
                               outcome.error, ask.fence_key, "effect record", 1,
                               context_.fences().last_error()));
}

Awaitable<Response> Effects::Deliver(const Request& req, const Ask& ask,
                                     EffectRecord record,
                                     const std::string& etag,
                                     storage::Fences::Turn turn) {
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
  fence::FencedWrite write =
      RecordWrite(ask.record_key, record, std::nullopt, etag);
  const fence::WriteOutcome ended =
      co_await storage::AsyncCommit(context_.fences(), std::move(write));
  // A call that may still land holds the fence closed for the settle time,
  // here and among replicas, so no later call of the fence overtakes it.
  const bool may_land = record.state != EffectRecord::State::kDone &&
                        record.state != EffectRecord::State::kNotSent;
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(held_until_,
                [&](const auto& held) { return held.second <= now; });
  if (may_land) held_until_[ask.fence] = now + settle_;
  context_.fences().EndTurn(std::move(turn),
                            may_land ? settle_ : std::chrono::milliseconds(0));
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
  return Problemed(req,
                   EffectProblem(ProblemType::kOutcomeUnknown,
                                 "the call was sent to '" + name +
                                     "' and no answer came (" + exchange.error +
                                     "); it is never sent again by fencepost",
                                 name, ask.id, "unknown"));
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
  AppendJsonString(&data, FormatRfc3339(fence::WallNowNs()));
  data += "}";
  context_.watches().Publish("effect", ask.fence_key, std::move(data));
}

}  // namespace fencepost::proxy
