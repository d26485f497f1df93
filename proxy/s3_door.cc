#include "proxy/s3_door.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "codec/percent.h"
#include "fence/key.h"
#include "fence/token.h"
#include "http/fields.h"
#include "http/host_port.h"
#include "proxy/conditional.h"
#include "proxy/routes.h"
#include "proxy/s3_delete_objects.h"
#include "s3/object_fields.h"
#include "s3/xml.h"
#include "sigv4/canonical.h"
#include "sigv4/checksum.h"
#include "sigv4/chunked.h"
#include "sigv4/crypto.h"
#include "sigv4/errc.h"
#include "sigv4/verifier.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;

namespace {

using fencepost::http::AsciiLower;

// S3's largest PutObject and UploadPart body.
constexpr std::uint64_t kMaxObject = std::uint64_t{5} << 30;

// Now as S3 writes a LastModified (2009-10-12T17:50:30.000Z).
std::string LastModified() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S.000Z", &utc);
  return text;
}

std::string RequestId() {
  thread_local std::mt19937_64 random(std::random_device{}());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(random()));
  return text;
}

// S3's error document, with its request id in x-amz-request-id.
Response ErrorXml(const Request& request, unsigned status,
                  std::string_view code, std::string_view message,
                  const std::string& request_id) {
  Response res(static_cast<http::status>(status), request.version());
  std::string body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>";
  body += s3::EscapeXml(code);
  body += "</Code><Message>";
  body += s3::EscapeXml(message);
  body += "</Message><Resource>";
  body += s3::EscapeXml(
      std::string_view(request.target()).substr(0, request.target().find('?')));
  body += "</Resource><RequestId>" + request_id + "</RequestId></Error>\n";
  res.set(http::field::content_type, "application/xml");
  res.set("x-amz-request-id", request_id);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

// The query's parameter names, less those of a presigned URL's signature
// and the operation hint some SDKs add (x-id).
std::vector<sigv4::QueryParam> OperationParams(std::string_view query) {
  std::vector<sigv4::QueryParam> out;
  for (auto& param : sigv4::ParseQuery(query).value_or(
           std::vector<sigv4::QueryParam>{{"?", ""}})) {
    std::string lower = param.name;
    for (char& c : lower) c = static_cast<char>(std::tolower(c));
    if (lower.rfind("x-amz-", 0) == 0 || lower == "x-id") continue;
    out.push_back(std::move(param));
  }
  return out;
}

// Where a request is addressed: the bucket it names (nullopt for the
// service, path-style "/"), the path within the bucket ("" or "/" for the
// bucket itself, else "/KEY"), and the query.
struct Addressed {
  std::optional<std::string> bucket;
  std::string_view path;
  std::string_view query;
};

// Virtual-hosted style when the Host (its port dropped, any case, a final
// '.' too) is BUCKET.domain; path style (/BUCKET/KEY) otherwise, for
// `domain` itself, an IP address or any other name.
Addressed AddressOf(const Request& request, std::string_view domain) {
  const std::string_view target = request.target();
  const std::size_t question = std::min(target.find('?'), target.size());
  Addressed out;
  out.path = target.substr(0, question);
  out.query = question < target.size() ? target.substr(question + 1) : "";
  const auto host = fencepost::http::SplitHostPort(request[http::field::host]);
  if (!domain.empty() && host && !host->bracketed && !out.path.empty() &&
      out.path.front() == '/') {
    std::string name = AsciiLower(host->host);
    if (!name.empty() && name.back() == '.') name.pop_back();
    if (name.size() > domain.size() + 1 && name.ends_with(domain) &&
        name[name.size() - domain.size() - 1] == '.') {
      out.bucket = name.substr(0, name.size() - domain.size() - 1);
      return out;
    }
  }
  if (out.path == "/") return out;  // the service
  if (out.path.empty() || out.path.front() != '/') {
    out.bucket = std::string(out.path);  // no bucket's name
    return out;
  }
  const std::size_t slash = std::min(out.path.find('/', 1), out.path.size());
  out.bucket = std::string(out.path.substr(1, slash - 1));
  out.path = out.path.substr(slash);
  return out;
}

// Why a request is refused for a field S3 would act on that the door
// neither keeps nor does.
struct NotKept {
  unsigned status;
  std::string code;
  std::string message;
};

// The first x-amz-* field of an object request that S3 would act on and the
// door does not (tagging, ACLs, another storage class, object lock,
// server-side encryption, a website redirect, ...), with S3's error for it:
// never dropped silently, for an object stored untagged, unlocked, plain or
// private when it was asked otherwise would betray its writer. What the
// store does anyway is taken (x-amz-acl private, STANDARD). Kept fields
// (s3::KeptWithObject) travel with the write; checksums and the
// signature's fields are checked by Authenticate.
std::optional<NotKept> WhatIsNotKept(const Request& request) {
  static constexpr std::string_view kTaken[] = {
      "x-amz-date", "x-amz-content-sha256", "x-amz-security-token",
      "x-amz-decoded-content-length", "x-amz-trailer",
      "x-amz-sdk-checksum-algorithm", "x-amz-user-agent", "x-amz-request-payer",
      // CopyObject's (S3Door::WhatToWrite).
      "x-amz-copy-source", "x-amz-metadata-directive"};
  static constexpr std::string_view kCannedAcls[] = {
      "public-read",   "public-read-write", "authenticated-read",
      "aws-exec-read", "bucket-owner-read", "log-delivery-write"};
  // Those Authenticate checks (sigv4's checksum algorithms).
  static constexpr std::string_view kChecksums[] = {
      "x-amz-checksum-crc32", "x-amz-checksum-crc32c",
      "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1",
      "x-amz-checksum-sha256",
      // A GET's ask for the object's checksums: answered without them.
      "x-amz-checksum-mode"};
  // S3's bound on user metadata: names (less x-amz-meta-) and values.
  constexpr std::size_t kMaxMetadata = 2048;
  std::size_t metadata = 0;
  for (const auto& field : request) {
    const std::string name = AsciiLower(field.name_string());
    const std::string_view value = field.value();
    if (name.rfind("x-amz-meta-", 0) == 0) {
      metadata += name.size() - 11 + value.size();
      if (metadata > kMaxMetadata) {
        return NotKept{400, "MetadataTooLarge",
                       "Your metadata headers exceed the maximum allowed "
                       "metadata size (2 KB)"};
      }
      if (s3::NamesFencingToken(name) && name != "x-amz-meta-fencing-token") {
        return NotKept{400, "InvalidArgument",
                       name +
                           " is read as x-amz-meta-fencing-token by some "
                           "stores; send the token as "
                           "x-amz-meta-fencing-token or Fencing-Token"};
      }
      continue;
    }
    if (name.rfind("x-amz-", 0) != 0 ||
        std::find(std::begin(kChecksums), std::end(kChecksums), name) !=
            std::end(kChecksums) ||
        std::find(std::begin(kTaken), std::end(kTaken), name) !=
            std::end(kTaken)) {
      continue;
    }
    if (name == "x-amz-acl") {
      // The bucket's default: the writer (the store's key) owns the object.
      if (value == "private" || value == "bucket-owner-full-control") continue;
      if (std::find(std::begin(kCannedAcls), std::end(kCannedAcls), value) ==
          std::end(kCannedAcls)) {
        return NotKept{400, "InvalidArgument", "x-amz-acl is not a canned ACL"};
      }
      return NotKept{501, "NotImplemented",
                     "fencepost stores objects private (the bucket's "
                     "default); x-amz-acl " +
                         std::string(value) + " is not supported"};
    }
    if (name == "x-amz-storage-class") {
      if (value == "STANDARD") continue;
      return NotKept{400, "InvalidStorageClass",
                     "The storage class you specified is not valid: "
                     "fencepost stores objects in STANDARD only"};
    }
    return NotKept{501, "NotImplemented",
                   "fencepost does not support " + name +
                       " (tagging, ACL grants, object lock, server-side "
                       "encryption, website redirects and conditional copies "
                       "are not done; the object would be stored without "
                       "them)"};
  }
  return std::nullopt;
}

// User metadata in a presigned URL's query (S3 takes x-amz-* fields there
// as in headers, and some SDKs put them there; signed either way, as the
// whole query is): the token's values into `tokens`, any other metadata
// refused, since the object would be stored without it.
std::optional<NotKept> QueryMetadata(const Request& request,
                                     std::vector<std::string>* tokens) {
  const std::string_view target = request.target();
  const std::size_t question = target.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  for (const sigv4::QueryParam& param :
       sigv4::ParseQuery(target.substr(question + 1))
           .value_or(std::vector<sigv4::QueryParam>{})) {
    const std::string name = AsciiLower(param.name);
    if (name == "x-amz-meta-fencing-token") {
      tokens->push_back(param.value);
    } else if (name.rfind("x-amz-meta-", 0) == 0) {
      return NotKept{501, "NotImplemented",
                     "fencepost keeps user metadata sent as headers only; "
                     "send " +
                         name + " as a (signed) header"};
    }
  }
  return std::nullopt;
}

// A successful answer of the core, rendered as the data port renders it,
// in S3's terms: the request id, the token also as the object's metadata,
// and 200 for every PutObject.
Response S3Success(const Request& request, Response answer,
                   const std::string& request_id) {
  answer.set("x-amz-request-id", request_id);
  if (const auto t = answer.find("Fencing-Token"); t != answer.end()) {
    answer.set("x-amz-meta-fencing-token", t->value());
  }
  if (request.method() == http::verb::put && answer.result_int() == 201) {
    answer.result(http::status::ok);
  }
  return answer;
}

}  // namespace

