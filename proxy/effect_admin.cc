// The admin side of fenced side effects (proxy/effects.h): the records'
// listing, an explicit forget, and the retention sweep.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iterator>

#include "codec/percent.h"
#include "proxy/effects.h"
#include "proxy/logging.h"
#include "proxy/route_context.h"
#include "proxy/routes.h"
#include "storage/async_commit.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;
using fence::EffectRecord;
using routes::Problemed;
using Verdict = fence::WriteOutcome::Verdict;

namespace {

constexpr std::string_view kStates[] = {"in-flight", "done", "unknown",
                                        "not-sent"};

void AppendRecord(std::string* out, const std::string& target,
                  const std::string& id, const EffectRecord& record,
                  std::string_view state) {
  *out += "{\"target\":";
  AppendJsonString(out, target);
  *out += ",\"idempotency_key\":";
  AppendJsonString(out, id);
  *out += ",\"state\":";
  AppendJsonString(out, state);
  *out += ",\"fence\":";
  AppendJsonString(out, record.fence);
  *out += ",\"token\":" + std::to_string(record.token) + ",\"created_at\":";
  AppendJsonString(out, FormatRfc3339(record.created_at_ns));
  *out += ",\"status\":" + std::to_string(record.status) + "}";
}

}  // namespace

Awaitable<Response> Effects::List(const Request& req) {
  std::optional<Response> refused;
  const std::size_t limit = routes::LimitOf(req, &refused);
  if (refused) co_return std::move(*refused);
  const std::string target =
      routes::QueryParam(req.target(), "target").value_or("");
  const std::string state =
      routes::QueryParam(req.target(), "state").value_or("");
  if (!state.empty() && std::find(std::begin(kStates), std::end(kStates),
                                  state) == std::end(kStates)) {
    co_return Problemed(req, {ProblemType::kBadRequest,
                              "state must be in-flight, done, unknown or "
                              "not-sent"});
  }
  const std::string prefix = std::string(fence::kEffectRecordPrefix) +
                             (target.empty() ? "" : target + "/");
  std::string after = routes::QueryParam(req.target(), "after").value_or("");
  if (!after.empty()) after = fence::kEffectRecordPrefix.data() + after;
  const storage::Backend::KeyPage page =
      co_await records_.ListKeys(prefix, after, limit);
  if (page.error) {
    co_return Problemed(
        req, context_.StorageFailure(page.error, "", "effect listing"));
  }
  std::string body = "{\"effects\":[";
  bool first = true;
  for (const std::string& key : page.keys) {
    const Stored stored = co_await Read(key, key);
    std::string name, id;
    if (stored.error || !stored.record ||
        !fence::ParseEffectRecordKey(key, &name, &id)) {
      continue;  // forgotten since, or not a record
    }
    const std::string_view now_state = fence::EffectStateName(
        *stored.record, busy_.contains(key), RecordClock());
    if (!state.empty() && now_state != state) continue;
    if (!first) body += ',';
    first = false;
    AppendRecord(&body, name, id, *stored.record, now_state);
  }
  body += "],\"next\":";
  if (page.more && !page.keys.empty()) {
    AppendJsonString(&body, std::string_view(page.keys.back())
                                .substr(fence::kEffectRecordPrefix.size()));
  } else {
    body += "null";
  }
  body += "}";
  co_return routes::Text(req, http::status::ok, std::move(body),
                         "application/json");
}

