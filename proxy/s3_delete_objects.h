#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <cstddef>
#include <string>
#include <vector>

#include "http/coro.h"
#include "proxy/core.h"
#include "proxy/http_types.h"
#include "sigv4/canonical.h"

namespace fencepost::proxy {

// DeleteObjects through the S3 front door (SPEC "S3 front door"): POST
// /BUCKET?delete with S3's <Delete> document. Each <Object>'s key is a
// fenced delete of the typed core, one Core::Write per key in the order
// given, the very call a DELETE of /BUCKET/KEY makes: every rule, count,
// event and log line is the same. The token is the request's
// Fencing-Token (a DeleteObjects carries no object metadata).
//
// A request the door cannot take is refused whole and deletes nothing:
// malformed XML, no key or more than kMaxDeleteKeys (400 MalformedXML, as
// S3), a <VersionId> or a conditional delete's <ETag>, <LastModifiedTime>
// or <Size> (501 NotImplemented: the door keeps no versions and decides no
// conditions here), x-amz-mfa or x-amz-bypass-governance-retention (501),
// a token missing outside observe mode (428 MissingFencingToken) or
// invalid, or sent as x-amz-meta-fencing-token (400 InvalidArgument).
// Otherwise the answer is 200 with S3's DeleteResult: a <Deleted> per key
// deleted (none in Quiet mode) and an <Error> per key refused, its Code
// S3CodeOf the core's problem (StaleFencingToken, SlowDown, ...) or
// InvalidArgument for a key the door would refuse (fence::ValidateKey).
//
// Thread safety: the server's one io thread, as Core.

// S3's bound on the keys of one DeleteObjects.
inline constexpr std::size_t kMaxDeleteKeys = 1000;

// Whether a request for the bucket with `params` (the door's operation
// parameters) asks for DeleteObjects: ?delete alone.
bool AsksDeleteObjects(const std::vector<sigv4::QueryParam>& params);

// What became of a DeleteObjects.
struct DeleteObjectsDone {
  // 200, or the whole request refused (nothing deleted) with S3's status,
  // code and message.
  unsigned status = 200;
  std::string code;
  std::string message;
  // 200: S3's DeleteResult document.
  std::string document;
};

// `body` is the request's verified (decoded) body, bounded by --max-body;
// `client` the address for the journal. Both, `request` and `core` must
// outlive the call.
Awaitable<DeleteObjectsDone> DeleteObjects(Core& core, const Request& request,
                                           const std::string& body,
                                           const std::string& client);

// A DeleteObjectsDone of status 200 as the door's answer: its document,
// with `request_id` in x-amz-request-id.
Response DeleteResultAnswer(const Request& request,
                            const DeleteObjectsDone& done,
                            const std::string& request_id);

}  // namespace fencepost::proxy