Response S3Door::ErrorOf(const Request& request, const Problem& problem,
                         const std::string& request_id) {
  const unsigned status =
      problem.status.value_or(static_cast<unsigned>(StatusOf(problem.type)));
  Response res =
      ErrorXml(request, status, S3CodeOf(problem), problem.detail, request_id);
  if (problem.retry_after > 0) {
    res.set(http::field::retry_after, std::to_string(problem.retry_after));
  }
  if (problem.current_token) {
    res.set("Fencing-Token", std::to_string(*problem.current_token));
  }
  return res;
}

Response S3Door::InS3Terms(const Request& request, const Problem& problem) {
  return ErrorOf(request, problem, RequestId());
}

S3Door::S3Door(Options options, storage::S3Backend& backend, Core& core)
    : options_(std::move(options)),
      auth_(options_.auth),
      backend_(backend),
      core_(core),
      uploads_(options_.bucket, backend, core) {}

bool S3Door::StreamsBody(const Request& request) {
  return request.method() == http::verb::put &&
         request.count("x-amz-copy-source") == 0;
}

Awaitable<Response> S3Door::Handle(const Request& request,
                                   const std::string& client, BodySource* body,
                                   std::unique_ptr<BodySource>* answer_body) {
  const std::string id = RequestId();
  const auto error = [&](unsigned status, std::string_view code,
                         std::string_view message) {
    return ErrorXml(request, status, code, message, id);
  };
  // The body: whole and checked, or checked as it streams to the store.
  std::optional<CheckedBody> streamed;
  std::string whole;
  std::string payload_hash;
  if (body != nullptr) {
    S3Auth::Admitted admitted = auth_.Admit(request, kMaxObject);
    if (admitted.refusal) {
      co_return error(admitted.refusal->status, admitted.refusal->code,
                      admitted.refusal->message);
    }
    const sigv4::BodyExpect& expect = *admitted.expect;
    const bool chunked =
        sigv4::StreamingPayloadKind(expect.content_sha256).has_value();
    if (chunked && !admitted.decoded_length) {
      co_return error(411, "MissingContentLength",
                      "an aws-chunked body needs its "
                      "x-amz-decoded-content-length");
    }
    const std::uint64_t length =
        chunked ? *admitted.decoded_length : body->length();
    if (length > kMaxObject) {
      co_return error(400, "EntityTooLarge",
                      "Your proposed upload exceeds the maximum allowed "
                      "object size (5 GiB)");
    }
    // The store checks a signed payload hash too.
    if (!chunked && !expect.presigned &&
        expect.content_sha256 != sigv4::kUnsignedPayload) {
      payload_hash = expect.content_sha256;
    }
    streamed.emplace(*body, std::move(*admitted.expect), length);
  } else {
    S3Auth::Verified verified = auth_.Authenticate(request);
    if (verified.refusal) {
      co_return error(verified.refusal->status, verified.refusal->code,
                      verified.refusal->message);
    }
    whole = std::move(verified.body);
  }
  const Addressed addressed = AddressOf(request, options_.domain);
  if (addressed.bucket != options_.bucket) {
    co_return !addressed.bucket
        ? error(501, "NotImplemented",
                "fencepost serves one bucket; listing buckets is not "
                "supported")
        : error(404, "NoSuchBucket",
                "fencepost serves the bucket " + options_.bucket + " only");
  }
  const std::string_view rest = addressed.path;
  const std::optional<std::string> key =
      codec::PercentDecode(rest.substr(std::min<std::size_t>(1, rest.size())),
                           codec::PercentMode::kStrict);
  if (!key) co_return error(400, "InvalidURI", "the key's escapes are bad");
  S3Call call{request,
              *key,
              OperationParams(addressed.query),
              std::move(whole),
              streamed ? &*streamed : nullptr,
              std::move(payload_hash),
              client,
              id,
              answer_body};
  if (key->empty()) co_return co_await Bucket(call);
  co_return co_await Object(call);
}

