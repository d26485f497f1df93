#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "s3/location.h"
#include "sigv4/signer.h"
#include "storage/backend.h"
#include "storage/backend_spec.h"
#include "storage/fences.h"
#include "storage/http_pool.h"
#include "storage/s3_request.h"
#include "storage/value_gate.h"

namespace boost::asio::ssl {
class context;
}

namespace fencepost::storage {

// --backend s3://BUCKET[/PREFIX]: values are objects in an S3 bucket (SPEC
// "S3 backend"); fences stay in the fence store. The value of key K is the
// object PREFIX/K (s3::ObjectKey: K's own bytes), every request signed with
// SigV4 (payload hash signed). Writes go through the gate of values kept
// elsewhere (ValueGate), as for fs: and http://: the fence's turn, the fence
// durable and told first, then the PutObject or DeleteObject.
//
// Requests: PUT is PutObject with the body, its Content-Type, the fields
// S3 keeps with an object (WriteRequest::object_fields: Content-Encoding
// less aws-chunked, Cache-Control, Content-Disposition, Content-Language,
// Expires, x-amz-meta-*) and x-amz-meta-fencing-token: N; DELETE is
// DeleteObject; GET and HEAD are GetObject and HeadObject with the client's
// Range, relayed with ETag, Content-Type, Last-Modified, Content-Length,
// Content-Range, Accept-Ranges, those kept fields and Fencing-Token (from
// the object's metadata). A GET of the whole object that may stream
// (ReadRequest::may_stream) asks for its first 8 MiB, and a larger object
// comes as ReadResult::stream, read 8 MiB at a time with ranged GETs under
// If-Match of the first piece's ETag. A PUT's streamed body
// (WriteRequest::body_source) is sent with its last byte held back
// (HttpPool::StreamTrip) until the body passed its check and the fence is
// still at the write's token. The client's query and other fields never
// reach the store.
//
// Preconditions are fencepost's: the object's ETag is read (HeadObject) in
// the key's turn and again once the turn among replicas is taken, and the
// rulebook decides. The write then also asks the store to hold still what
// was decided over: If-Match with that ETag (unquoted, the form Ceph RGW
// compares) when the object existed, If-None-Match: * when it did not. A
// store that honours them refuses a writer that went around fencepost in
// between: its 412 is relayed as precondition-failed. DELETE carries
// If-Match too, though RGW 16.2 ignores it there.
//
// Outcomes of a write: answered 2xx, applied. No byte sent (connecting,
// TLS), retried once on a new connection, then 502 (Errc::kUpstreamFailed).
// No answer after sending, a 5xx other than 503 SlowDown, or S3's 409
// ConditionalRequestConflict: unknown (Errc::kOutcomeUnknown, 504), the
// fence held closed for `settle`, never sent again. 503 SlowDown and every
// other error (4xx): not applied, Errc::kStoreRefused with the store's
// status, code and request id (WriteResult::store_error). A PUT answers 201
// when the object is known not to have existed (a conditional write read
// it), else 200.
//
// Thread safety: every call on the server's one io thread.
class S3Backend : public Backend, private ValueStore {
 public:
  struct Options {
    BackendSpec spec;       // Kind::kS3: the bucket and the prefix
    s3::Location location;  // where and how to reach it
    sigv4::Credentials credentials;
    std::string tls_ca;  // https: the CA file; empty: the system's
    std::chrono::milliseconds timeout{10000};
    std::chrono::milliseconds settle{2000};
    std::chrono::milliseconds hold_at_start{0};  // as HttpBackend::Options
    bool disable_gate = false;  // test-only, as HttpBackend::Options
  };

  // Resolves the endpoint's host at once. Throws std::runtime_error when it
  // cannot be resolved or the CA file cannot be loaded.
  S3Backend(boost::asio::io_context& io, Options options, Fences& fences);
  ~S3Backend() override;

  std::string_view name() const override { return "s3"; }
  bool supports_post_patch() const override { return false; }
  bool streams_values() const override { return true; }
  Awaitable<ReadResult> Read(const ReadRequest& request) override;
  Awaitable<WriteResult> Write(WriteRequest request) override;
  // ListObjectsV2 within PREFIX for an S3 client (SPEC "S3 front door"):
  // `client_request` is GET /BUCKET?list-type=2&... (its path the caller's
  // to route; its query read by s3::ParseListQuery), sent to the store as
  // GET /BUCKET?list-type=2&prefix=PREFIX/... and answered with the
  // store's listing rewritten by s3::RewriteListing. found, and `upstream`: 200
  // with the client's ListBucketResult (application/xml, Content-Length).
  // Errors (nothing else set): std::errc::invalid_argument when the query is
  // refused, or the listing holds a name XML cannot carry and the client did
  // not ask encoding-type=url (s3::RewriteListing), `detail` then S3's message
  // for a 400 InvalidArgument;
  // Errc::kUpstreamFailed when the store did not answer (a request never
  // sent goes once more) or its listing cannot be read; Errc::kStoreRefused
  // with `store_error` for the store's own error answers (as Read). The
  // caller keeps `client_request` alive until the awaitable completes.
  Awaitable<ReadResult> List(const HttpRequest& client_request);

