#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fence/token.h"
#include "http/coro.h"
#include "proxy/core.h"
#include "proxy/http_types.h"
#include "proxy/problem.h"
#include "proxy/s3_body.h"
#include "s3/multipart.h"
#include "sigv4/canonical.h"
#include "storage/s3_backend.h"

namespace fencepost::proxy {

// What the S3 front door hands a request of its own after authenticating
// it: the key (decoded and valid), its body (whole, or streamed through
// its check), and how to answer.
struct S3Call {
  const Request& request;
  std::string key;
  std::vector<sigv4::QueryParam> params;  // the operation's, decoded
  std::string body;                       // a whole body, checked, decoded
  CheckedBody* streamed = nullptr;        // or the body as it arrives
  std::string payload_hash;  // the body's signed hex SHA-256, when sent
  const std::string& client;
  const std::string& request_id;
  // Where a large object's body goes, streamed from the store; null: held
  // whole.
  std::unique_ptr<BodySource>* answer_body = nullptr;
};

// A write's token as an S3 client sends it: Fencing-Token or, for tools
// that only set metadata, x-amz-meta-fencing-token (every value of each,
// with those of a presigned URL's query, `in_query`, which must outlive
// the result; both fields sent must agree).
struct S3Token {
  fence::TokenState state = fence::TokenState::kMissing;
  fence::Token token = 0;
  std::vector<std::string_view> sent;  // the values read
  bool conflict = false;  // both fields sent, with different values
};
S3Token ReadS3Token(const Request& request,
                    const std::vector<std::string>& in_query = {});

// A problem the door renders with S3's `status` and `code`.
Problem S3Problem(unsigned status, std::string code, std::string detail);

// The S3 front door's multipart uploads (SPEC "S3 front door"): a large
// object is written where it appears, at CompleteMultipartUpload, fenced
// there as any PutObject of its key.
//
//  - CreateMultipartUpload (POST ?uploads) carries the token (Fencing-Token
//    or x-amz-meta-fencing-token), refused at once when it is already
//    stale; the store's upload is started with the object's fields and the
//    token in its metadata, and the client is handed an upload id that
//    carries the token (s3::MakeUploadId): kept by the client, it outlives
//    a restart of fencepost and holds on every replica of the store.
//  - UploadPart (PUT ?partNumber&uploadId) streams its body to the store;
//    a part of an upload whose token is already stale is refused (409).
//    ListParts and AbortMultipartUpload are relayed.
//  - CompleteMultipartUpload (POST ?uploadId) is the write: decided in the
//    key's turn with the upload's token (a store id from a listing, which
//    carries none, needs Fencing-Token), so an upload whose token went
//    stale is refused with 409 StaleFencingToken, aborted at the store,
//    and nothing appears.
//  - ListMultipartUploads (GET /BUCKET?uploads) lists the uploads within
//    PREFIX, with the store's own ids.
//
// Thread safety: the server's one io thread.
class S3Uploads {
 public:
  // Renders a problem as S3's error document.
  using ErrorOf = std::function<Response(const Problem&)>;

  S3Uploads(std::string bucket, storage::S3Backend& backend, Core& core);

  // Whether `params` name an operation on an object's upload.
  static bool Takes(const std::vector<sigv4::QueryParam>& params);
  // An object's upload operation (Takes).
  Awaitable<Response> Handle(S3Call& call, ErrorOf error_of);
  // GET /BUCKET?uploads.
  Awaitable<Response> List(S3Call& call, ErrorOf error_of);

 private:
  Awaitable<Response> Create(S3Call& call, const ErrorOf& error_of);
  Awaitable<Response> Part(S3Call& call, const s3::UploadId& upload,
                           const ErrorOf& error_of);
  Awaitable<Response> Complete(S3Call& call, const s3::UploadId& upload,
                               const ErrorOf& error_of);
  Awaitable<Response> Parts(S3Call& call, const s3::UploadId& upload,
                            const std::string& id, const ErrorOf& error_of);
  Awaitable<Response> Abort(S3Call& call, const s3::UploadId& upload,
                            const ErrorOf& error_of);
  // The problem of a relayed request the store did not take: its own
  // error (counted and logged as the core counts a store's refusal) or
  // none at all.
  Problem Failed(const S3Call& call, std::string_view what,
                 const storage::HttpPool::Exchange& exchange);

  std::string bucket_;
  storage::S3Backend& backend_;
  Core& core_;
  std::string id_key_;  // signs the upload ids handed out
};

}  // namespace fencepost::proxy