Awaitable<Response> S3Door::Bucket(S3Call& call) {
  const Request& request = call.request;
  const std::vector<sigv4::QueryParam>& params = call.params;
  const std::string& id = call.request_id;
  const http::verb method = request.method();
  const auto error = [&](unsigned status, std::string_view code,
                         std::string_view message) {
    return ErrorXml(request, status, code, message, id);
  };
  if (method == http::verb::head && params.empty()) {
    Response res(http::status::ok, request.version());
    res.set("x-amz-request-id", id);
    res.set("x-amz-bucket-region", options_.auth.region);
    res.content_length(0);
    co_return res;
  }
  const bool listing =
      !params.empty() &&
      std::all_of(params.begin(), params.end(),
                  [](const sigv4::QueryParam& p) {
                    return p.name != "location" && p.name != "uploads";
                  }) &&
      std::any_of(params.begin(), params.end(), [](const sigv4::QueryParam& p) {
        return p.name == "list-type" && p.value == "2";
      });
  if (method == http::verb::get && listing) {
    co_return co_await List(request, id);
  }
  if (method == http::verb::post && AsksDeleteObjects(params)) {
    const DeleteObjectsDone done =
        co_await DeleteObjects(core_, request, call.body, call.client);
    co_return done.status == 200 ? DeleteResultAnswer(request, done, id)
                                 : error(done.status, done.code, done.message);
  }
  if (method == http::verb::get && S3Uploads::Takes(params)) {
    const S3Uploads::ErrorOf error_of = [&](const Problem& problem) {
      return ErrorOf(request, problem, id);
    };
    co_return co_await uploads_.List(call, error_of);
  }
  if (method == http::verb::get && params.size() == 1 &&
      params[0].name == "location") {
    Response res(http::status::ok, request.version());
    res.set(http::field::content_type, "application/xml");
    res.set("x-amz-request-id", id);
    res.body() =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" +
        (options_.auth.region == "us-east-1" ? "" : options_.auth.region) +
        "</LocationConstraint>\n";
    res.prepare_payload();
    co_return res;
  }
  co_return error(501, "NotImplemented",
                  "on the bucket fencepost answers HEAD, GET ?location, "
                  "ListObjectsV2 (GET ?list-type=2) and ListMultipartUploads "
                  "(GET ?uploads) only");
}