  // A request of S3's multipart protocol that the front door relays as it
  // built it: `key`'s object (the bucket itself when `key` is empty), the
  // decoded `query`, `fields`, and a body whole or streamed (`body_source`,
  // with `payload_hash` as StreamTrip's).
  struct Relayed {
    boost::beast::http::verb method = boost::beast::http::verb::get;
    std::string key;
    std::vector<sigv4::QueryParam> query;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    fencepost::http::BodySource* body_source = nullptr;
    std::string payload_hash;
  };
  // Signs and sends `request`: the store's answer, or why there is none
  // (HttpPool's outcomes; a read goes once more when its connection ended
  // unanswered, a write never). A store's error answer is counted and
  // described by the caller. The key is checked as for a write: an object
  // key too long is a 400 KeyTooLongError answered here.
  Awaitable<HttpPool::Exchange> Relay(Relayed request);
  // The fields a PutObject of `request` carries besides the body: its
  // Content-Type, the fields S3 keeps with the object (Content-Encoding
  // less aws-chunked) and x-amz-meta-fencing-token (a multipart upload's
  // start carries them too).
  using Fields = std::vector<std::pair<std::string, std::string>>;
  static Fields ObjectFields(const WriteRequest& request);
  // The store's error answer as it is relayed; 503 SlowDown (and any 503)
  // with a second's Retry-After unless the store said more.
  static StoreError StoreErrorOf(const http::Response& response);
  // The object key the store holds `key` under (PREFIX/key), "" when too
  // long.
  std::string ObjectOf(std::string_view key) const;
  // A key derived from the store's secret, for the front door to sign what
  // it hands out (multipart upload ids) so that the same store's replicas
  // all accept it; never the secret itself.
  std::string DerivedKey(std::string_view purpose) const;
  // Fences ready, and HeadBucket answered 200. Otherwise the reason names
  // the request and the store's answer ("HeadBucket: 403
  // SignatureDoesNotMatch", the code read with a GET of the bucket, since
  // a HEAD's answer has no body).
  Awaitable<bool> Ready() override;
  std::string not_ready_reason() const override { return not_ready_; }
  std::chrono::milliseconds HoldLeft() const override {
    return gate_.HoldLeft();
  }

 private:
  Awaitable<Current> Prepare(const WriteRequest& request,
                             bool read_value) override;
  Awaitable<Current> Reread(const WriteRequest& request) override;
  Awaitable<Stored> Store(const WriteRequest& request,
                          const fence::ValueNow* seen) override;

  // Signs and sends `request`; a request never sent goes once more on a new
  // connection. `resend`: as HttpPool::RoundTrip's.
  Awaitable<HttpPool::Exchange> Send(http::Request request,
                                     HttpPool::Resend resend);
  // A GET that may stream (ReadRequest::may_stream) reads the object in
  // pieces of this size: what one read holds at most.
  static constexpr std::uint64_t kReadPiece = std::uint64_t{8} << 20;
  // An object's body after its `first` piece, read piece by piece with
  // ranged GETs while its ETag stays `etag` (s3_pieces.cc).
  class Pieces;
  std::unique_ptr<fencepost::http::BodySource> PiecesAfter(std::string object,
                                                           std::string etag,
                                                           std::uint64_t total,
                                                           std::string first);
  // The object's size in a 206's Content-Range ("bytes 0-8388607/N"); 0
  // when it gives none.
  static std::uint64_t ObjectSize(std::string_view content_range);
  // A value the store makes (WriteRequest::made_at_store): the upload
  // completed, or the object copied with the write's token in its
  // metadata (a COPY of metadata reads the source's first, and copies only
  // while the source is still what was read: x-amz-copy-source-if-match).
  Awaitable<Stored> StoreMade(const WriteRequest& request,
                              const fence::ValueNow* seen);
  // What a write's exchange came to (a 200 with an error document, as
  // CompleteMultipartUpload and CopyObject may answer, is a refusal).
  static Stored StoredOf(const http::Request& described,
                         const HttpPool::Exchange& exchange);
  // Signs `head` with `payload_hash` (UNSIGNED-PAYLOAD when empty) and
  // streams `body` after it (HttpPool::StreamTrip): never sent twice.
  Awaitable<HttpPool::Exchange> SendStreamed(http::Request head,
                                             fencepost::http::BodySource& body,
                                             std::string payload_hash);
  // HeadObject of `object`: the value as it is, or the error.
  Awaitable<Current> Head(const std::string& object);

  Options options_;
  Fences& fences_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  HttpPool pool_;
  ValueGate gate_;
  std::string not_ready_;  // why the last Ready() said no
};

}  // namespace fencepost::storage
