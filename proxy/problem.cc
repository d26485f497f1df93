#include "proxy/problem.h"

#include <array>

#include "fence/errc.h"
#include "proxy/http_types.h"
#include "storage/errc.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;

namespace {

struct Info {
  http::status status;
  std::string_view slug;
  std::string_view title;
};

// The problems of the storage behind the fences.
Info StorageInfoOf(ProblemType type) {
  switch (type) {
    case ProblemType::kMapFull:
      return {http::status::insufficient_storage, "map-full",
              "Storage is full (LMDB map at --max-map-size)"};
    case ProblemType::kKeyCollision:
      return {http::status::conflict, "key-collision",
              "The key collides with a file or directory of the other kind"};
    case ProblemType::kDiskFull:
      return {http::status::insufficient_storage, "disk-full",
              "The backend's file system is full"};
    case ProblemType::kUpstreamFailed:
      return {http::status::bad_gateway, "upstream-failed",
              "The upstream refused or failed before the write was sent"};
    case ProblemType::kOutcomeUnknown:
      return {http::status::gateway_timeout, "upstream-outcome-unknown",
              "The upstream's outcome is unknown"};
    case ProblemType::kFenceHeld:
      return {http::status::service_unavailable, "fence-held",
              "The fence is held closed after an unknown upstream outcome"};
    case ProblemType::kStorageFailure:
      return {http::status::internal_server_error, "storage-failure",
              "Storage failure"};
    case ProblemType::kStoreUnavailable:
      return {http::status::service_unavailable, "fence-store-unavailable",
              "The fence store (etcd) is unavailable"};
    default:
      break;
  }
  return {http::status::bad_gateway, "store-error",
          "The store behind the fences answered an error"};
}

Info InfoOf(ProblemType type) {
  switch (type) {
    case ProblemType::kStaleToken:
      return {http::status::conflict, "stale-token",
              "Fencing token is lower than the fence's highest"};
    case ProblemType::kMissingToken:
      return {http::status::precondition_required, "missing-token",
              "Fencing-Token header is required"};
    case ProblemType::kInvalidToken:
      return {http::status::bad_request, "invalid-token",
              "Fencing-Token is not a plain decimal uint64"};
    case ProblemType::kBadKey:
      return {http::status::bad_request, "bad-key", "Invalid key"};
    case ProblemType::kBadRequest:
      return {http::status::bad_request, "bad-request", "Bad request"};
    case ProblemType::kBadFraming:
      return {http::status::bad_request, "bad-framing",
              "Ambiguous or malformed HTTP framing"};
    case ProblemType::kBodyTooLarge:
      return {http::status::payload_too_large, "body-too-large",
              "Request body is larger than --max-body"};
    case ProblemType::kHeadersTooLarge:
      return {http::status::request_header_fields_too_large,
              "headers-too-large", "Request headers are larger than 16 KiB"};
    case ProblemType::kMethodNotAllowed:
      return {http::status::method_not_allowed, "method-not-allowed",
              "Method not allowed"};
    case ProblemType::kNotFound:
      return {http::status::not_found, "not-found", "Not found"};
    case ProblemType::kUnauthorized:
      return {http::status::unauthorized, "unauthorized",
              "A valid bearer token is required"};
    case ProblemType::kOverloaded:
      return {http::status::service_unavailable, "overloaded", "Overloaded"};
    case ProblemType::kLeaseHeld:
      return {http::status::conflict, "lease-held",
              "The lease is held by another holder"};
    case ProblemType::kLeaseNotHeld:
      return {http::status::conflict, "lease-not-held",
              "The lease is not held by this holder with this token"};
    case ProblemType::kTooManyConnections:
      return {http::status::service_unavailable, "too-many-connections",
              "Too many connections"};
    case ProblemType::kTokensExhausted:
      return {http::status::conflict, "tokens-exhausted",
              "No higher fencing token is left to grant"};
    case ProblemType::kTooManyLeases:
      return {http::status::insufficient_storage, "too-many-leases",
              "Too many live leases"};
    case ProblemType::kPreconditionFailed:
      return {http::status::precondition_failed, "precondition-failed",
              "The value's entity tag does not meet the precondition"};
    case ProblemType::kMapFull:
    case ProblemType::kKeyCollision:
    case ProblemType::kDiskFull:
    case ProblemType::kUpstreamFailed:
    case ProblemType::kOutcomeUnknown:
    case ProblemType::kFenceHeld:
    case ProblemType::kStorageFailure:
    case ProblemType::kStoreUnavailable:
    case ProblemType::kStoreError:
      return StorageInfoOf(type);
  }
  return {http::status::internal_server_error, "internal", "Internal error"};
}

}  // namespace

http::status StatusOf(ProblemType type) { return InfoOf(type).status; }

std::string_view TypeUri(ProblemType type) {
  constexpr int kCount = static_cast<int>(ProblemType::kLast) + 1;
  static const std::array<std::string, kCount> uris = [] {
    std::array<std::string, kCount> out;
    for (int i = 0; i < kCount; ++i) {
      out[i] = "urn:fencepost:problem:" +
               std::string(InfoOf(static_cast<ProblemType>(i)).slug);
    }
    return out;
  }();
  return uris[static_cast<int>(type)];
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
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

}  // namespace fencepost::proxy
