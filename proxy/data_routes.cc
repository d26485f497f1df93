#include "proxy/data_routes.h"

#include <spdlog/spdlog.h>

#include <set>

#include "fence/accept.h"
#include "fence/errc.h"
#include "fence/key.h"
#include "fence/rules.h"
#include "fence/values.h"
#include "http/json.h"
#include "proxy/conditional.h"
#include "proxy/logging.h"
#include "proxy/routes.h"
#include "storage/async_commit.h"
#include "storage/errc.h"
#include "storage/s3_request.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using routes::kTokenHeader;
using routes::Problemed;
using routes::ReadToken;
using routes::Text;
using routes::TokenState;

namespace {

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

// The 409 of `write` when its token is stale, for a write that would
// otherwise be refused with a 400 of its own (a malformed If-Match, say):
// the token is checked first (SPEC "Conditional writes"). Nothing when the
// token is not stale, in observe mode, or when the fence cannot be read
// (the 400 then stands: neither answer changes anything).
Awaitable<std::optional<Response>> StaleFirst(
    RouteContext& context, const Request& req, const std::string& key,
    const storage::WriteRequest& write, const std::string& client) {
  if (!write.token || write.observe) co_return std::nullopt;
  const storage::Fences::Read read = co_await context.fences().Get(write.fence);
  if (read.error || !read.fence ||
      fence::Decide(read.fence->token, *write.token).accepted) {
    co_return std::nullopt;
  }
  co_return context.RefuseStale(req, key, write.fence, *write.token,
                                read.fence->token, client,
                                "stale_write_rejected");
}

}  // namespace

DataRoutes::DataRoutes(RouteContext& context) : RouteUnit(context) {}

Awaitable<Response> DataRoutes::Read(const Request& req,
                                     const std::string& key) {
  const bool head = req.method() == http::verb::head;
  // A forwarding backend's upstream decides the preconditions it is sent.
  fence::Precondition pre;
  if (!backend_.forwards_preconditions()) {
    if (std::string e = ReadPreconditions(req, &pre); !e.empty()) {
      co_return Problemed(req, {ProblemType::kBadRequest, std::move(e), key});
    }
  }
  storage::ReadRequest request{key, std::string(scopes_.FenceFor(key)), head,
                               &req};
  storage::ReadResult read = co_await backend_.Read(request);
  if (read.error) {
    co_return context_.StorageFailure(
        req, read.error, key, "read", 0, read.detail,
        read.store_error ? &*read.store_error : nullptr);
  }
  // A forwarding backend's answer as it is; another's (s3://) after the
  // preconditions, which fencepost decides.
  if (read.upstream && backend_.forwards_preconditions()) {
    read.upstream->version(req.version());
    co_return std::move(*read.upstream);
  }
  // If-Match first, then If-None-Match (RFC 9110 13.2.2); none for what
  // would be a 404 anyway (13.2.1).
  const fence::ValueNow now{read.found, read.etag};
  fence::Precondition if_match = pre;
  if_match.has_none_match = false;
  if (read.found && !fence::PreconditionHolds(if_match, now)) {
    Problem problem(ProblemType::kPreconditionFailed,
                    "the value's entity tag does not meet If-Match", key);
    problem.with_current_etag = true;
    if (!read.etag.empty()) problem.current_etag = QuoteTag(read.etag);
    Response res = Problemed(req, std::move(problem));
    // As a write's 412 and the 200 would: the tag the value has.
    if (!read.etag.empty()) res.set(http::field::etag, QuoteTag(read.etag));
    co_return res;
  }
  if (fence::NotModified(pre, now)) {
    // No body; Content-Length is the value's, as RFC 9110 8.6 allows.
    Response res(http::status::not_modified, req.version());
    res.set(http::field::etag, QuoteTag(read.etag));
    res.set(http::field::content_length, std::to_string(read.size));
    co_return res;
  }
  if (!read.found) {
    co_return Problemed(req, {ProblemType::kNotFound, "no value for this key",
                              key, std::nullopt, std::nullopt});
  }
  if (read.upstream) {
    read.upstream->version(req.version());
    co_return std::move(*read.upstream);
  }
  Response res(http::status::ok, req.version());
  res.set(http::field::content_type, read.content_type.empty()
                                         ? "application/octet-stream"
                                         : read.content_type);
  if (!read.etag.empty()) res.set(http::field::etag, QuoteTag(read.etag));
  if (read.token) res.set(kTokenHeader, std::to_string(*read.token));
  if (head) {
    // The backend did not read the value: only its size.
    routes::FinishHead(req, res, read.size);
  } else {
    res.body() = std::move(read.body);
    res.prepare_payload();
  }
  co_return res;
}

