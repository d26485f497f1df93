#pragma once

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sigv4/canonical.h"
#include "sigv4/secret.h"
#include "sigv4/signer.h"

namespace fencepost::sigv4 {

// Checking a received S3 request's signature: what it claims, and the
// signature it should carry, computed by the signer's own canonical-request
// code (canonical.h). The caller looks the access key id up, compares the
// signatures with ConstantTimeEqual (crypto.h), checks the time with
// CheckTime and, for an aws-chunked body, each chunk with a ChunkSigner
// seeded with the request's signature. Pure functions: no I/O, no clock.

// A request as received, before any decoding.
struct Received {
  std::string_view method;
  std::string_view target;          // origin-form: "/bucket/key?query"
  std::span<const Header> headers;  // every header received, any case
};

// What a request's signature claims.
struct Claim {
  std::string access_key_id;
  Scope scope;
  std::string amz_date;                     // "20130524T000000Z"
  std::vector<std::string> signed_headers;  // lower-case names, as listed
  std::string signature;                    // 64 lower-case hex digits
  bool presigned = false;                   // query-string authentication
  std::chrono::seconds expires{0};          // X-Amz-Expires (presigned)
};

// Reads the claim of a request signed with the Authorization header (its
// date from X-Amz-Date) or presigned (X-Amz-Algorithm, X-Amz-Credential,
// X-Amz-Date, X-Amz-Expires of 1 s to 7 days, X-Amz-SignedHeaders,
// X-Amz-Signature in the query). Errors: kNotSigned (neither),
// kUnsupportedAlgorithm, kMalformed (both, or either misspelt), kBadDate
// (no X-Amz-Date, or not the scope's date), kHostNotSigned, kBadEncoding.
std::error_code ParseClaim(const Received& request, Claim* claim);

// The canonical request, string to sign and signature that `request` would
// carry if it had been signed with `secret_access_key` as `claim` says: the
// path percent-decoded and encoded again as S3 does (PathStyle::kS3), the
// query as received (less X-Amz-Signature when presigned), the headers
// `claim` names, and the payload hash from x-amz-content-sha256, or
// UNSIGNED-PAYLOAD when presigned. The hash is not checked against the
// body here. Errors: kBadEncoding, kMissingSignedHeader,
// kMissingContentSha256.
std::error_code ExpectedSignature(const Received& request, const Claim& claim,
                                  const Secret& secret_access_key,
                                  Signed* expected);

// kTimeTooSkewed when the claim's date is more than `max_skew` from `now`
// (for a presigned request: ahead of `now` by more than that), kExpired when
// a presigned request's X-Amz-Expires has passed; success otherwise.
std::error_code CheckTime(const Claim& claim,
                          std::chrono::system_clock::time_point now,
                          std::chrono::seconds max_skew);

}  // namespace fencepost::sigv4
