#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sigv4/canonical.h"
#include "sigv4/secret.h"

namespace fencepost::sigv4 {

// Signing with AWS Signature Version 4: the string to sign, the signing key,
// the signature, the Authorization header, presigned URLs and the chunk
// signatures of aws-chunked bodies. Pure functions: the time is passed in.

inline constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
inline constexpr std::string_view kChunkAlgorithm = "AWS4-HMAC-SHA256-PAYLOAD";
// Payload hashes other than the body's own hex SHA-256.
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kStreamingPayload =
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
inline constexpr std::string_view kEmptyPayloadHash =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// An access key: the id (not secret, it names the key), the secret key and,
// for temporary credentials, the session token (empty when none).
struct Credentials {
  std::string access_key_id;
  Secret secret_access_key;
  Secret session_token;
};

// The credential scope: "20130524/us-east-1/s3/aws4_request".
struct Scope {
  std::string date;     // YYYYMMDD, the first 8 characters of the amz date
  std::string region;   // "us-east-1"
  std::string service;  // "s3"
};
std::string ScopeString(const Scope& scope);

// "20130524T000000Z" for that instant (UTC), as X-Amz-Date spells it.
std::string FormatAmzDate(std::chrono::system_clock::time_point time);
// The instant an amz date names; nullopt unless it is exactly
// YYYYMMDDTHHMMSSZ with a valid date and time.
std::optional<std::chrono::system_clock::time_point> ParseAmzDate(
    std::string_view amz_date);

// "AWS4-HMAC-SHA256\n<amz date>\n<scope>\n<hex SHA-256 of canonical>".
std::string StringToSign(std::string_view amz_date, const Scope& scope,
                         std::string_view canonical_request);

// HMAC("AWS4" + secret, date) -> region -> service -> "aws4_request".
Secret SigningKey(const Secret& secret_access_key, const Scope& scope);

// Lower-case hex of HMAC(signing key, string to sign).
std::string Signature(const Secret& signing_key,
                      std::string_view string_to_sign);

// "AWS4-HMAC-SHA256 Credential=<id>/<scope>, SignedHeaders=<list>,
// Signature=<hex>".
std::string AuthorizationValue(std::string_view access_key_id,
                               const Scope& scope,
                               std::string_view signed_headers,
                               std::string_view signature);

// Every step of one signature, so that tests (and a refused request's
// diagnostics) can show where two sides part.
struct Signed {
  std::string canonical_request;
  std::string signed_headers;
  std::string string_to_sign;
  std::string signature;
};

// Signs `request` exactly as it is: its headers (which must include host and
// whatever the service needs, x-amz-date among them) and its payload hash.
Signed SignCanonical(const Request& request, std::string_view amz_date,
                     const Scope& scope, const Secret& secret_access_key);

// What SignRequest needs besides the request and the key.
struct SigningParams {
  std::string region;
  std::string service = "s3";
  std::chrono::system_clock::time_point time;
  // S3 wants x-amz-content-sha256 on every request; other services do not.
  bool content_sha256_header = true;
  // Whether the session token header is signed (S3, and most services) or
  // added after signing (post-sts-header-after in AWS's test suite).
  bool sign_session_token = true;
};

// Signs a request for sending with header authentication. Appends to
// request.headers, in this order: x-amz-date, x-amz-content-sha256 (the
// request's payload_hash, when params ask for it), x-amz-security-token
// (when the credentials have a session token), then Authorization. On
// return, request.headers is what must be sent; request.payload_hash must be
// the hex SHA-256 of the body, kUnsignedPayload or kStreamingPayload.
Signed SignRequest(Request& request, const Credentials& credentials,
                   const SigningParams& params);

// A presigned URL's query string (query-string authentication).
struct Presigned {
  Signed steps;
  std::string query;  // canonical query + "&X-Amz-Signature=<hex>"
};

// Presigns `request` for `expires` (1 s to 7 days, X-Amz-Expires): adds
// X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires,
// X-Amz-SignedHeaders and, with a session token, X-Amz-Security-Token to
// its query and signs; the result's query goes after the path's '?'. An
// empty payload_hash stands for kUnsignedPayload, as S3 wants.
Presigned Presign(const Request& request, const Credentials& credentials,
                  const SigningParams& params, std::chrono::seconds expires);

// The string to sign of one chunk of an aws-chunked body
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): "AWS4-HMAC-SHA256-PAYLOAD\n<amz
// date>\n<scope>\n<previous signature>\n<hash of "">\n<hex SHA-256 of the
// chunk's data>". The first chunk's previous signature is the seed: the
// request's own signature. The last chunk is empty.
std::string ChunkStringToSign(std::string_view amz_date, const Scope& scope,
                              std::string_view previous_signature,
                              std::string_view chunk_hash);

// Signs the chunks of one aws-chunked body in order, each chained to the one
// before. The signer signs what it sends, the verifier what it receives and
// compares. Not thread-safe.
class ChunkSigner {
 public:
  ChunkSigner(Secret signing_key, std::string amz_date, Scope scope,
              std::string seed_signature);
  // The signature of the next chunk whose data is `data` (empty: the last).
  std::string Next(std::string_view data);
  // The same, given the hex SHA-256 of the chunk's data (hashed as it came).
  std::string NextOfHash(std::string_view chunk_hash);

 private:
  Secret signing_key_;
  std::string amz_date_;
  Scope scope_;
  std::string previous_;
};

// The line that opens a signed chunk: "<hex size>;chunk-signature=<sig>\r\n".
std::string ChunkHeader(std::uint64_t size, std::string_view signature);

// The Content-Length of `decoded_length` bytes sent aws-chunked in chunks of
// `chunk_size` (the last one shorter), with the final empty chunk: what the
// request must declare beside x-amz-decoded-content-length.
std::uint64_t ChunkedContentLength(std::uint64_t decoded_length,
                                   std::uint64_t chunk_size);

}  // namespace fencepost::sigv4