Awaitable<Response> Effects::Forget(const Request& req,
                                    const std::string& client) {
  std::string_view rest = routes::PathOf(req.target());
  rest.remove_prefix(kEffectsPath.size() + 1);
  const std::size_t slash = rest.find('/');
  const std::optional<std::string> id =
      slash == std::string_view::npos
          ? std::nullopt
          : codec::PercentDecode(rest.substr(slash + 1),
                                 codec::PercentMode::kStrict);
  if (!id || !fence::IsEffectTargetName(rest.substr(0, slash)) ||
      !fence::IsIdempotencyKey(*id)) {
    co_return Problemed(req, {ProblemType::kBadRequest,
                              "the path is /v1/effects/NAME/ID, with ID an "
                              "Idempotency-Key, percent-encoded"});
  }
  const std::string target(rest.substr(0, slash));
  const std::string key = fence::EffectRecordKey(target, *id);
  const Stored stored = co_await Read(key, key);
  if (stored.error) {
    co_return Problemed(
        req, context_.StorageFailure(stored.error, "", "effect read"));
  }
  if (!stored.record) {
    co_return Problemed(req, {ProblemType::kNotFound, "no such effect"});
  }
  const EffectRecord& record = *stored.record;
  fence::Token token = 0;
  routes::ReadToken(req, &token);
  // The token is compared with the fence, which it never moves: an
  // operator's token does not fence the leader out.
  const storage::Fences::Read fence =
      co_await context_.fences().Get(record.fence);
  if (fence.error) {
    co_return Problemed(req, context_.StorageFailure(fence.error, record.fence,
                                                     "effect forget"));
  }
  if (fence.fence && token < fence.fence->token) {
    co_return Problemed(
        req, context_.RefuseStale({req.method_string(), req.body(), client},
                                  record.fence, record.fence, token,
                                  fence.fence->token,
                                  "stale_effect_forget_rejected"));
  }
  const bool here = busy_.contains(key);
  const std::int64_t now = RecordClock();
  const std::string_view state = fence::EffectStateName(record, here, now);
  if (fence::InProgress(record, here, now)) {
    co_return Problemed(
        req, EffectProblem(ProblemType::kEffectInProgress,
                           "the call may be on its way", target, *id, state));
  }
  fence::FencedWrite write;
  write.fence = record.fence;
  write.observe = true;  // no token: the fence stays as it is
  write.value = fence::ValueOp{fence::ValueOp::Kind::kDelete, key, "", ""};
  write.precondition.has_match = true;
  write.precondition.match.push_back(stored.etag);
  const fence::WriteOutcome outcome =
      co_await storage::AsyncCommit(context_.fences(), std::move(write));
  if (outcome.verdict == Verdict::kPreconditionFailed) {
    co_return Problemed(req, EffectProblem(ProblemType::kEffectInProgress,
                                           "the record changed meanwhile; "
                                           "read it again",
                                           target, *id, state));
  }
  if (!fence::Applied(outcome)) {
    co_return Problemed(
        req, context_.StorageFailure(outcome.error, "", "effect forget"));
  }
  LogEvent(spdlog::level::warn, "effect_forgotten",
           "an effect's record was forgotten on request",
           {{"target", target},
            {"idempotency_key", *id},
            {"state", std::string(state)},
            {"token", std::to_string(token), true},
            {"client", client}});
  co_return routes::Text(req, http::status::no_content, "");
}

void Effects::Start() {
  if (targets_.empty()) return;
  boost::asio::co_spawn(io_, Sweep(), boost::asio::detached);
}

void Effects::Stop() {
  stopped_ = true;
  sweep_timer_.cancel();
}

Awaitable<void> Effects::Sweep() {
  const auto retention = context_.config().effect_retention;
  const auto every = std::clamp<std::chrono::milliseconds>(
      retention / 4, std::chrono::seconds(1), std::chrono::seconds(60));
  while (!stopped_) {
    sweep_timer_.expires_after(every);
    boost::system::error_code ec;
    co_await sweep_timer_.async_wait(
        boost::asio::redirect_error(kUseAwaitable, ec));
    if (stopped_) co_return;
    const std::int64_t before =
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::system_clock::now().time_since_epoch() - retention)
            .count();
    const std::string prefix(fence::kEffectRecordPrefix);
    std::string after;
    std::error_code failed;
    for (;;) {
      const storage::Backend::KeyPage page =
          co_await records_.ListKeys(prefix, after, 100);
      if (page.error) failed = page.error;
      for (const std::string& key : page.keys) {
        const Stored stored = co_await Read(key, key);
        if (!stored.record || busy_.contains(key) ||
            stored.record->created_at_ns >= before ||
            (stored.record->state != EffectRecord::State::kDone &&
             stored.record->state != EffectRecord::State::kNotSent)) {
          continue;  // an unknown outcome is forgotten only on request
        }
        fence::FencedWrite write;
        write.fence = stored.record->fence;
        write.observe = true;
        write.value =
            fence::ValueOp{fence::ValueOp::Kind::kDelete, key, "", ""};
        write.precondition.has_match = true;
        write.precondition.match.push_back(stored.etag);
        const fence::WriteOutcome outcome =
            co_await storage::AsyncCommit(context_.fences(), std::move(write));
        if (outcome.error) failed = outcome.error;
      }
      if (page.error || !page.more || page.keys.empty() || stopped_) break;
      after = page.keys.back();
    }
    if (failed) {
      LogEvent(spdlog::level::warn, "effect_sweep_failed",
               "old effect records could not all be removed; the next "
               "sweep tries again",
               {{"error", failed.message()}});
    }
  }
}

}  // namespace fencepost::proxy
