#include "proxy/core.h"

#include "fence/accept.h"
#include "fence/rules.h"
#include "proxy/conditional.h"

namespace fencepost::proxy {

namespace {

Asker AskerOf(const WriteCall& call) {
  return {call.method, call.body, call.client};
}

Written Refused(Problem problem) {
  Written out;
  out.problem = std::move(problem);
  return out;
}

}  // namespace

Core::Core(RouteContext& context) : context_(context) {}

bool Core::observe() const { return context_.config().mode == Mode::kObserve; }

bool Core::forwards_preconditions() const {
  return context_.backend().forwards_preconditions();
}

std::optional<Problem> Core::RefuseToken(
    const std::string& key, fence::TokenState state,
    const std::vector<std::string_view>& sent) {
  return context_.RefuseToken(key, state, sent,
                              context_.config().mode == Mode::kObserve);
}

Problem Core::StoreFailed(const std::string& key, std::string_view what,
                          std::error_code error, std::string_view detail,
                          const storage::StoreError* store_error) {
  return context_.StorageFailure(error, key, what, 0, detail, store_error);
}

Awaitable<Problem> Core::RefuseInput(const WriteCall& call, Problem bad) {
  std::optional<Problem> stale = co_await RefuseIfStale(call);
  co_return stale ? std::move(*stale) : std::move(bad);
}

Awaitable<std::optional<Problem>> Core::RefuseIfStale(const WriteCall& call) {
  // Nothing to say when the token is not stale, in observe mode, or when
  // the fence cannot be read: the write may go on, and will be decided in
  // its turn.
  if (!call.token || context_.config().mode == Mode::kObserve) {
    co_return std::nullopt;
  }
  const std::string fence_name(context_.scopes().FenceFor(call.key));
  const storage::Fences::Read read = co_await context_.fences().Get(fence_name);
  if (read.error || !read.fence ||
      fence::Decide(read.fence->token, *call.token).accepted) {
    co_return std::nullopt;
  }
  co_return context_.RefuseStale(AskerOf(call), call.key, fence_name,
                                 *call.token, read.fence->token,
                                 "stale_write_rejected");
}

Awaitable<Written> Core::Write(WriteCall call) {
  storage::WriteRequest write;
  write.kind = call.kind;
  write.key = call.key;
  write.fence = std::string(context_.scopes().FenceFor(call.key));
  write.token = call.token;
  write.observe = context_.config().mode == Mode::kObserve;
  write.body = call.body;
  write.body_source = call.body_source;
  write.payload_hash = std::move(call.payload_hash);
  write.made_at_store = std::move(call.made_at_store);
  write.content_type = std::move(call.content_type);
  write.object_fields = std::move(call.object_fields);
  write.precondition = call.precondition;
  write.original = call.original;
  const std::string fence_name = write.fence;
  if (call.token) {  // an elected fence: a higher token once confirmed
    std::optional<Problem> unconfirmed =
        co_await context_.AdmitElected(fence_name, *call.token, call.key);
    if (unconfirmed) co_return Refused(std::move(*unconfirmed));
  }
  storage::WriteResult result =
      co_await context_.backend().Write(std::move(write));
  const fence::WriteOutcome& outcome = result.outcome;
  const Asker asker = AskerOf(call);
  const fence::Token token = call.token.value_or(0);

  Written out;
  using Verdict = fence::WriteOutcome::Verdict;
  switch (outcome.verdict) {
    case Verdict::kFailed:
      if (result.store_error && result.store_error->status == 412) {
        // The store's own check refused it (a writer went around fencepost
        // since the value was read): a precondition that failed.
        out.problem = context_.RefusePrecondition(
            asker, call.key, fence_name, token, std::nullopt,
            "the store refused the write's precondition (the value changed "
            "since fencepost read it)");
      } else {
        out.problem = context_.StorageFailure(
            outcome.error, call.key, "write", result.retry_after, result.detail,
            result.store_error ? &*result.store_error : nullptr);
      }
      co_return out;
    case Verdict::kRejected:
      out.problem =
          context_.RefuseStale(asker, call.key, fence_name, token,
                               outcome.current, "stale_write_rejected");
      co_return out;
    case Verdict::kPreconditionFailed:
      out.problem = context_.RefusePrecondition(
          asker, call.key, fence_name, token,
          outcome.etag.empty() ? std::nullopt : std::optional(outcome.etag),
          "the value's entity tag does not meet If-Match / If-None-Match");
      co_return out;
    case Verdict::kObserved:
      context_.Observed(asker, call.key, fence_name, call.token,
                        outcome.current);
      break;
    case Verdict::kAccepted:
      // An upstream's 412 is counted as what it is, not as a write.
      if (result.upstream &&
          result.upstream->result() ==
              boost::beast::http::status::precondition_failed) {
        context_.RecordPreconditionFailed(asker, call.key, fence_name, token,
                                          std::nullopt);
      } else {
        context_.Accepted(outcome);
      }
      break;
  }
  out.fence_token = outcome.current;
  out.etag = outcome.etag;
  out.created = result.created;
  out.upstream = std::move(result.upstream);
  co_return out;
}

Awaitable<ReadDone> Core::Read(ReadCall call) {
  storage::Backend& backend = context_.backend();
  storage::ReadRequest request;
  request.key = call.key;
  request.fence = std::string(context_.scopes().FenceFor(call.key));
  ReadDone done;
  if (call.token) {
    const storage::Fences::Read fence =
        co_await context_.fences().Get(request.fence);
    if (fence.error) {
      done.problem = context_.StorageFailure(fence.error, call.key, "read", 0,
                                             "", nullptr);
      co_return done;
    }
    const std::optional<fence::Token> highest =
        fence.fence ? std::optional(fence.fence->token) : std::nullopt;
    if (!fence::ReadAdmitted(highest, *call.token)) {
      done.problem = context_.RefuseStaleRead(
          call.key, request.fence, *call.token, *highest, call.client);
      co_return done;
    }
  }
  request.head = call.head;
  request.original = call.original;
  request.range = std::move(call.range);
  request.may_stream = call.may_stream && !call.head;
  storage::ReadResult read = co_await backend.Read(request);
  if (read.error) {
    done.problem = context_.StorageFailure(
        read.error, call.key, "read", 0, read.detail,
        read.store_error ? &*read.store_error : nullptr);
    co_return done;
  }
  // A forwarding backend's upstream decided the preconditions it was sent.
  if (read.upstream && backend.forwards_preconditions()) {
    done.value = std::move(read);
    co_return done;
  }
  // If-Match first, then If-None-Match (RFC 9110 13.2.2); none for what
  // would be a 404 anyway (13.2.1).
  const fence::ValueNow now{read.found, read.etag};
  fence::Precondition if_match = call.precondition;
  if_match.has_none_match = false;
  if (read.found && !fence::PreconditionHolds(if_match, now)) {
    Problem problem(ProblemType::kPreconditionFailed,
                    "the value's entity tag does not meet If-Match", call.key);
    problem.with_current_etag = true;
    if (!read.etag.empty()) problem.current_etag = QuoteTag(read.etag);
    done.problem = std::move(problem);
  } else if (fence::NotModified(call.precondition, now)) {
    done.not_modified = true;
  } else if (!read.found) {
    done.problem =
        Problem(ProblemType::kNotFound, "no value for this key", call.key);
  }
  done.value = std::move(read);
  co_return done;
}

}  // namespace fencepost::proxy