Awaitable<Response> DataRoutes::Write(const Request& req,
                                      const std::string& key,
                                      const std::string& client) {
  const bool observe = config_.mode == Mode::kObserve;
  fence::Token token = 0;
  const TokenState state = ReadToken(req, &token);

  storage::WriteRequest write;
  write.kind = KindOf(req.method());
  write.fence = std::string(scopes_.FenceFor(key));
  write.key = key;
  if (state == TokenState::kOk) write.token = token;
  write.observe = observe;
  if (std::optional<Response> bad = TakeConditions(req, key, write)) {
    if (auto stale = co_await StaleFirst(context_, req, key, write, client)) {
      co_return std::move(*stale);
    }
    co_return std::move(*bad);
  }
  if (write.kind == storage::WriteKind::kPut) {
    for (const auto& field : req) {
      if (storage::KeptWithObject(field.name_string())) {
        write.object_fields.emplace_back(field.name_string(), field.value());
      }
    }
  }
  write.body = req.body();
  write.original = &req;
  const std::string fence_name = write.fence;
  storage::WriteResult result = co_await backend_.Write(std::move(write));
  const fence::WriteOutcome& outcome = result.outcome;
  const bool upstream_refused =
      result.upstream &&
      result.upstream->result() == http::status::precondition_failed;

  using Verdict = fence::WriteOutcome::Verdict;
  switch (outcome.verdict) {
    case Verdict::kFailed:
      if (result.store_error && result.store_error->status == 412) {
        // The store's own check refused it (a writer went around fencepost
        // since the value was read): a precondition that failed.
        co_return context_.RefusePrecondition(
            req, key, fence_name, token, std::nullopt, client,
            "the store refused the write's precondition (the value changed "
            "since fencepost read it)");
      }
      co_return context_.StorageFailure(
          req, outcome.error, key, "write", result.retry_after, result.detail,
          result.store_error ? &*result.store_error : nullptr);
    case Verdict::kRejected:
      co_return context_.RefuseStale(req, key, fence_name, token,
                                     outcome.current, client,
                                     "stale_write_rejected");
    case Verdict::kPreconditionFailed:
      co_return context_.RefusePrecondition(
          req, key, fence_name, token,
          outcome.etag.empty() ? std::nullopt : std::optional(outcome.etag),
          client,
          "the value's entity tag does not meet If-Match / If-None-Match");
    case Verdict::kObserved:
      context_.Observed(
          req, key, fence_name,
          state == TokenState::kOk ? std::optional(token) : std::nullopt,
          outcome.current, client);
      break;
    case Verdict::kAccepted:
      // An upstream's 412 is counted as what it is, not as a write.
      if (!upstream_refused) context_.Accepted(fence_name, outcome, true);
      break;
  }
  co_return Answer(req, key, fence_name, token, client, result);
}

std::optional<Response> DataRoutes::TakeConditions(
    const Request& req, const std::string& key,
    storage::WriteRequest& write) const {
  // A forwarding backend's upstream gets them with the request.
  if (backend_.forwards_preconditions()) return std::nullopt;
  if (std::string e = ReadPreconditions(req, &write.precondition); !e.empty()) {
    return Problemed(req, {ProblemType::kBadRequest, std::move(e), key});
  }
  const std::string_view type = req[http::field::content_type];
  if (!fence::ValidContentType(type)) {
    return Problemed(req, {ProblemType::kBadRequest,
                           "Content-Type must be at most " +
                               std::to_string(fence::kMaxContentTypeBytes) +
                               " bytes without control characters",
                           key});
  }
  if (write.kind == storage::WriteKind::kPut) write.content_type = type;
  return std::nullopt;
}

