#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fencepost::client {

// The lease document of GET and PUT /v1/leases/{name} (SPEC "Leases").
struct Lease {
  std::string name;
  std::optional<std::string> holder;  // nullopt: free (expired or released)
  std::uint64_t token = 0;
  std::int64_t ttl_ms = 0;
  std::int64_t expires_in_ms = 0;
  std::string acquired_at;  // RFC 3339; "" when absent or null
  std::string renewed_at;   // RFC 3339; "" when absent or null
  std::uint64_t transitions = 0;
};

// The fence document of /v1/fences/{key}.
struct Fence {
  std::string name;  // the fence's name: the key, or the scope guarding it
  std::uint64_t token = 0;
  std::string updated_at;  // RFC 3339
};

// One entry of a batch's 200 answer, {"results": [{"key": K, "status": S},
// ...]} (SPEC "Batches"): one per op, in the order of the ops.
struct BatchResult {
  std::string key;
  int status = 0;  // 201 created, 200 replaced, 204 deleted
};

// An application/problem+json body (RFC 9457) with fencepost's members.
struct Problem {
  std::string type;  // e.g. "urn:fencepost:problem:lease-held"
  std::string title;
  std::string detail;
  int status = 0;
  std::optional<std::string> key;
  std::optional<std::string> holder;          // lease-held
  std::optional<std::int64_t> expires_in_ms;  // lease-held
  std::optional<std::uint64_t> current_token;
  std::optional<std::uint64_t> presented_token;

  // The last segment of `type` ("lease-held", "stale-token", ...).
  std::string_view slug() const;
};

// Each reads one document; nullopt when `body` is not JSON, not an object,
// or lacks a member the document cannot do without (Lease: name, holder as
// a string or null, token; Fence: fence, token; Problem: type; batch
// results: results, an array whose every element is an object with a
// string key and an integer status from 100 to 999). Members of the wrong
// type are treated as absent; unknown members are ignored. Integers are
// read exactly.
std::optional<Lease> ParseLease(std::string_view body);
std::optional<Fence> ParseFence(std::string_view body);
std::optional<Problem> ParseProblem(std::string_view body);
std::optional<std::vector<BatchResult>> ParseBatchResults(
    std::string_view body);

}  // namespace fencepost::client
