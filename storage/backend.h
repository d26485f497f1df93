#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "fence/fence_record.h"
#include "fence/rules.h"
#include "fence/token.h"
#include "fence/write.h"
#include "http/body_source.h"
#include "http/coro.h"
#include "http/message.h"

namespace fencepost::storage {

using HttpRequest = fencepost::http::Request;
using HttpResponse = fencepost::http::Response;

enum class WriteKind { kPut, kDelete, kPost, kPatch };

struct ReadRequest {
  std::string key;
  std::string fence;  // the fence that guards `key`
  bool head = false;
  const HttpRequest* original = nullptr;  // for backends that forward it
  // Range, as sent (empty: none), for a backend that does not forward
  // `original` (s3://).
  std::string range;
  // The caller takes a large value as ReadResult::stream (s3://).
  bool may_stream = false;
};

// s3://: a value the store makes from what it already holds, instead of
// from WriteRequest::body (the S3 front door's CompleteMultipartUpload and
// CopyObject): decided and fenced as any PUT of the key.
struct MadeAtStore {
  std::string upload_id;  // complete the store's upload of this id ...
  std::string parts;      // ... with this CompleteMultipartUpload document
  std::string copy_from;  // or copy this key's object (within the prefix)
  // A copy keeps the source's metadata and Content-Type (S3's COPY
  // directive), else takes the write's (REPLACE).
  bool keep_metadata = true;
};

// A write routed through a fence. `fence` is the fence that guards `key`
// (the key itself, or its scope).
struct WriteRequest {
  WriteKind kind = WriteKind::kPut;
  std::string key;
  std::string fence;
  std::optional<fence::Token> token;  // nullopt only in observe mode
  bool observe = false;
  std::string body;
  // The body as it arrives instead, for a backend that streams values
  // (Backend::streams_values): read only once the write is decided, in the
  // fence's turn, and never twice. Not owned; it outlives the write.
  fencepost::http::BodySource* body_source = nullptr;
  // Instead of a body (s3:// only).
  std::optional<MadeAtStore> made_at_store;
  // The body's hex SHA-256 when its sender signed it (an S3 client): a
  // store that checks payloads (s3://) is given it to check the streamed
  // body against. Empty: unknown.
  std::string payload_hash;
  std::string content_type;  // as sent; empty: none
  // The request's fields a store keeps with its value besides Content-Type
  // (s3::KeptWithObject: Content-Encoding, Cache-Control, x-amz-meta-*, ...),
  // as sent: the s3:// backend stores them with the object and answers them
  // on GET and HEAD; the other backends do not keep them.
  std::vector<std::pair<std::string, std::string>> object_fields;
  // If-Match / If-None-Match, checked after the token by the engine (a
  // forwarding backend sends them upstream in `original` instead).
  fence::Precondition precondition;
  const HttpRequest* original = nullptr;  // for backends that forward it
};

// What the store behind the fences answered in its own terms (an S3 error
// document), to relay to the client with that status: the store's code and
// request id go into the problem document, and a 503 gets Retry-After.
struct StoreError {
  unsigned status = 0;
  std::string code;        // "SlowDown", "AccessDenied", ...; may be empty
  std::string request_id;  // the store's, for its operators; may be empty
  int retry_after = 0;     // seconds, with a 503
};

struct WriteResult {
  fence::WriteOutcome outcome;
  bool created = false;  // the write made a value that did not exist before
  // A forwarding backend's answer, hop-by-hop fields removed and the length
  // set, to relay as it is (plus Fencing-Token).
  std::optional<HttpResponse> upstream;
  int retry_after = 0;  // seconds, with Errc::kFenceHeld
  // With Errc::kStoreRefused: the store's own answer (a 412 is the store's
  // precondition failing).
  std::optional<StoreError> store_error;
  // With an error: what failed, for the log line the caller writes (a
  // forwarding backend's upstream exchange). Storage itself never logs.
  std::string detail;
};

struct ReadResult {
  bool found = false;
  std::string body;
  std::optional<fence::Token> token;  // the token of the write that stored it
  std::size_t size = 0;               // the value's size, also for HEAD
  std::string etag;          // its entity tag (empty: the backend has none)
  std::string content_type;  // as stored; empty: none was sent
  std::error_code error;
  std::optional<HttpResponse> upstream;  // a forwarding backend's answer
  std::string detail;  // with an error: what failed, for the log line
  std::optional<StoreError> store_error;  // with Errc::kStoreRefused
  // With ReadRequest::may_stream, a value too large to hold: its body as
  // it is read from the store (`upstream` then has its Content-Length and
  // an empty body). A stream that fails ends the answer short.
  std::unique_ptr<fencepost::http::BodySource> stream;
};

// Where values live. Implementations check and advance the fence (through
// the Committer) and store the value so that no lower-token write can land
// after a higher one was acknowledged.
//
// Errors are values in the results, never exceptions. Every backend may
// return fence::Errc::kMapFull (the LMDB map reached --max-map-size),
// fence::Errc::kStorage (any other LMDB failure; nothing changed) and, for
// writes, fence::Errc::kOverloaded (the committer's queue is full). Each
// implementation lists the storage::Errc values it adds.
//
// Thread safety: see each implementation; the server calls every one on its
// io thread.
class Backend {
 public:
  virtual ~Backend() = default;
  // The `backend` label of fencepost_backend_errors_total.
  virtual std::string_view name() const = 0;
  // Whether POST and PATCH are accepted as fenced writes.
  virtual bool supports_post_patch() const = 0;
  // Whether a PUT's body may come as a WriteRequest::body_source, streamed
  // to the store and never held whole (s3://).
  virtual bool streams_values() const { return false; }
  // Whether values live with their fences (LMDB, or etcd), so a batch of
  // writes can be applied atomically (POST /).
  virtual bool supports_batches() const { return false; }
  // Whether If-Match, If-None-Match and Content-Type go to another store
  // with the request (`original`), which decides them; else the backend
  // keeps entity tags and checks preconditions itself.
  virtual bool forwards_preconditions() const { return false; }
  // The value of `request.key`: found false when there is none. Errors in
  // ReadResult::error (see above and the implementation). The caller keeps
  // `request` (and its `original`) alive until the awaitable completes.
  virtual Awaitable<ReadResult> Read(const ReadRequest& request) = 0;
  // Checks the fence, then the precondition, advances the fence and stores
  // (or deletes) the value: the verdict in WriteResult::outcome (kAccepted,
  // kObserved, kRejected when stale, kPreconditionFailed with the current
  // tag in outcome.etag, kFailed with outcome.error on any error; see above
  // and the implementation); an applied put's new tag in outcome.etag. Takes
  // `request` by value: pass it with std::move. Its `original`, when set, must
  // outlive the awaitable.
  virtual Awaitable<WriteResult> Write(WriteRequest request) = 0;
  // The keys holding a value that start with `prefix` and sort after
  // `after`, in key order, at most `limit` (`more`: there are others). For
  // the records fencepost keeps beside fences (fence/effect.h), so only the
  // backends that keep values with their fences (LMDB, etcd) list any.
  struct KeyPage {
    std::error_code error;
    std::vector<std::string> keys;
    bool more = false;
  };
  virtual Awaitable<KeyPage> ListKeys(std::string /*prefix*/,
                                      std::string /*after*/,
                                      std::size_t /*limit*/) {
    co_return KeyPage{};
  }
  // Whether the backend can serve now (for /readyz). Never fails.
  virtual Awaitable<bool> Ready() = 0;
  // Why the last Ready() said no, for /readyz's body and the log (""
  // when it said yes, or the backend cannot tell more).
  virtual std::string not_ready_reason() const { return {}; }
  // How long a write this process sent may still land on the store from
  // now, i.e. the longest hold of a fence after an unknown outcome that has
  // still to run (0: none, and always 0 for stores this process writes
  // itself): at a clean stop the next process is told to wait it out.
  virtual std::chrono::milliseconds HoldLeft() const {
    return std::chrono::milliseconds(0);
  }
};

}  // namespace fencepost::storage
