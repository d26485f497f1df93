#include "proxy/s3_uploads.h"

#include <algorithm>

#include "proxy/conditional.h"
#include "s3/location.h"
#include "s3/object_fields.h"
#include "s3/xml.h"
#include "storage/errc.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;
using Exchange = storage::HttpPool::Exchange;
using Sent = storage::HttpPool::Sent;

namespace {

constexpr std::string_view kXmlHead =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
constexpr std::string_view kS3Namespace =
    " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"";

const std::string* Param(const std::vector<sigv4::QueryParam>& params,
                         std::string_view name) {
  for (const auto& param : params) {
    if (param.name == name) return &param.value;
  }
  return nullptr;
}

Response Xml(const Request& request, std::string body,
             const std::string& request_id) {
  Response res(http::status::ok, request.version());
  res.set(http::field::content_type, "application/xml");
  res.set("x-amz-request-id", request_id);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

std::string Element(std::string_view name, std::string_view text) {
  return "<" + std::string(name) + ">" + s3::EscapeXml(text) + "</" +
         std::string(name) + ">";
}

// A relayed listing without the store's account (its <Owner> and
// <Initiator>): the door's clients never learn who writes the bucket.
std::string WithoutStoreAccount(std::string_view listing) {
  return s3::RemoveElements(s3::RemoveElements(listing, "Owner"), "Initiator");
}

bool Answered2xx(const Exchange& exchange) {
  const unsigned status = exchange.response.result_int();
  return exchange.sent == Sent::kAnswered && status >= 200 && status < 300 &&
         !s3::IsErrorDocument(exchange.response.body());
}

}  // namespace

Problem S3Problem(unsigned status, std::string code, std::string detail) {
  Problem problem{ProblemType::kStoreError, std::move(detail)};
  problem.status = status;
  problem.store_code = std::move(code);
  return problem;
}

S3Token ReadS3Token(const Request& request,
                    const std::vector<std::string>& in_query) {
  const auto values = [&request](std::string_view name) {
    std::vector<std::string_view> out;
    const auto [first, last] = request.equal_range(name);
    for (auto it = first; it != last; ++it) out.push_back(it->value());
    return out;
  };
  S3Token out;
  const std::vector<std::string_view> header = values("Fencing-Token");
  std::vector<std::string_view> metadata = values("x-amz-meta-fencing-token");
  metadata.insert(metadata.end(), in_query.begin(), in_query.end());
  out.conflict = !header.empty() && !metadata.empty() && header != metadata;
  out.sent = header.empty() ? metadata : header;
  out.state = fence::ReadTokenValues(out.sent, &out.token);
  return out;
}

S3Uploads::S3Uploads(std::string bucket, storage::S3Backend& backend,
                     Core& core)
    : bucket_(std::move(bucket)),
      backend_(backend),
      core_(core),
      id_key_(backend.DerivedKey("multipart upload ids")) {}

bool S3Uploads::Takes(const std::vector<sigv4::QueryParam>& params) {
  return Param(params, "uploads") != nullptr ||
         Param(params, "uploadId") != nullptr;
}

Problem S3Uploads::Failed(const S3Call& call, std::string_view what,
                          const Exchange& exchange) {
  std::string detail = "S3 " + std::string(what) + " of " + call.key;
  if (exchange.sent == Sent::kAnswered) {
    storage::StoreError error =
        storage::S3Backend::StoreErrorOf(exchange.response);
    if (error.status == 200) error.status = 500;  // an error document
    return core_.StoreFailed(call.key, what, storage::Errc::kStoreRefused,
                             detail, &error);
  }
  detail += ": " + exchange.error;
  return core_.StoreFailed(call.key, what,
                           exchange.body_failed ? storage::Errc::kBodyFailed
                           : exchange.sent == Sent::kNotSent
                               ? storage::Errc::kUpstreamFailed
                               : storage::Errc::kOutcomeUnknown,
                           detail, nullptr);
}

Awaitable<Response> S3Uploads::Handle(S3Call& call, ErrorOf error_of) {
  const http::verb method = call.request.method();
  if (Param(call.params, "uploads") != nullptr) {
    if (method != http::verb::post) {
      co_return error_of(
          {ProblemType::kMethodNotAllowed, "an object's ?uploads takes POST"});
    }
    co_return co_await Create(call, error_of);
  }
  const std::string id = *Param(call.params, "uploadId");
  const std::string object = backend_.ObjectOf(call.key);
  const std::optional<s3::UploadId> upload =
      s3::ReadUploadId(id_key_, object, id);
  if (!upload || upload->store_id.empty()) {
    co_return error_of(
        S3Problem(404, "NoSuchUpload", "The specified upload does not exist"));
  }
  // The store's own ids (a listing's) carry no token: a part or a
  // completion needs the one the upload was started with (outside observe
  // mode, where uploads start without one).
  if (!upload->token && !core_.observe() &&
      (method == http::verb::put || method == http::verb::post)) {
    co_return error_of(S3Problem(
        404, "NoSuchUpload",
        "The specified upload does not exist: send the upload id "
        "CreateMultipartUpload answered (a listing's ids carry no token)"));
  }
  if (call.request.count("x-amz-copy-source") > 0) {
    co_return error_of(
        S3Problem(501, "NotImplemented",
                  "UploadPartCopy is not supported: upload the part"));
  }
  switch (method) {
    case http::verb::put:
      co_return co_await Part(call, *upload, error_of);
    case http::verb::post:
      co_return co_await Complete(call, *upload, error_of);
    case http::verb::get:
      co_return co_await Parts(call, *upload, id, error_of);
    case http::verb::delete_:
      co_return co_await Abort(call, *upload, error_of);
    default:
      co_return error_of({ProblemType::kMethodNotAllowed,
                          "an upload takes PUT, POST, GET and DELETE"});
  }
}

Awaitable<Response> S3Uploads::Create(S3Call& call, const ErrorOf& error_of) {
  const S3Token token = ReadS3Token(call.request);
  if (token.conflict) {
    co_return error_of({ProblemType::kBadRequest,
                        "Fencing-Token and x-amz-meta-fencing-token differ"});
  }
  if (auto refused = core_.RefuseToken(call.key, token.state, token.sent)) {
    co_return error_of(*refused);
  }
  WriteCall write;
  write.key = call.key;
  if (token.state == fence::TokenState::kOk) write.token = token.token;
  write.method = "POST";
  write.client = call.client;
  if (std::optional<Problem> bad =
          ReadWriteFields(call.request, false, write)) {
    co_return error_of(*bad);
  }
  std::optional<Problem> stale = co_await core_.RefuseIfStale(write);
  if (stale) co_return error_of(*stale);
  storage::WriteRequest fields;
  fields.content_type = write.content_type;
  fields.object_fields = write.object_fields;
  fields.token = write.token;
  storage::S3Backend::Relayed relayed;
  relayed.method = http::verb::post;
  relayed.key = call.key;
  relayed.query = {{"uploads", ""}};
  relayed.fields = storage::S3Backend::ObjectFields(fields);
  Exchange exchange = co_await backend_.Relay(std::move(relayed));
  const std::optional<std::string> store_id =
      Answered2xx(exchange)
          ? s3::ResultField(exchange.response.body(), "UploadId")
          : std::nullopt;
  if (!store_id || store_id->empty()) {
    co_return error_of(Failed(call, "CreateMultipartUpload", exchange));
  }
  const std::string id =
      write.token ? s3::MakeUploadId(id_key_, backend_.ObjectOf(call.key),
                                     *write.token, *store_id)
                  : *store_id;
  co_return Xml(call.request,
                std::string(kXmlHead) + "<InitiateMultipartUploadResult" +
                    std::string(kS3Namespace) + ">" +
                    Element("Bucket", bucket_) + Element("Key", call.key) +
                    Element("UploadId", id) +
                    "</InitiateMultipartUploadResult>\n",
                call.request_id);
}

Awaitable<Response> S3Uploads::Part(S3Call& call, const s3::UploadId& upload,
                                    const ErrorOf& error_of) {
  const std::string* number = Param(call.params, "partNumber");
  if (number == nullptr || number->empty() || number->size() > 5 ||
      number->find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(*number) < 1 || std::stoi(*number) > 10000) {
    co_return error_of(S3Problem(400, "InvalidArgument",
                                 "Part number must be an integer between 1 "
                                 "and 10000, inclusive"));
  }
  // A part of an upload already stale is not worth sending.
  WriteCall write;
  write.key = call.key;
  write.token = upload.token;
  write.method = "PUT";
  write.client = call.client;
  std::optional<Problem> stale = co_await core_.RefuseIfStale(write);
  if (stale) co_return error_of(*stale);
  storage::S3Backend::Relayed relayed;
  relayed.method = http::verb::put;
  relayed.key = call.key;
  relayed.query = {{"partNumber", *number}, {"uploadId", upload.store_id}};
  if (const auto md5 = call.request.find("Content-MD5");
      md5 != call.request.end()) {
    relayed.fields.emplace_back("Content-MD5", md5->value());
  }
  relayed.body = std::move(call.body);
  relayed.body_source = call.streamed;
  relayed.payload_hash = call.payload_hash;
  if (call.streamed == nullptr) relayed.payload_hash.clear();
  Exchange exchange = co_await backend_.Relay(std::move(relayed));
  if (!Answered2xx(exchange)) {
    if (call.streamed != nullptr) {
      if (std::optional<S3Auth::Refusal> refusal = call.streamed->refusal()) {
        co_return error_of(
            S3Problem(refusal->status, refusal->code, refusal->message));
      }
    }
    co_return error_of(Failed(call, "UploadPart", exchange));
  }
  Response res(http::status::ok, call.request.version());
  res.set(http::field::etag, exchange.response[http::field::etag]);
  res.set("x-amz-request-id", call.request_id);
  res.content_length(0);
  co_return res;
}

Awaitable<Response> S3Uploads::Complete(S3Call& call,
                                        const s3::UploadId& upload,
                                        const ErrorOf& error_of) {
  const S3Token token = ReadS3Token(call.request);
  if (token.conflict || token.state == fence::TokenState::kInvalid ||
      (upload.token && token.state == fence::TokenState::kOk &&
       token.token != *upload.token)) {
    co_return error_of({ProblemType::kBadRequest,
                        "the token sent is not the one the upload was "
                        "started with"});
  }
  WriteCall write;
  write.kind = storage::WriteKind::kPut;
  write.key = call.key;
  write.token = upload.token;
  if (!write.token && token.state == fence::TokenState::kOk) {
    write.token = token.token;
  }
  if (!write.token) {
    if (auto refused = core_.RefuseToken(call.key, fence::TokenState::kMissing,
                                         token.sent)) {
      co_return error_of(*refused);
    }
  }
  write.method = "POST";
  write.client = call.client;
  if (std::optional<Problem> bad =
          ReadWriteFields(call.request, false, write)) {
    const Problem refused = co_await core_.RefuseInput(write, std::move(*bad));
    co_return error_of(refused);
  }
  write.content_type.clear();  // the parts' document's, not the object's
  write.object_fields.clear();
  storage::MadeAtStore made;
  made.upload_id = upload.store_id;
  made.parts = std::move(call.body);
  write.made_at_store = std::move(made);
  Written written = co_await core_.Write(std::move(write));
  if (written.problem) {
    if (written.problem->type == ProblemType::kStaleToken) {
      // Nothing of it may ever appear: the store forgets its parts.
      co_await Abort(call, upload, error_of);
    }
    co_return error_of(*written.problem);
  }
  const std::string host(call.request[http::field::host]);
  co_return Xml(call.request,
                std::string(kXmlHead) + "<CompleteMultipartUploadResult" +
                    std::string(kS3Namespace) + ">" +
                    Element("Location",
                            "http://" + host + "/" + bucket_ + "/" + call.key) +
                    Element("Bucket", bucket_) + Element("Key", call.key) +
                    Element("ETag", "\"" + written.etag + "\"") +
                    "</CompleteMultipartUploadResult>\n",
                call.request_id);
}

Awaitable<Response> S3Uploads::Parts(S3Call& call, const s3::UploadId& upload,
                                     const std::string& id,
                                     const ErrorOf& error_of) {
  storage::S3Backend::Relayed relayed;
  relayed.key = call.key;
  relayed.query = {{"uploadId", upload.store_id}};
  for (const std::string_view name : {"max-parts", "part-number-marker"}) {
    if (const std::string* value = Param(call.params, name)) {
      relayed.query.push_back({std::string(name), *value});
    }
  }
  Exchange exchange = co_await backend_.Relay(std::move(relayed));
  if (!Answered2xx(exchange)) {
    co_return error_of(Failed(call, "ListParts", exchange));
  }
  const std::string object = backend_.ObjectOf(call.key);
  std::optional<std::string> listing = s3::RewriteElements(
      exchange.response.body(), "Key",
      [&](std::string_view key) -> std::optional<std::string> {
        if (key != object) return std::nullopt;
        return call.key;
      });
  if (listing) {
    listing = s3::RewriteElements(
        *listing, "UploadId",
        [&](std::string_view) -> std::optional<std::string> { return id; });
  }
  if (!listing) {
    co_return error_of({ProblemType::kUpstreamFailed,
                        "the store's ListParts answer cannot be read"});
  }
  co_return Xml(call.request, WithoutStoreAccount(*listing), call.request_id);
}

Awaitable<Response> S3Uploads::Abort(S3Call& call, const s3::UploadId& upload,
                                     const ErrorOf& error_of) {
  storage::S3Backend::Relayed relayed;
  relayed.method = http::verb::delete_;
  relayed.key = call.key;
  relayed.query = {{"uploadId", upload.store_id}};
  Exchange exchange = co_await backend_.Relay(std::move(relayed));
  if (!Answered2xx(exchange)) {
    co_return error_of(Failed(call, "AbortMultipartUpload", exchange));
  }
  Response res(http::status::no_content, call.request.version());
  res.set("x-amz-request-id", call.request_id);
  co_return res;
}

Awaitable<Response> S3Uploads::List(S3Call& call, ErrorOf error_of) {
  const std::string root = backend_.ObjectOf("");  // PREFIX/
  storage::S3Backend::Relayed relayed;
  relayed.query = {{"uploads", ""}};
  std::string prefix = root;
  if (const std::string* p = Param(call.params, "prefix")) prefix += *p;
  relayed.query.push_back({"prefix", prefix});
  if (const std::string* marker = Param(call.params, "key-marker")) {
    relayed.query.push_back({"key-marker", root + *marker});
  }
  for (const std::string_view name : {"upload-id-marker", "max-uploads"}) {
    if (const std::string* value = Param(call.params, name)) {
      relayed.query.push_back({std::string(name), *value});
    }
  }
  if (Param(call.params, "delimiter") != nullptr) {
    co_return error_of(
        S3Problem(501, "NotImplemented",
                  "ListMultipartUploads with a delimiter is not supported"));
  }
  Exchange exchange = co_await backend_.Relay(std::move(relayed));
  if (!Answered2xx(exchange)) {
    co_return error_of(Failed(call, "ListMultipartUploads", exchange));
  }
  // The store's names within PREFIX, as the client knows them.
  const auto strip = [&](std::string_view name) -> std::optional<std::string> {
    if (name.substr(0, root.size()) != root) return std::string(name);
    return std::string(name.substr(root.size()));
  };
  std::optional<std::string> listing =
      s3::RewriteElements(exchange.response.body(), "Key", strip);
  for (const std::string_view element :
       {"Prefix", "KeyMarker", "NextKeyMarker"}) {
    if (listing) listing = s3::RewriteElements(*listing, element, strip);
  }
  if (!listing) {
    co_return error_of({ProblemType::kUpstreamFailed,
                        "the store's ListMultipartUploads answer cannot be "
                        "read"});
  }
  co_return Xml(call.request, WithoutStoreAccount(*listing), call.request_id);
}

}  // namespace fencepost::proxy
