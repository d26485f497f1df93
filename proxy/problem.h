#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "fence/token.h"
#include "proxy/http_types.h"

namespace fencepost::proxy {

// Every error case fencepost answers, each with its own problem type URI.
enum class ProblemType {
  kStaleToken,
  kMissingToken,
  kInvalidToken,
  kBadKey,
  kBadRequest,  // a malformed query parameter
  kBadFraming,  // ambiguous or malformed HTTP framing
  kBodyTooLarge,
  kHeadersTooLarge,
  kMethodNotAllowed,
  kNotFound,
  kMapFull,
  kKeyCollision,    // fs: a key and a file or directory of the other kind
  kDiskFull,        // fs: the file system is full
  kUpstreamFailed,  // http://: refused or failed before the write was sent
  kOutcomeUnknown,  // http://: no answer after the write was sent
  kFenceHeld,       // http://: held closed after an unknown outcome
  kUnauthorized,    // --auth-token-file: no or a wrong bearer token
  kStorageFailure,
  kTooManyConnections,  // the port is at --max-connections with none idle
  kOverloaded,          // the commit queue is full
  kLeaseHeld,           // acquire of a lease another holder holds
  kLeaseNotHeld,        // release by a non-holder or with a wrong token
  kStoreUnavailable,    // --fence-store etcd://: etcd down or without quorum
  kTokensExhausted,     // a grant on a fence at the largest token
  kTooManyLeases,       // a grant past --max-leases live leases
  kPreconditionFailed,  // If-Match / If-None-Match does not hold
  kStoreError,          // s3://: the store's own error, with its status
  // --election: a token above the fence its source did not confirm, the
  // source not answering in time, a lease of fencepost's own on the fence.
  kUnverifiedToken,
  kElectionUnavailable,
  kFenceElected,
  // --effect-target (SPEC "Fenced side effects"): an Idempotency-Key used
  // for another request, a call in flight, a call whose outcome is unknown,
  // a request without its Fence-Key or Idempotency-Key.
  kIdempotencyKeyReused,
  kEffectInProgress,
  kEffectOutcomeUnknown,
  kMissingEffectHeader,
  kLast = kMissingEffectHeader,
};

// An RFC 9457 problem: `type`, `title`, `status`, `detail`, plus `key` and,
// where they apply, `presented_token` and `current_token`.
struct Problem {
  Problem(ProblemType type, std::string detail,
          std::optional<std::string> key = std::nullopt,
          std::optional<fence::Token> presented_token = std::nullopt,
          std::optional<fence::Token> current_token = std::nullopt)
      : type(type),
        detail(std::move(detail)),
        key(std::move(key)),
        presented_token(presented_token),
        current_token(current_token) {}

  ProblemType type;
  std::string detail;
  std::optional<std::string> key;
  std::optional<fence::Token> presented_token;
  std::optional<fence::Token> current_token;
  // invalid-token: what was sent as Fencing-Token, bounded.
  std::optional<std::string> presented;
  // Leases: the live holder and how long its lease has left.
  std::optional<std::string> holder;
  std::optional<std::int64_t> expires_in_ms;
  // precondition-failed: the value's entity tag as ETag spells it (quoted),
  // or null when there is no value.
  bool with_current_etag = false;
  std::optional<std::string> current_etag;
  // store-error: the store's status (instead of StatusOf's), and its error
  // code and request id (`code`, `request_id`).
  std::optional<unsigned> status;
  std::optional<std::string> store_code;
  std::optional<std::string> store_request_id;
  // Seconds to wait before trying again (Retry-After); 0: none.
  int retry_after = 0;
  // More string members, in order (an effect's `target`, ...).
  std::vector<std::pair<std::string, std::string>> fields;
};

// The one mapping from an error case to its HTTP status.
boost::beast::http::status StatusOf(ProblemType type);
std::string_view TypeUri(ProblemType type);
// The type URI's last segment ("store-error").
std::string_view SlugOf(ProblemType type);
// The S3 front door's error code for `problem`: the store's own code for a
// store-error that has one, else the type's.
std::string_view S3CodeOf(const Problem& problem);

// The problem a storage error stands for: 400 for keys the file system
// cannot hold, 409 for collisions, 507 for a full map or disk, else 500.
Problem ProblemFromStorage(std::error_code error, std::string key);

// A complete application/problem+json response, payload prepared, with
// Fencing-Token (current_token), ETag (current_etag) and Retry-After
// (retry_after) where the problem has them.
Response MakeProblemResponse(const Problem& problem, unsigned version);

}  // namespace fencepost::proxy