Awaitable<Response> S3Door::List(const Request& request,
                                 const std::string& request_id) {
  storage::ReadResult listed = co_await backend_.List(request);
  if (listed.error == std::errc::invalid_argument) {
    co_return ErrorXml(request, 400, "InvalidArgument", listed.detail,
                       request_id);
  }
  if (listed.store_error) {
    co_return ErrorXml(request, listed.store_error->status,
                       listed.store_error->code,
                       "the store refused the listing", request_id);
  }
  if (listed.error || !listed.upstream) {
    co_return ErrorXml(request, 502, "ServiceUnavailable",
                       "the store did not answer the listing", request_id);
  }
  Response res = std::move(*listed.upstream);
  res.version(request.version());
  res.set("x-amz-request-id", request_id);
  co_return res;
}

Awaitable<Response> S3Door::Object(S3Call& call) {
  const Request& request = call.request;
  const std::string& request_id = call.request_id;
  const auto error_of = [&](const Problem& problem) {
    return ErrorOf(request, problem, request_id);
  };
  if (const fence::KeyError e = fence::ValidateKey(call.key);
      e != fence::KeyError::kOk) {
    co_return error_of({ProblemType::kBadKey, std::string(fence::Describe(e))});
  }
  if (const std::optional<NotKept> refused = WhatIsNotKept(request)) {
    co_return error_of(
        S3Problem(refused->status, refused->code, refused->message));
  }
  if (S3Uploads::Takes(call.params)) {
    const S3Uploads::ErrorOf as_s3 = error_of;
    co_return co_await uploads_.Handle(call, as_s3);
  }
  const http::verb method = request.method();
  if (!call.params.empty() || method == http::verb::post) {
    co_return error_of(S3Problem(
        501, "NotImplemented",
        "fencepost fences PutObject, CopyObject, GetObject, HeadObject, "
        "DeleteObject, DeleteObjects and multipart uploads: ACLs, tagging "
        "and the rest are not supported"));
  }
  if (method != http::verb::put && method != http::verb::get &&
      method != http::verb::head && method != http::verb::delete_) {
    co_return error_of(S3Problem(405, "MethodNotAllowed",
                                 "the object answers PUT, GET, HEAD and "
                                 "DELETE"));
  }
  const bool head = method == http::verb::head;
  if (head || method == http::verb::get) {
    ReadCall read;
    read.key = call.key;
    read.head = head;
    read.range = request[http::field::range];
    read.may_stream = call.answer_body != nullptr;
    read.client = call.client;
    // A fenced read (Core::Read): the token of the leader reading.
    const S3Token token = ReadS3Token(request);
    if (token.state == fence::TokenState::kInvalid || token.conflict) {
      co_return error_of(S3Problem(400, "InvalidArgument",
                                   "Fencing-Token must be one decimal token"));
    }
    if (token.state == fence::TokenState::kOk) read.token = token.token;
    if (std::string e = ReadPreconditions(request, &read.precondition);
        !e.empty()) {
      co_return error_of({ProblemType::kBadRequest, std::move(e)});
    }
    ReadDone done = co_await core_.Read(std::move(read));
    if (done.problem) co_return error_of(*done.problem);
    co_return S3Success(request,
                        routes::AnswerRead(request, done, call.answer_body),
                        request_id);
  }
  co_return co_await Write(call);
}

