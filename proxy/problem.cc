#include "proxy/problem.h"

#include <array>

#include "fence/errc.h"
#include "proxy/http_types.h"
#include "storage/errc.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;

namespace {

struct Info {
  ProblemType type;
  http::status status;
  std::string_view slug;  // the type URI's last segment
  std::string_view title;
  std::string_view s3_code;  // the S3 front door's error code
};

// Every problem type, in ProblemType's order: the one list from which the
// data port's problem+json, the S3 door's error codes and the clients'
// tables (checked by their tests) are made.
constexpr Info kProblems[] = {
    {ProblemType::kStaleToken, http::status::conflict, "stale-token",
     "Fencing token is lower than the fence's highest", "StaleFencingToken"},
    {ProblemType::kMissingToken, http::status::precondition_required,
     "missing-token", "Fencing-Token header is required",
     "MissingFencingToken"},
    {ProblemType::kInvalidToken, http::status::bad_request, "invalid-token",
     "Fencing-Token is not a plain decimal uint64", "InvalidArgument"},
    {ProblemType::kBadKey, http::status::bad_request, "bad-key", "Invalid key",
     "InvalidArgument"},
    {ProblemType::kBadRequest, http::status::bad_request, "bad-request",
     "Bad request", "InvalidArgument"},
    {ProblemType::kBadFraming, http::status::bad_request, "bad-framing",
     "Ambiguous or malformed HTTP framing", "InternalError"},
    {ProblemType::kBodyTooLarge, http::status::payload_too_large,
     "body-too-large", "Request body is larger than --max-body",
     "EntityTooLarge"},
    {ProblemType::kHeadersTooLarge,
     http::status::request_header_fields_too_large, "headers-too-large",
     "Request headers are larger than 16 KiB", "InternalError"},
    {ProblemType::kMethodNotAllowed, http::status::method_not_allowed,
     "method-not-allowed", "Method not allowed", "MethodNotAllowed"},
    {ProblemType::kNotFound, http::status::not_found, "not-found", "Not found",
     "NoSuchKey"},
    {ProblemType::kMapFull, http::status::insufficient_storage, "map-full",
     "Storage is full (LMDB map at --max-map-size)", "InternalError"},
    {ProblemType::kKeyCollision, http::status::conflict, "key-collision",
     "The key collides with a file or directory of the other kind",
     "InternalError"},
    {ProblemType::kDiskFull, http::status::insufficient_storage, "disk-full",
     "The backend's file system is full", "InternalError"},
    {ProblemType::kUpstreamFailed, http::status::bad_gateway, "upstream-failed",
     "The upstream refused or failed before the write was sent",
     "ServiceUnavailable"},
    {ProblemType::kOutcomeUnknown, http::status::gateway_timeout,
     "upstream-outcome-unknown", "The upstream's outcome is unknown",
     "OutcomeUnknown"},
    {ProblemType::kFenceHeld, http::status::service_unavailable, "fence-held",
     "The fence is held closed after an unknown upstream outcome", "SlowDown"},
    {ProblemType::kUnauthorized, http::status::unauthorized, "unauthorized",
     "A valid bearer token is required", "InternalError"},
    {ProblemType::kStorageFailure, http::status::internal_server_error,
     "storage-failure", "Storage failure", "InternalError"},
    {ProblemType::kTooManyConnections, http::status::service_unavailable,
     "too-many-connections", "Too many connections", "InternalError"},
    {ProblemType::kOverloaded, http::status::service_unavailable, "overloaded",
     "Overloaded", "SlowDown"},
    {ProblemType::kLeaseHeld, http::status::conflict, "lease-held",
     "The lease is held by another holder", "InternalError"},
    {ProblemType::kLeaseNotHeld, http::status::conflict, "lease-not-held",
     "The lease is not held by this holder with this token", "InternalError"},
    {ProblemType::kStoreUnavailable, http::status::service_unavailable,
     "fence-store-unavailable", "The fence store (etcd) is unavailable",
     "InternalError"},
    {ProblemType::kTokensExhausted, http::status::conflict, "tokens-exhausted",
     "No higher fencing token is left to grant", "InternalError"},
    {ProblemType::kTooManyLeases, http::status::insufficient_storage,
     "too-many-leases", "Too many live leases", "InternalError"},
    {ProblemType::kPreconditionFailed, http::status::precondition_failed,
     "precondition-failed",
     "The value's entity tag does not meet the precondition",
     "PreconditionFailed"},
    {ProblemType::kStoreError, http::status::bad_gateway, "store-error",
     "The store behind the fences answered an error", "InternalError"},
    {ProblemType::kUnverifiedToken, http::status::conflict, "unverified-token",
     "The election's source did not confirm the token as its holder's",
     "UnverifiedFencingToken"},
    {ProblemType::kElectionUnavailable, http::status::service_unavailable,
     "election-unavailable", "The election's source did not answer in time",
     "ServiceUnavailable"},
    {ProblemType::kFenceElected, http::status::conflict, "fence-elected",
     "The fence follows an election held elsewhere", "InvalidRequest"},
    {ProblemType::kIdempotencyKeyReused, http::status::unprocessable_entity,
     "idempotency-key-reused",
     "The Idempotency-Key was used for another request", "InvalidRequest"},
    {ProblemType::kEffectInProgress, http::status::conflict,
     "effect-in-progress", "The call is in flight", "OperationAborted"},
    {ProblemType::kEffectOutcomeUnknown, http::status::conflict,
     "effect-outcome-unknown", "The call was sent and its outcome is not known",
     "InvalidRequest"},
    {ProblemType::kMissingEffectHeader, http::status::precondition_required,
     "missing-effect-header", "Fence-Key and Idempotency-Key are required",
     "InvalidRequest"},
};
constexpr bool InOrder() {
  for (std::size_t i = 0; i < std::size(kProblems); ++i) {
    if (kProblems[i].type != static_cast<ProblemType>(i)) return false;
  }
  return std::size(kProblems) ==
         static_cast<std::size_t>(ProblemType::kLast) + 1;
}
static_assert(InOrder(), "kProblems lists every ProblemType, in order");

const Info& InfoOf(ProblemType type) {
  return kProblems[static_cast<std::size_t>(type)];
}

}  // namespace

