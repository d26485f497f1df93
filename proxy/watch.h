#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "proxy/http_types.h"

// The watch routes' shared parts: what the admin route checks and the
// server then streams (GET /v1/watch), and the long poll's query. Internal
// to proxy/.
namespace fencepost::proxy::watch {

inline constexpr std::string_view kPath = "/v1/watch";
inline constexpr std::string_view kEventStream = "text/event-stream";
// Set on a long poll's answer when it timed out.
inline constexpr std::string_view kWatchHeader = "Fencepost-Watch";

// A comment line on an idle stream this often keeps it open through
// proxies and load balancers.
inline constexpr int kKeepAliveSeconds = 15;
// The long poll's timeout_ms: the default and the largest.
inline constexpr std::uint64_t kDefaultWaitMs = 30000, kMaxWaitMs = 300000;

struct Query {
  std::string prefix;
  std::optional<std::uint64_t> last_id;  // Last-Event-ID
};

// The prefix and Last-Event-ID of a GET /v1/watch, or nullopt with the
// reason in *refusal: a prefix longer than a key may be, a Last-Event-ID
// that is not a decimal id, HTTP/1.0 (a stream is sent chunked).
std::optional<Query> ParseQuery(const Request& request, std::string* refusal);

// Whether `request` would hold its connection while the server waits for
// changes: an event stream (GET /v1/watch) or a long poll (GET or HEAD of
// /v1/fences/KEY with wait_above). The server keeps room on the admin port
// beside them, and ends them when their client leaves.
bool HoldsConnection(const Request& request);
// Whether `request` asks for an event stream (GET /v1/watch).
bool IsStreamRequest(const Request& request);

// Whether `response` opens an event stream (the route accepted a watch):
// the server then streams it instead of writing it.
bool IsEventStream(const Response& response);

// A decimal query value or header of at most 20 digits that fits in 64
// bits; nullopt otherwise.
std::optional<std::uint64_t> ParseUnsigned(std::string_view text);

}  // namespace fencepost::proxy::watch
