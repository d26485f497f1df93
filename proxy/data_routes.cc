#include "proxy/data_routes.h"

#include <spdlog/spdlog.h>

#include <set>

#include "fence/accept.h"
#include "fence/errc.h"
#include "fence/key.h"
#include "fence/rules.h"
#include "http/json.h"
#include "proxy/conditional.h"
#include "proxy/logging.h"
#include "proxy/routes.h"
#include "storage/async_commit.h"
#include "storage/errc.h"

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

}  // namespace

DataRoutes::DataRoutes(RouteContext& context, Core& core)
    : RouteUnit(context), core_(core) {}

Awaitable<Response> DataRoutes::Read(const Request& req, const std::string& key,
                                     const std::string& client,
                                     std::unique_ptr<BodySource>* answer_body) {
  ReadCall call;
  call.key = key;
  call.client = client;
  call.may_stream = answer_body != nullptr;
  // A fenced read: a token sent must be one (an invalid one is 400, as for
  // a write; a read carries none without being refused).
  fence::Token token = 0;
  const TokenState state = ReadToken(req, &token);
  if (state == TokenState::kInvalid) {
    co_return Problemed(
        req, {ProblemType::kInvalidToken,
              "Fencing-Token must be one decimal token (a fenced read)", key});
  }
  if (state == TokenState::kOk) call.token = token;
  call.head = req.method() == http::verb::head;
  call.original = &req;
  // A forwarding backend's upstream decides the preconditions it is sent.
  if (!core_.forwards_preconditions()) {
    if (std::string e = ReadPreconditions(req, &call.precondition);
        !e.empty()) {
      co_return Problemed(req, {ProblemType::kBadRequest, std::move(e), key});
    }
    call.range = req[http::field::range];
  }
  ReadDone done = co_await core_.Read(std::move(call));
  co_return routes::AnswerRead(req, done, answer_body);
}

Awaitable<Response> DataRoutes::Write(const Request& req,
                                      const std::string& key,
                                      const std::string& client,
                                      BodySource* body) {
  WriteCall call;
  call.kind = KindOf(req.method());
  call.key = key;
  fence::Token token = 0;
  if (ReadToken(req, &token) == TokenState::kOk) call.token = token;
  call.method = req.method_string();
  call.client = client;
  call.body = req.body();
  call.body_source = body;
  call.original = &req;
  if (std::optional<Problem> bad =
          ReadWriteFields(req, core_.forwards_preconditions(), call)) {
    co_return Problemed(req, co_await core_.RefuseInput(call, std::move(*bad)));
  }
  Written written = co_await core_.Write(std::move(call));
  co_return routes::AnswerWrite(req, written);
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
         ops.error, ops.key.empty() ? std::nullopt : std::optional(ops.key)});
  }
  std::optional<Response> refused = co_await RefuseBatch(req, ops.batch);
  if (refused) co_return std::move(*refused);
  fence::Batch batch = std::move(ops.batch);
  std::vector<std::string> keys;
  std::vector<bool> deletes;
  for (const fence::FencedWrite& w : batch.writes) {
    keys.push_back(w.value->key);
    deletes.push_back(w.value->kind == fence::ValueOp::Kind::kDelete);
  }
  const fence::WriteOutcome outcome =
      co_await storage::AsyncCommit(fences_, std::move(batch));
  const Asker asker = AskerOf(req, client);

  using Verdict = fence::WriteOutcome::Verdict;
  if (outcome.verdict == Verdict::kPreconditionFailed) {
    const std::size_t at = fence::FirstNotApplied(outcome);
    const fence::WriteOutcome& failed = outcome.batch[at];
    co_return Problemed(
        req,
        context_.RefusePrecondition(
            asker, keys[at], std::string(scopes_.FenceFor(keys[at])), token,
            failed.etag.empty() ? std::nullopt : std::optional(failed.etag),
            "op " + std::to_string(at) +
                ": the value's entity tag does not meet if_match / "
                "if_none_match"));
  }
  if (outcome.verdict == Verdict::kRejected) {
    const std::string& key = keys[outcome.batch.size() - 1];
    co_return Problemed(
        req, context_.RefuseStale(
                 asker, key, std::string(scopes_.FenceFor(key)), token,
                 outcome.batch.back().current, "stale_batch_rejected"));
  }
  if (outcome.verdict == Verdict::kFailed) {
    const std::string& key =
        outcome.batch.empty() ? keys.front() : keys[outcome.batch.size() - 1];
    co_return Problemed(req,
                        context_.StorageFailure(outcome.error, key, "batch"));
  }
  std::string body = "{\"results\":[";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const fence::WriteOutcome& one = outcome.batch[i];
    const std::string fence_name(scopes_.FenceFor(keys[i]));
    if (one.verdict == Verdict::kObserved) {
      context_.Observed(asker, keys[i], fence_name, token, one.current);
    } else {
      context_.Accepted(one);
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

Awaitable<std::optional<Response>> DataRoutes::RefuseBatch(
    const Request& req, const fence::Batch& batch) {
  std::string apart;
  if (auto refused = fences_.RefuseBatch(batch, &apart)) {
    co_return Problemed(
        req, {ProblemType::kBadRequest, std::move(*refused), std::move(apart)});
  }
  for (const fence::FencedWrite& write : batch.writes) {
    if (!write.token) continue;
    std::optional<Problem> unconfirmed = co_await context_.AdmitElected(
        write.fence, *write.token, write.value->key);
    if (unconfirmed) co_return Problemed(req, std::move(*unconfirmed));
  }
  co_return std::nullopt;
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
