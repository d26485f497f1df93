#pragma once

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "s3/location.h"
#include "sigv4/canonical.h"
#include "sigv4/signer.h"

// An S3 request signed with SigV4 (service s3, the payload's hex SHA-256
// signed), written once: the s3:// backend adapts it to its HTTP request
// type (storage/s3_request.h), `fencepost probe s3://` hands it to
// fencepost's HTTP client.
namespace fencepost::s3 {

// What a request says, before it is signed.
struct RequestParts {
  std::string method;  // "PUT", "GET", ...
  // Decoded: ObjectPath's. Encoded once, '/' kept, never normalised.
  std::string path;
  std::vector<sigv4::QueryParam> query;  // decoded, any order
  // The fields to send, each signed as given; not Host (the Location's),
  // nor a hop-by-hop field such as Connection.
  std::vector<sigv4::Header> headers;
  // The body's hex SHA-256 (sigv4::HexSha256).
  std::string payload_hash;
};

// A request ready to send to Location::BaseUrl() with the Host field
// Location::Host() (which is signed): `target` is the request line's,
// `headers` the parts' fields, as given and in their order, then those of
// the signature (x-amz-date, x-amz-content-sha256, x-amz-security-token
// with a session token, Authorization). Content-Length is the sender's to
// add when it did not give it to be signed.
struct SignedRequest {
  std::string method;
  std::string target;
  std::vector<sigv4::Header> headers;
};

// The request target of `path` and `query`: the path encoded as SigV4's S3
// style spells it (every byte outside A-Z a-z 0-9 - . _ ~ / as %XX), then
// "?" and the canonical query when there is one.
std::string RequestTarget(std::string_view path,
                          std::span<const sigv4::QueryParam> query);

// Signs `parts` for `location` at `now`. Nothing of the credentials'
// secrets appears in the result but in the signature.
SignedRequest SignRequest(const Location& location,
                          const sigv4::Credentials& credentials,
                          RequestParts parts,
                          std::chrono::system_clock::time_point now);

// SignRequest of `method` on object `key` with `extra` fields and `body`.
SignedRequest SignObjectRequest(const Location& location,
                                const sigv4::Credentials& credentials,
                                std::string_view method, std::string_view key,
                                std::vector<sigv4::Header> extra,
                                std::string_view body,
                                std::chrono::system_clock::time_point now);

}  // namespace fencepost::s3