Awaitable<Response> S3Door::Write(S3Call& call) {
  const Request& request = call.request;
  const std::string& request_id = call.request_id;
  const auto error_of = [&](const Problem& problem) {
    return ErrorOf(request, problem, request_id);
  };
  const http::verb method = request.method();
  // A presigned URL may carry the token in its (signed) query.
  std::vector<std::string> in_query;
  if (const std::optional<NotKept> refused =
          QueryMetadata(request, &in_query)) {
    co_return error_of(
        S3Problem(refused->status, refused->code, refused->message));
  }
  const S3Token token = ReadS3Token(request, in_query);
  if (token.conflict) {
    co_return error_of(
        S3Problem(400, "InvalidArgument",
                  "Fencing-Token and x-amz-meta-fencing-token differ"));
  }
  if (auto refused = core_.RefuseToken(call.key, token.state, token.sent)) {
    co_return error_of(*refused);
  }
  WriteCall write;
  write.kind = method == http::verb::put ? storage::WriteKind::kPut
                                         : storage::WriteKind::kDelete;
  write.key = call.key;
  if (token.state == fence::TokenState::kOk) write.token = token.token;
  write.method = request.method_string();
  write.client = call.client;
  if (write.kind == storage::WriteKind::kPut) {
    if (std::optional<Problem> bad = WhatToWrite(call, write)) {
      co_return error_of(*bad);
    }
  }
  if (std::optional<Problem> bad = ReadWriteFields(request, false, write)) {
    const Problem refused = co_await core_.RefuseInput(write, std::move(*bad));
    co_return error_of(refused);
  }
  const bool copy = write.made_at_store.has_value();
  if (copy && !write.precondition.empty()) {
    // The store could not be asked to hold the destination still.
    co_return error_of(S3Problem(501, "NotImplemented",
                                 "fencepost does not copy conditionally "
                                 "(If-Match, If-None-Match)"));
  }
  Written written = co_await core_.Write(std::move(write));
  if (written.problem) {
    if (call.streamed != nullptr) {
      if (std::optional<S3Auth::Refusal> refusal = call.streamed->refusal()) {
        co_return error_of(
            S3Problem(refusal->status, refusal->code, refusal->message));
      }
    }
    co_return error_of(*written.problem);
  }
  Response res =
      S3Success(request, routes::AnswerWrite(request, written), request_id);
  if (copy) {
    res.set(http::field::content_type, "application/xml");
    res.body() =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CopyObjectResult>"
        "<LastModified>" +
        LastModified() + "</LastModified><ETag>\"" + written.etag +
        "\"</ETag></CopyObjectResult>\n";
    res.prepare_payload();
  }
  co_return res;
}