http::status StatusOf(ProblemType type) { return InfoOf(type).status; }

std::string_view SlugOf(ProblemType type) { return InfoOf(type).slug; }

std::string_view TypeUri(ProblemType type) {
  constexpr int kCount = static_cast<int>(ProblemType::kLast) + 1;
  static const std::array<std::string, kCount> uris = [] {
    std::array<std::string, kCount> out;
    for (int i = 0; i < kCount; ++i) {
      out[i] = "urn:fencepost:problem:" +
               std::string(SlugOf(static_cast<ProblemType>(i)));
    }
    return out;
  }();
  return uris[static_cast<int>(type)];
}

std::string_view S3CodeOf(const Problem& problem) {
  if (problem.type == ProblemType::kStoreError && problem.store_code &&
      !problem.store_code->empty()) {
    return *problem.store_code;
  }
  return InfoOf(problem.type).s3_code;
}

Problem ProblemFromStorage(std::error_code error, std::string key) {
  ProblemType type = ProblemType::kStorageFailure;
  if (error == fence::Errc::kMapFull) {
    type = ProblemType::kMapFull;
  } else if (error == fence::Errc::kOverloaded) {
    type = ProblemType::kOverloaded;
  } else if (error == fence::Errc::kTokensExhausted) {
    type = ProblemType::kTokensExhausted;
  } else if (error == storage::Errc::kCollision) {
    type = ProblemType::kKeyCollision;
  } else if (error == storage::Errc::kNoSpace) {
    type = ProblemType::kDiskFull;
  } else if (error == storage::Errc::kUpstreamFailed) {
    type = ProblemType::kUpstreamFailed;
  } else if (error == storage::Errc::kOutcomeUnknown) {
    type = ProblemType::kOutcomeUnknown;
  } else if (error == storage::Errc::kFenceHeld) {
    type = ProblemType::kFenceHeld;
  } else if (error == storage::Errc::kStoreUnavailable) {
    type = ProblemType::kStoreUnavailable;
  } else if (error == storage::Errc::kValueTooLarge ||
             error == storage::Errc::kBatchTooLarge) {
    type = ProblemType::kBodyTooLarge;
  } else if (error == storage::Errc::kStoreRefused) {
    type = ProblemType::kStoreError;
  } else if (error == storage::Errc::kBodyFailed) {
    type = ProblemType::kBadRequest;
  } else if (error == storage::Errc::kOvertaken) {
    type = ProblemType::kStaleToken;
  } else if (error == storage::Errc::kObjectKeyTooLong ||
             error == storage::Errc::kSymlink ||
             error == storage::Errc::kSegmentTooLong ||
             error == storage::Errc::kReservedName) {
    type = ProblemType::kBadKey;
  }
  return {type, error.message(), std::move(key), std::nullopt, std::nullopt};
}

Response MakeProblemResponse(const Problem& problem, unsigned version) {
  const Info info = InfoOf(problem.type);  // the status is StatusOf's
  std::string body = "{\"type\":";
  AppendJsonString(&body, TypeUri(problem.type));
  body += ",\"title\":";
  AppendJsonString(&body, info.title);
  const unsigned status =
      problem.status.value_or(static_cast<unsigned>(info.status));
  body += ",\"status\":" + std::to_string(status);
  body += ",\"detail\":";
  AppendJsonString(&body, problem.detail);
  if (problem.key) {
    body += ",\"key\":";
    AppendJsonString(&body, *problem.key);
  }
  if (problem.presented) {
    body += ",\"presented\":";
    AppendJsonString(&body, *problem.presented);
  }
  if (problem.presented_token) {
    body += ",\"presented_token\":" + std::to_string(*problem.presented_token);
  }
  if (problem.current_token) {
    body += ",\"current_token\":" + std::to_string(*problem.current_token);
  }
  if (problem.holder) {
    body += ",\"holder\":";
    AppendJsonString(&body, *problem.holder);
  }
  if (problem.with_current_etag) {
    body += ",\"current_etag\":";
    if (problem.current_etag) {
      AppendJsonString(&body, *problem.current_etag);
    } else {
      body += "null";
    }
  }
  if (problem.expires_in_ms) {
    body += ",\"expires_in_ms\":" + std::to_string(*problem.expires_in_ms);
  }
  for (const auto& [name, value] : problem.fields) {
    body += ',';
    AppendJsonString(&body, name);
    body += ':';
    AppendJsonString(&body, value);
  }
  if (problem.store_code) {
    body += ",\"code\":";
    AppendJsonString(&body, *problem.store_code);
  }
  if (problem.store_request_id) {
    body += ",\"request_id\":";
    AppendJsonString(&body, *problem.store_request_id);
  }
  body += "}\n";

  Response res(static_cast<http::status>(status), version);
  res.set(http::field::content_type, "application/problem+json");
  if (problem.current_token) {
    res.set("Fencing-Token", std::to_string(*problem.current_token));
  }
  if (problem.with_current_etag && problem.current_etag) {
    res.set(http::field::etag, *problem.current_etag);
  }
  if (problem.retry_after > 0) {
    res.set(http::field::retry_after, std::to_string(problem.retry_after));
  }
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

}  // namespace fencepost::proxy
