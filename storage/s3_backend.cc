#include "storage/s3_backend.h"

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/string.hpp>
#include <stdexcept>
#include <utility>

#include "s3/listing.h"
#include "s3/multipart.h"
#include "s3/object_fields.h"
#include "s3/request.h"
#include "sigv4/crypto.h"
#include "storage/errc.h"

namespace fencepost::storage {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using Sent = HttpPool::Sent;
// Reads are safe to send again when a kept-alive connection ends unanswered.
constexpr HttpPool::Resend kRead = HttpPool::Resend::kIfUnanswered;

namespace {

constexpr std::size_t kMaxIdle = 64;
constexpr std::uint64_t kMaxObjectBody = 64ull << 20;

// The fields of a GetObject or HeadObject answer relayed to the client.
constexpr bhttp::field kRelayed[] = {bhttp::field::etag,
                                     bhttp::field::content_type,
                                     bhttp::field::last_modified,
                                     bhttp::field::content_range,
                                     bhttp::field::accept_ranges,
                                     bhttp::field::cache_control,
                                     bhttp::field::content_encoding,
                                     bhttp::field::content_disposition,
                                     bhttp::field::content_language,
                                     bhttp::field::expires};

// The fields of a GetObject or HeadObject answer the client is given, and
// the object's own metadata (less Content-Range when fencepost asked for
// the range itself).
void RelayFields(const http::Response& answer, bool own_range,
                 http::Response& relay) {
  for (const bhttp::field name : kRelayed) {
    const auto it = answer.find(name);
    if (it == answer.end()) continue;
    if (own_range && name == bhttp::field::content_range) continue;
    relay.set(name, it->value());
  }
  for (const auto& field : answer) {
    if (s3::KeptWithObject(field.name_string()) &&
        std::find(std::begin(kRelayed), std::end(kRelayed), field.name()) ==
            std::end(kRelayed)) {
      relay.insert(field.name_string(), field.value());
    }
  }
}

// What one exchange says for the log line: the request, and how it ended.
std::string Describe(const http::Request& request,
                     const HttpPool::Exchange& exchange) {
  std::string out = "S3 " + std::string(request.method_string()) + " " +
                    std::string(request.target());
  if (exchange.sent == Sent::kAnswered) {
    const s3::ErrorAnswer error = ParseS3Error(exchange.response);
    out += " answered " + std::to_string(error.status);
    if (!error.code.empty()) out += " " + error.code;
    if (!error.request_id.empty()) out += " (request " + error.request_id + ")";
  } else {
    out += (exchange.sent == Sent::kNotSent ? " was not sent: "
                                            : " has an unknown outcome: ") +
           exchange.error;
  }
  return out;
}

}  // namespace

StoreError S3Backend::StoreErrorOf(const http::Response& response) {
  const s3::ErrorAnswer parsed = ParseS3Error(response);
  StoreError error{parsed.status, parsed.code, parsed.request_id, 0};
  if (parsed.status == 503) {
    error.retry_after = 1;
    const std::string_view after = response[bhttp::field::retry_after];
    if (!after.empty() && after.size() <= 4 &&
        after.find_first_not_of("0123456789") == std::string_view::npos) {
      error.retry_after = std::max(1, std::stoi(std::string(after)));
    }
  }
  return error;
}

S3Backend::Fields S3Backend::ObjectFields(const WriteRequest& request) {
  Fields fields;
  if (!request.content_type.empty()) {
    fields.emplace_back("Content-Type", request.content_type);
  }
  // What S3 keeps with the object besides its type, as the client sent it.
  for (const auto& [name, value] : request.object_fields) {
    if (!s3::KeptWithObject(name)) continue;
    if (beast::iequals(name, "content-encoding")) {
      const std::string coding = s3::StoredContentEncoding(value);
      if (!coding.empty()) fields.emplace_back("Content-Encoding", coding);
    } else {
      fields.emplace_back(name, value);
    }
  }
  if (request.token) {
    fields.emplace_back("x-amz-meta-fencing-token",
                        std::to_string(*request.token));
  }
  return fields;
}

namespace {

HttpPool::Options PoolOptions(asio::io_context& io,
                              const S3Backend::Options& options,
                              asio::ssl::context* tls) {
  HttpPool::Options out;
  out.host = options.location.HostName();
  out.port = std::to_string(options.location.endpoint.port);
  tcp::resolver resolver(io);
  beast::error_code ec;
  const auto results = resolver.resolve(out.host, out.port, ec);
  if (ec) {
    throw std::runtime_error("--s3-endpoint: cannot resolve " + out.host +
                             ": " + ec.message());
  }
  for (const auto& entry : results) out.endpoints.push_back(entry.endpoint());
  out.tls = tls;
  out.timeout = options.timeout;
  out.max_idle = kMaxIdle;
  out.max_body = kMaxObjectBody;
  return out;
}

std::unique_ptr<asio::ssl::context> TlsFor(const S3Backend::Options& options) {
  if (!options.location.endpoint.tls) return nullptr;
  return MakeClientTls(options.tls_ca);
}

}  // namespace

namespace {

// A write's streamed body as the store is given it: its end (which lets
// the held-back last byte go) comes only while the write's fence is still
// at the write's token, and only while it arrives at 1 MiB/s on average
// (after the first --upstream-timeout): a write decided at its start
// cannot land after a bump, a grant or another replica's write of a higher
// token, nor hold its key's turn for ever.
class FencedBody final : public fencepost::http::BodySource {
 public:
  FencedBody(fencepost::http::BodySource& body, Fences& fences,
             const WriteRequest& write, std::chrono::milliseconds timeout)
      : body_(body),
        fences_(fences),
        write_(write),
        deadline_(std::chrono::steady_clock::now() + timeout +
                  std::chrono::seconds(body.length() >> 20)) {}

