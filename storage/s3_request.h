#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"
#include "sigv4/signer.h"

namespace fencepost::storage {

// The requests of the s3:// backend, without any I/O: where a bucket and an
// object key go in the URL (path-style or virtual-hosted), the SigV4
// signature of each request, and what an S3 error answer says. Pure
// functions, so that the backend and its tests spell requests alike.

// One bucket on one S3 endpoint.
struct S3Bucket {
  std::string host;  // of the endpoint, without brackets
  std::string port;  // digits
  bool tls = false;
  std::string bucket;
  std::string region;
  // Virtual-hosted: the bucket in the host name (BUCKET.HOST); path-style:
  // the path's first segment (/BUCKET/KEY).
  bool virtual_hosted = false;
};

// The longest object key S3 takes, in bytes.
inline constexpr std::size_t kMaxObjectKeyBytes = 1024;

// The object key of `key` under `prefix` (s3://BUCKET/PREFIX's "/PREFIX",
// canonical, or ""): PREFIX decoded, '/', then the key's own bytes. A key is
// never normalised: its bytes are the object's name.
std::string ObjectKey(std::string_view prefix, std::string_view key);

// A request to `bucket` for `object_key` ("" for the bucket itself) with
// `method` and `body`: the target (every byte outside A-Z a-z 0-9 - . _ ~ /
// percent-encoded, as SigV4 encodes S3 paths), Host (":PORT" unless it is
// the scheme's default), Content-Length when there is a body or the method
// is PUT, and keep-alive. The caller adds its own fields, then signs.
http::Request S3Request(const S3Bucket& bucket, boost::beast::http::verb method,
                        std::string_view object_key, std::string body);

// Signs `request` (built by S3Request, with every field it will carry)
// with SigV4 for service s3 at `time`, the payload's hex SHA-256 signed:
// adds x-amz-date, x-amz-content-sha256, x-amz-security-token (with a
// session token) and Authorization. Every field then on the request is
// signed, except the hop-by-hop Connection.
void SignS3(http::Request& request, const S3Bucket& bucket,
            const sigv4::Credentials& credentials,
            std::chrono::system_clock::time_point time);

// What an S3 error answer says (its XML: <Error><Code>, <Message>,
// <RequestId>); the request id also from x-amz-request-id when the body
// has none. Empty strings for what is absent; each value at most 256 bytes,
// control characters dropped (they go into logs and problem documents).
struct S3Error {
  unsigned status = 0;
  std::string code;
  std::string message;
  std::string request_id;
};
S3Error ParseS3Error(const http::Response& response);

// An ETag as S3 answers it ("\"9b2cf5...\"") without its quotes; a weak
// one's W/ kept. "" for none.
std::string UnquoteEtag(std::string_view etag);

// The x-amz-meta-fencing-token of an answer, when it is a plain decimal
// token.
std::optional<std::uint64_t> TokenOfObject(const http::Response& response);

}  // namespace fencepost::storage