Response DataRoutes::Answer(const Request& req, const std::string& key,
                            const std::string& fence_name, fence::Token token,
                            const std::string& client,
                            storage::WriteResult& result) {
  const fence::WriteOutcome& outcome = result.outcome;
  if (result.upstream) {
    if (result.upstream->result() == http::status::precondition_failed) {
      context_.RecordPreconditionFailed(req, key, fence_name, token,
                                        std::nullopt, client);
    }
    // The upstream's answer, with the fence's token.
    Response res = std::move(*result.upstream);
    res.version(req.version());
    if (outcome.current) {
      res.set(kTokenHeader, std::to_string(*outcome.current));
    }
    return res;
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
  if (!outcome.etag.empty()) res.set(http::field::etag, QuoteTag(outcome.etag));
  if (status != http::status::no_content) res.prepare_payload();
  return res;
}

namespace {

constexpr std::size_t kMaxBatchOps = 1000;

// A batch body's ops as fence writes (SPEC "Batches"); an empty string, or
// the 400's detail and the offending key (if any).
struct BatchOps {
  fence::Batch batch;
  std::string error;
  std::string key;
  bool bad_key = false;  // the error is the key's (bad-key), not the op's
};

// The batch document's shape, checked while it is parsed: an object of
// arrays of objects of strings. A body of another shape (nested arrays of
// numbers, say) fails at its first wrong value instead of being built whole
// and refused after; so the parse holds at most a megabyte or so beside the
// body's own strings.
constexpr JsonShape kOpMembers{JsonShape::Bit(JsonValue::Kind::kString)};
constexpr JsonShape kOp{JsonShape::Bit(JsonValue::Kind::kObject), nullptr,
                        &kOpMembers};
constexpr JsonShape kOps{JsonShape::Bit(JsonValue::Kind::kArray), &kOp};
constexpr JsonShape kBatchShape{JsonShape::Bit(JsonValue::Kind::kObject),
                                nullptr, &kOps};

// At most the document, `ops`, and each op with its members (with room for
// the extra members ReadBatch then refuses).
constexpr JsonLimits kBatchLimits{3, kMaxBatchOps, 8, 2 + kMaxBatchOps * 9,
                                  &kBatchShape};

BatchOps ReadBatch(std::string_view body, fence::Token token, bool observe,
                   const fence::Scopes& scopes) {
  BatchOps out;
  JsonValue doc;
  if (std::string e = ParseJson(body, &doc, kBatchLimits); !e.empty()) {
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
    const JsonValue* if_match = op.Find("if_match");
    const JsonValue* if_none_match = op.Find("if_none_match");
    const bool put =
        kind && kind->kind == JsonValue::Kind::kString && kind->text == "put";
    const bool del = kind && kind->kind == JsonValue::Kind::kString &&
                     kind->text == "delete";
    const std::size_t members =
        2 + (put ? 1 : 0) + (if_match ? 1 : 0) + (if_none_match ? 1 : 0);
    if (op.kind != JsonValue::Kind::kObject || !(put || del) || !key ||
        key->kind != JsonValue::Kind::kString || op.members.size() != members ||
        (put && !value) || (value && value->kind != JsonValue::Kind::kString) ||
        (if_match && if_match->kind != JsonValue::Kind::kString) ||
        (if_none_match && (if_none_match->kind != JsonValue::Kind::kString ||
                           if_none_match->text != "*"))) {
      out.error = at +
                  "each op is {\"op\": \"put\", \"key\": K, \"value\": "
                  "base64} or {\"op\": \"delete\", \"key\": K}, with "
                  "\"if_match\": TAG or \"if_none_match\": \"*\" if wanted";
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
    fence::FencedWrite& write = out.batch.writes.emplace_back();
    write.fence = std::string(scopes.FenceFor(key->text));
    write.token = token;
    write.observe = observe;
    write.value = fence::ValueOp{
        put ? fence::ValueOp::Kind::kPut : fence::ValueOp::Kind::kDelete,
        key->text, "", ""};
    if (if_match && !BatchIfMatch(if_match->text, &write.precondition)) {
      out.error = at + "if_match is \"*\" or an entity tag";
      out.key = key->text;
      return out;
    }
    if (if_none_match) {
      write.precondition.has_none_match = true;
      write.precondition.none_match_any = true;
    }
    if (put && !DecodeBase64(value->text, &write.value->body)) {
      out.error = at + "value is not standard, padded base64";
      out.key = key->text;
      return out;
    }
  }
  return out;
}

}  // namespace

Awaitable<Response> DataRoutes::Batch(const Request& req,
                                      const std::string& client) {
  fence::Token token = 0;
  ReadToken(req, &token);
  BatchOps ops =
      ReadBatch(req.body(), token, config_.mode == Mode::kObserve, scopes_);
  if (!ops.error.empty()) {
    co_return Problemed(
        req,
        {ops.bad_key ? ProblemType::kBadKey : ProblemType::kBadRequest,
         ops.error, ops.key.empty() ? std::nullopt : std::optional(ops.key),
         std::nullopt, std::nullopt});
  }
  std::string apart;
  if (auto refused = fences_.RefuseBatch(ops.batch, &apart)) {
    co_return Problemed(req, {ProblemType::kBadRequest, std::move(*refused),
                              std::move(apart), std::nullopt, std::nullopt});
  }
  fence::Batch batch = std::move(ops.batch);
  std::vector<std::string> keys;
  std::vector<bool> deletes;
  for (const fence::FencedWrite& w : batch.writes) {
    keys.push_back(w.value->key);
    deletes.push_back(w.value->kind == fence::ValueOp::Kind::kDelete);
  }
  const fence::WriteOutcome outcome =
      co_await storage::AsyncCommit(fences_, std::move(batch));

  using Verdict = fence::WriteOutcome::Verdict;
  if (outcome.verdict == Verdict::kPreconditionFailed) {
    const std::size_t at = fence::FirstNotApplied(outcome);
    const fence::WriteOutcome& failed = outcome.batch[at];
    co_return context_.RefusePrecondition(
        req, keys[at], std::string(scopes_.FenceFor(keys[at])), token,
        failed.etag.empty() ? std::nullopt : std::optional(failed.etag), client,
        "op " + std::to_string(at) +
            ": the value's entity tag does not meet if_match / if_none_match");
  }
  if (outcome.verdict == Verdict::kRejected) {
    const std::size_t at = outcome.batch.size() - 1;
    const fence::WriteOutcome& stale = outcome.batch.back();
    co_return context_.RefuseStale(
        req, keys[at], std::string(scopes_.FenceFor(keys[at])), token,
        stale.current, client, "stale_batch_rejected");
  }
  if (outcome.verdict == Verdict::kFailed) {
    const std::string& key =
        outcome.batch.empty() ? keys.front() : keys[outcome.batch.size() - 1];
    co_return context_.StorageFailure(req, outcome.error, key, "batch");
  }
  std::string body = "{\"results\":[";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const fence::WriteOutcome& one = outcome.batch[i];
    const std::string fence_name(scopes_.FenceFor(keys[i]));
    if (one.verdict == Verdict::kObserved) {
      context_.Observed(req, keys[i], fence_name, token, one.current, client);
    } else {
      context_.Accepted(fence_name, one);
    }
    const int status = deletes[i] ? 204 : one.created ? 201 : 200;
    if (i > 0) body += ",";
    body += "{\"key\":";
    AppendJsonString(&body, keys[i]);
    body += ",\"status\":" + std::to_string(status);
    if (!one.etag.empty()) {
      body += ",\"etag\":";
      AppendJsonString(&body, QuoteTag(one.etag));
    }
    body += "}";
  }
  body += "]}\n";
  Response res =
      Text(req, http::status::ok, std::move(body), "application/json");
  res.set(kTokenHeader, std::to_string(token));
  co_return res;
}

Response DataRoutes::BatchesUnsupported(const Request& req) const {
  // A directory or a legacy store cannot apply several writes at once.
  Response res =
      Problemed(req, {ProblemType::kMethodNotAllowed,
                      "batches need the lmdb or etcd backend, which apply them "
                      "atomically",
                      std::nullopt, std::nullopt, std::nullopt});
  res.set(http::field::allow, "");
  return res;
}

}  // namespace fencepost::proxy