std::optional<Problem> S3Door::WhatToWrite(S3Call& call, WriteCall& write) {
  const Request& request = call.request;
  const auto source = request.find("x-amz-copy-source");
  if (source == request.end()) {
    write.body = std::move(call.body);
    write.body_source = call.streamed;
    write.payload_hash = call.payload_hash;
    return std::nullopt;
  }
  if (!call.body.empty()) {
    return S3Problem(400, "InvalidRequest", "a copy carries no body");
  }
  std::string_view text = source->value();
  if (text.find('?') != std::string_view::npos) {
    return S3Problem(501, "NotImplemented",
                     "fencepost copies the current version only");
  }
  if (!text.empty() && text.front() == '/') text.remove_prefix(1);
  const std::optional<std::string> decoded =
      codec::PercentDecode(text, codec::PercentMode::kStrict);
  const std::size_t slash = decoded ? decoded->find('/') : std::string::npos;
  if (slash == std::string::npos) {
    return S3Problem(400, "InvalidArgument",
                     "x-amz-copy-source must be BUCKET/KEY");
  }
  if (decoded->substr(0, slash) != options_.bucket) {
    return S3Problem(
        501, "NotImplemented",
        "fencepost copies within the bucket " + options_.bucket + " only");
  }
  std::string from = decoded->substr(slash + 1);
  if (fence::ValidateKey(from) != fence::KeyError::kOk) {
    return S3Problem(400, "InvalidArgument",
                     "x-amz-copy-source names no key fencepost serves");
  }
  const std::string_view directive = request["x-amz-metadata-directive"];
  if (!directive.empty() && directive != "COPY" && directive != "REPLACE") {
    return S3Problem(400, "InvalidArgument",
                     "Unknown metadata directive (COPY or REPLACE)");
  }
  storage::MadeAtStore made;
  made.copy_from = std::move(from);
  made.keep_metadata = directive != "REPLACE";
  write.made_at_store = std::move(made);
  return std::nullopt;
}

}  // namespace fencepost::proxy