  std::uint64_t length() const override { return body_.length(); }
  std::string why() const override { return why_.empty() ? body_.why() : why_; }
  bool overtaken() const { return overtaken_; }

  Awaitable<Piece> Next(std::string* out, std::size_t max) override {
    Piece piece = co_await body_.Next(out, max);
    if (!piece.failed && std::chrono::steady_clock::now() > deadline_) {
      why_ = "the body arrived slower than 1 MiB/s";
      piece = Piece{0, false, true};
    }
    if (piece.end && write_.token) {
      const Fences::Read read = co_await fences_.Get(write_.fence);
      if (read.error || !read.fence || read.fence->token > *write_.token) {
        overtaken_ = !read.error && read.fence;
        why_ = overtaken_ ? "the fence moved past the write's token"
                          : "the fence could not be read";
        piece = Piece{0, false, true};
      }
    }
    co_return piece;
  }

 private:
  fencepost::http::BodySource& body_;
  Fences& fences_;
  const WriteRequest& write_;
  std::chrono::steady_clock::time_point deadline_;
  std::string why_;
  bool overtaken_ = false;
};

}  // namespace

S3Backend::S3Backend(asio::io_context& io, Options options, Fences& fences)
    : options_(std::move(options)),
      fences_(fences),
      tls_(TlsFor(options_)),
      pool_(io, PoolOptions(io, options_, tls_.get())),
      gate_(fences, *this,
            {options_.settle, options_.hold_at_start, options_.disable_gate}) {}

S3Backend::~S3Backend() = default;

std::string S3Backend::ObjectOf(std::string_view key) const {
  std::string object = s3::ObjectKey(options_.spec.prefix, key);
  if (object.size() > s3::kMaxObjectKeyBytes) return "";
  return object;
}

Awaitable<HttpPool::Exchange> S3Backend::Send(http::Request request,
                                              HttpPool::Resend resend) {
  SignS3(request, options_.location, options_.credentials,
         std::chrono::system_clock::now());
  HttpPool::Exchange exchange = co_await pool_.RoundTrip(request, resend);
  if (exchange.sent == Sent::kNotSent) {
    // Nothing of it left: once more, on a new connection.
    exchange = co_await pool_.RoundTrip(request, resend);
  }
  co_return exchange;
}

Awaitable<HttpPool::Exchange> S3Backend::SendStreamed(
    http::Request head, fencepost::http::BodySource& body,
    std::string payload_hash) {
  if (payload_hash.empty()) payload_hash = "UNSIGNED-PAYLOAD";
  SignS3(head, options_.location, options_.credentials,
         std::chrono::system_clock::now(), payload_hash);
  co_return co_await pool_.StreamTrip(head, body);
}

std::string S3Backend::DerivedKey(std::string_view purpose) const {
  return sigv4::HmacSha256(options_.credentials.secret_access_key.Reveal(),
                           "fencepost derived key\n" + std::string(purpose));
}

Awaitable<HttpPool::Exchange> S3Backend::Relay(Relayed relayed) {
  const std::string object = relayed.key.empty() ? "" : ObjectOf(relayed.key);
  if (!relayed.key.empty() && object.empty()) {
    HttpPool::Exchange refused;
    refused.sent = Sent::kAnswered;
    refused.response = http::Response(bhttp::status::bad_request, 11);
    refused.response.body() =
        "<Error><Code>KeyTooLongError</Code><Message>Your key is too "
        "long</Message></Error>";
    co_return refused;
  }
  const bool streamed = relayed.body_source != nullptr;
  http::Request request = S3Request(
      options_.location, relayed.method, object,
      streamed ? std::string() : std::move(relayed.body), relayed.query);
  for (const auto& [name, value] : relayed.fields) request.insert(name, value);
  if (streamed) {
    request.content_length(relayed.body_source->length());
    co_return co_await SendStreamed(std::move(request), *relayed.body_source,
                                    relayed.payload_hash);
  }
  const bool read =
      relayed.method == bhttp::verb::get || relayed.method == bhttp::verb::head;
  co_return co_await Send(std::move(request),
                          read ? kRead : HttpPool::Resend::kNever);
}

Awaitable<ReadResult> S3Backend::Read(const ReadRequest& request) {
  ReadResult result;
  const std::string object = ObjectOf(request.key);
  if (object.empty()) {
    result.error = Errc::kObjectKeyTooLong;
    co_return result;
  }
  http::Request get = S3Request(
      options_.location, request.head ? bhttp::verb::head : bhttp::verb::get,
      object, "");
  // A GET of the whole object that may stream asks for its first piece:
  // a larger object is then read piece by piece (Pieces), never whole.
  const bool piecewise =
      request.may_stream && !request.head && request.range.empty();
  if (!request.range.empty()) get.set(bhttp::field::range, request.range);
  if (piecewise) {
    get.set(bhttp::field::range, "bytes=0-" + std::to_string(kReadPiece - 1));
  }
  const std::string target(get.target());
  HttpPool::Exchange exchange = co_await Send(std::move(get), kRead);
  if (piecewise && exchange.sent == Sent::kAnswered &&
      exchange.response.result_int() == 416) {
    // An empty object has no first byte: read whole.
    http::Request whole =
        S3Request(options_.location, bhttp::verb::get, object, "");
    exchange = co_await Send(std::move(whole), kRead);
  }
  if (exchange.sent != Sent::kAnswered) {
    result.error = Errc::kUpstreamFailed;
    result.detail = "S3 GET " + target + " failed: " + exchange.error;
    co_return result;
  }
  http::Response& answer = exchange.response;
  const unsigned status = answer.result_int();
  if (status == 404 && ParseS3Error(answer).code != "NoSuchBucket") {
    co_return result;  // no such object: found false
  }
  if (status != 200 && status != 206) {
    result.error = Errc::kStoreRefused;
    result.store_error = StoreErrorOf(answer);
    result.detail = "S3 GET " + target + " answered " + std::to_string(status);
    co_return result;
  }
  result.found = true;
  result.etag = s3::UnquoteEtag(answer[bhttp::field::etag]);
  result.token = TokenOfObject(answer);
  result.content_type = answer[bhttp::field::content_type];
  // The piece fencepost asked for is the client's whole answer.
  const bool own_range = piecewise && status == 206;
  const std::uint64_t total =
      own_range ? ObjectSize(answer[bhttp::field::content_range]) : 0;
  if (own_range && total < answer.body().size()) {
    result.found = false;
    result.error = Errc::kUpstreamFailed;
    result.detail = "S3 GET " + target + ": no size in its Content-Range";
    co_return result;
  }
  http::Response relay(own_range ? bhttp::status::ok : answer.result(), 11);
  RelayFields(answer, own_range, relay);
  if (result.token) relay.set("Fencing-Token", std::to_string(*result.token));
  if (request.head) {
    const auto length = answer.find(bhttp::field::content_length);
    if (length != answer.end()) relay.set(length->name(), length->value());
  } else if (own_range && total > answer.body().size()) {
    relay.content_length(total);
    result.stream = PiecesAfter(object, std::string(answer[bhttp::field::etag]),
                                total, std::move(answer.body()));
  } else {
    relay.body() = std::move(answer.body());
    relay.content_length(relay.body().size());
  }
  result.size = result.stream ? total : relay.body().size();
  result.upstream = std::move(relay);
  co_return result;
}

Awaitable<ReadResult> S3Backend::List(const HttpRequest& client_request) {
  ReadResult result;
  const std::string_view target = client_request.target();
  const std::size_t mark = target.find('?');
  const std::string key_prefix = s3::ObjectKey(options_.spec.prefix, "");
  const s3::ListQuery query = s3::ParseListQuery(
      mark == std::string_view::npos ? "" : target.substr(mark + 1),
      key_prefix);
  if (!query.error.empty()) {
    result.error = std::make_error_code(std::errc::invalid_argument);
    result.detail = query.error;
    co_return result;
  }
  http::Request get = S3ListRequest(options_.location, query.store);
  const std::string store_target(get.target());
  HttpPool::Exchange exchange = co_await Send(std::move(get), kRead);
  if (exchange.sent != Sent::kAnswered) {
    result.error = Errc::kUpstreamFailed;
    result.detail = "S3 GET " + store_target + " failed: " + exchange.error;
    co_return result;
  }
  const http::Response& answer = exchange.response;
  if (answer.result_int() != 200) {
    result.error = Errc::kStoreRefused;
    result.store_error = StoreErrorOf(answer);
    result.detail = "S3 GET " + store_target + " answered " +
                    std::to_string(answer.result_int());
    co_return result;
  }
  std::string why;
  bool needs_url_encoding = false;
  std::optional<std::string> listing =
      s3::RewriteListing(answer.body(), key_prefix, query,
                         options_.location.bucket, &why, &needs_url_encoding);
  if (needs_url_encoding) {
    result.error = std::make_error_code(std::errc::invalid_argument);
    result.detail = std::move(why);
    co_return result;
  }
  if (!listing) {
    result.error = Errc::kUpstreamFailed;
    result.detail = "S3 GET " + store_target + ": " + why;
    co_return result;
  }
  http::Response relay(bhttp::status::ok, 11);
  relay.set(bhttp::field::content_type, "application/xml");
  relay.body() = std::move(*listing);
  relay.content_length(relay.body().size());
  result.found = true;
  result.size = relay.body().size();
  result.content_type = "application/xml";
  result.upstream = std::move(relay);
  co_return result;
}

Awaitable<WriteResult> S3Backend::Write(WriteRequest request) {
  co_return co_await gate_.Write(std::move(request));
}

Awaitable<ValueStore::Current> S3Backend::Head(const std::string& object) {
  Current current;
  http::Request head =
      S3Request(options_.location, bhttp::verb::head, object, "");
  HttpPool::Exchange exchange = co_await Send(std::move(head), kRead);
  if (exchange.sent != Sent::kAnswered) {
    current.error = Errc::kUpstreamFailed;
    co_return current;
  }
  const unsigned status = exchange.response.result_int();
  if (status == 200) {
    current.value.exists = true;
    current.value.tag = s3::UnquoteEtag(exchange.response[bhttp::field::etag]);
  } else if (status != 404) {
    // The write cannot be decided: nothing is committed.
    current.error = Errc::kUpstreamFailed;
  }
  co_return current;
}

Awaitable<ValueStore::Current> S3Backend::Prepare(const WriteRequest& request,
                                                  bool read_value) {
  const std::string object = ObjectOf(request.key);
  if (object.empty()) co_return Current{Errc::kObjectKeyTooLong, {}};
  if (!read_value) co_return Current{};
  co_return co_await Head(object);
}

Awaitable<ValueStore::Current> S3Backend::Reread(const WriteRequest& request) {
  co_return co_await Head(ObjectOf(request.key));
}

Awaitable<ValueStore::Stored> S3Backend::Store(const WriteRequest& request,
                                               const fence::ValueNow* seen) {
  if (request.made_at_store) co_return co_await StoreMade(request, seen);
  const bool put = request.kind == WriteKind::kPut;
  const bool streamed = put && request.body_source != nullptr;
  http::Request write = S3Request(
      options_.location, put ? bhttp::verb::put : bhttp::verb::delete_,
      ObjectOf(request.key), put && !streamed ? request.body : "");
  if (streamed) write.content_length(request.body_source->length());
  if (put) {
    for (const auto& [name, value] : ObjectFields(request)) {
      write.insert(name, value);
    }
  }
  // What the precondition was decided over, for the store to hold still.
  if (seen != nullptr && seen->exists) {
    write.set(bhttp::field::if_match, seen->tag);
  } else if (seen != nullptr && put) {
    write.set(bhttp::field::if_none_match, "*");
  }
  const http::Request described(write.method(), write.target(), 11);
  // Never sent twice once a byte of it left: the store may have applied
  // the first (and a conditional one sent again would be refused for its
  // own effect).
  HttpPool::Exchange exchange;
  std::optional<FencedBody> fenced;
  if (streamed) {
    fenced.emplace(*request.body_source, fences_, request, options_.timeout);
    exchange =
        co_await SendStreamed(std::move(write), *fenced, request.payload_hash);
  } else {
    exchange = co_await Send(std::move(write), HttpPool::Resend::kNever);
  }
  Stored stored = StoredOf(described, exchange);
  if (fenced && fenced->overtaken() &&
      exchange.sent == HttpPool::Sent::kNotSent) {
    stored.error = Errc::kOvertaken;
  }
  stored.created =
      stored.error ? false : put && seen != nullptr && !seen->exists;
  if (!put) stored.etag.clear();
  co_return stored;
}

Awaitable<ValueStore::Stored> S3Backend::StoreMade(
    const WriteRequest& request, const fence::ValueNow* seen) {
  const MadeAtStore& made = *request.made_at_store;
  const std::string object = ObjectOf(request.key);
  http::Request write;
  if (!made.upload_id.empty()) {
    write = S3Request(options_.location, bhttp::verb::post, object, made.parts,
                      {{"uploadId", made.upload_id}});
    write.set(bhttp::field::content_type, "application/xml");
    // What the precondition was decided over, for the store to hold still.
    if (seen != nullptr && seen->exists) {
      write.set(bhttp::field::if_match, seen->tag);
    } else if (seen != nullptr) {
      write.set(bhttp::field::if_none_match, "*");
    }
  } else {
    write = S3Request(options_.location, bhttp::verb::put, object, "");
    const std::string source = ObjectOf(made.copy_from);
    write.set(
        "x-amz-copy-source",
        s3::RequestTarget("/" + options_.location.bucket + "/" + source, {}));
    // The object gets the write's token: its metadata is always replaced,
    // with the source's own (COPY) or the request's (REPLACE).
    write.set("x-amz-metadata-directive", "REPLACE");
    std::string content_type = request.content_type;
    std::vector<std::pair<std::string, std::string>> fields =
        request.object_fields;
    if (made.keep_metadata) {
      http::Request head_request =
          S3Request(options_.location, bhttp::verb::head, source, "");
      const http::Request described_head(bhttp::verb::head,
                                         head_request.target(), 11);
      HttpPool::Exchange head = co_await Send(std::move(head_request), kRead);
      if (head.sent != Sent::kAnswered || head.response.result_int() != 200) {
        Stored refused = StoredOf(described_head, head);
        if (refused.landing == fence::Landing::kUnknown) {
          refused.landing = fence::Landing::kNotApplied;  // a read
          refused.error = Errc::kUpstreamFailed;
        }
        if (refused.store_error && refused.store_error->status == 404 &&
            refused.store_error->code.empty()) {
          refused.store_error->code = "NoSuchKey";  // a HEAD has no body
        }
        co_return refused;
      }
      content_type = head.response[bhttp::field::content_type];
      fields.clear();
      for (const auto& field : head.response) {
        if (s3::KeptWithObject(field.name_string()) &&
            !beast::iequals(field.name_string(), "x-amz-meta-fencing-token")) {
          fields.emplace_back(field.name_string(), field.value());
        }
      }
      write.set("x-amz-copy-source-if-match",
                head.response[bhttp::field::etag]);
    }
    if (!content_type.empty()) {
      write.set(bhttp::field::content_type, content_type);
    }
    for (const auto& [name, value] : fields) write.insert(name, value);
    if (request.token) {
      write.set("x-amz-meta-fencing-token", std::to_string(*request.token));
    }
  }
  const http::Request described(write.method(), write.target(), 11);
  HttpPool::Exchange exchange =
      co_await Send(std::move(write), HttpPool::Resend::kNever);
  Stored stored = StoredOf(described, exchange);
  if (!stored.error && stored.etag.empty()) {
    // Ceph RGW 16.2 answers CompleteMultipartUpload with an empty <ETag>:
    // the object's own, read while the key's turn is still held.
    Current now = co_await Head(object);
    stored.etag = now.value.tag;
  }
  co_return stored;
}

ValueStore::Stored S3Backend::StoredOf(const http::Request& described,
                                       const HttpPool::Exchange& exchange) {
  Stored stored;
  const http::Response& answer = exchange.response;
  const unsigned status = answer.result_int();
  // CompleteMultipartUpload and CopyObject may answer 200 with an error
  // document: the store failed after it started answering.
  const bool error_document =
      status == 200 && s3::IsErrorDocument(answer.body());
  if (exchange.sent == Sent::kAnswered && status >= 200 && status < 300 &&
      !error_document) {
    stored.etag = s3::UnquoteEtag(answer[bhttp::field::etag]);
    if (stored.etag.empty()) stored.etag = s3::EtagInResult(answer.body());
    return stored;
  }
  // Only a write that did not succeed is described (for the log).
  stored.detail = Describe(described, exchange);
  if (exchange.sent == Sent::kNotSent) {
    stored.landing = fence::Landing::kNotApplied;
    // A streamed body that failed is the client's, not the store's.
    stored.error =
        exchange.body_failed ? Errc::kBodyFailed : Errc::kUpstreamFailed;
    return stored;
  }
  const s3::ErrorAnswer error = ParseS3Error(answer);
  // A 200 whose body says InternalError may still complete (S3 documents
  // that a CompleteMultipartUpload failing so should be retried).
  const bool unknown =
      exchange.sent == Sent::kUnknown ||
      (!error_document && status >= 500 && status != 503) ||
      (error_document && error.code == "InternalError") ||
      (status == 409 && error.code == "ConditionalRequestConflict");
  if (unknown) {
    stored.landing = fence::Landing::kUnknown;
    stored.error = Errc::kOutcomeUnknown;
    return stored;
  }
  // Refused: nothing was made (an error document says the store failed
  // the request it had begun to answer).
  stored.landing = fence::Landing::kNotApplied;
  stored.error = Errc::kStoreRefused;
  stored.store_error = StoreErrorOf(answer);
  if (error_document) {
    stored.store_error->status = error.code == "InternalError"  ? 500
                                 : error.code == "SlowDown"     ? 503
                                 : error.code == "NoSuchUpload" ? 404
                                                                : 400;
  }
  return stored;
}

Awaitable<bool> S3Backend::Ready() {
  const bool fences_ready = co_await fences_.Ready();
  if (!fences_ready) {
    const std::string why = fences_.last_error();
    not_ready_ = "fence store: " + (why.empty() ? "not ready" : why);
    co_return false;
  }
  http::Request head_request =
      S3Request(options_.location, bhttp::verb::head, "", "");
  HttpPool::Exchange head = co_await Send(std::move(head_request), kRead);
  if (head.sent != Sent::kAnswered) {
    not_ready_ = "HeadBucket: no answer: " + head.error;
    co_return false;
  }
  if (head.response.result_int() == 200) {
    not_ready_.clear();
    co_return true;
  }
  // A HEAD's answer has no body: a GET of the bucket that lists nothing
  // tells the store's code (never a secret: S3's code and request id).
  http::Request get_request =
      S3ListRequest(options_.location, {{"max-keys", "0"}});
  HttpPool::Exchange get = co_await Send(std::move(get_request), kRead);
  not_ready_ = "HeadBucket: " + std::to_string(head.response.result_int());
  if (get.sent == Sent::kAnswered && get.response.result_int() != 200) {
    const s3::ErrorAnswer error = ParseS3Error(get.response);
    if (!error.code.empty()) not_ready_ += " " + error.code;
    if (!error.request_id.empty()) {
      not_ready_ += " (request " + error.request_id + ")";
    }
  }
  co_return false;
}

}  // namespace fencepost::storage
