#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fence/fence_record.h"
#include "fence/lease.h"
#include "fence/lease_table.h"
#include "fence/token.h"
#include "proxy/core.h"
#include "proxy/http_types.h"
#include "proxy/problem.h"

// What the data, admin and lease routes of Service share: response builders
// and the parsing of the token header and the query. Internal to proxy/.
namespace fencepost::proxy::routes {

inline constexpr std::string_view kTokenHeader = "Fencing-Token";
inline constexpr std::string_view kFencesPath = "/v1/fences";
inline constexpr std::string_view kLeasesPath = "/v1/leases";

// `problem` as a complete response in the request's HTTP version.
Response Problemed(const Request& req, Problem problem);

// A complete response with `body`, Content-Length set.
Response Text(const Request& req, boost::beast::http::status status,
              std::string body,
              std::string_view content_type = "text/plain; charset=utf-8");

// The 405 with `Allow: allow`.
Response MethodNotAllowed(const Request& req, std::string_view allow);

// HEAD (RFC 9110 section 9.3.2): the GET's header fields, Content-Length
// included, and no body. `unread_size` is the length of a body that was
// never read (a backend answered HEAD from its metadata); otherwise a body
// present is measured and dropped. Does nothing for other methods. The one
// place the HEAD body rule lives.
void FinishHead(const Request& req, Response& res,
                std::optional<std::uint64_t> unread_size = std::nullopt);

// The Fencing-Token header's values (fence::ReadTokenValues).
using TokenState = fence::TokenState;
std::vector<std::string_view> TokenValues(const Request& req);
TokenState ReadToken(const Request& req, fence::Token* token);

// The path of a target, without its query.
std::string_view PathOf(std::string_view target);

// A bad key's `key` member, like every other problem's: the decoded key when
// the path of `target` decodes (well-formed escapes, UTF-8 without NUL),
// else the path as it was sent; at most fence::kMaxNameBytes, cut on a
// character boundary. JSON escaping does the rest.
std::string ShownKey(std::string_view target);

// One query parameter, percent-decoded with '+' as space; nullopt if absent.
// A malformed escape is kept as it is.
std::optional<std::string> QueryParam(std::string_view target,
                                      std::string_view name);

// The `limit` query parameter: 100 when absent, clamped to 1000; 0 or a
// non-number is a 400, returned in *refused.
std::size_t LimitOf(const Request& req, std::optional<Response>* refused);

// When a lease runs out unless renewed, by the wall clock of its last grant
// or renewal (for log lines; expiry itself is on the monotonic clock).
std::string ExpiresAt(const fence::LeaseRecord& lease);

// The fence document (GET /v1/fences/KEY, and watchers' fence events).
void AppendFence(std::string* out, const fence::FenceRecord& fence);
// The lease document (GET /v1/leases/NAME, and watchers' lease events);
// `holder` is null unless the lease is live at `now`.
void AppendLease(std::string* out, const std::string& name,
                 const fence::LeaseTable::Entry& entry, std::int64_t now);

// The answer to a read of one key on the data port: its problem, 304, the
// upstream's answer as it is, or the value (200, with Content-Type, ETag
// and Fencing-Token; a HEAD's without its body).
// `body`: where a streamed value's body goes (ReadResult::stream), when
// the answer is that value's.
Response AnswerRead(const Request& req, ReadDone& done,
                    std::unique_ptr<BodySource>* body = nullptr);
// The answer to a write of one key: its problem, the upstream's answer (with
// the fence's token), or 201 for a PUT that made the value, 200 for one that
// replaced it, 204 for a DELETE; with Fencing-Token and ETag.
Response AnswerWrite(const Request& req, Written& written);

// The 409 problem for a stale token.
Problem StaleToken(const std::string& key, fence::Token presented,
                   std::optional<fence::Token> current);

}  // namespace fencepost::proxy::routes
