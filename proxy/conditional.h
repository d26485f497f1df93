#pragma once

// Conditional requests on the data port (SPEC "Conditional writes"): the
// If-Match and If-None-Match fields read into fence::Precondition, whose
// rules are fence/rules.h's, and entity tags as ETag spells them.

#include <optional>
#include <string>
#include <string_view>

#include "fence/write.h"
#include "proxy/core.h"
#include "proxy/http_types.h"
#include "proxy/problem.h"

namespace fencepost::proxy {

// `tag` between double quotes, as ETag and If-Match spell it.
std::string QuoteTag(std::string_view tag);

// If-Match and If-None-Match of `req` (every field of each, joined as one
// list): `*`, or a list of entity tags (RFC 9110 8.8.3). If-Match compares
// strongly, so a weak tag (W/"x") in it never matches; If-None-Match
// compares weakly, so W/ is dropped. Returns "" or what is malformed (the
// 400's detail); `*out` is then unspecified.
std::string ReadPreconditions(const Request& req, fence::Precondition* out);

// The fields of a write of one key that either door reads alike into
// `call`: If-Match and If-None-Match and Content-Type (unless `forwarded`:
// a forwarding backend's upstream gets them with the request), and for a
// PUT those a store keeps with its value (s3::KeptWithObject). The
// 400's problem when one is malformed; `call` is then unspecified.
std::optional<Problem> ReadWriteFields(const Request& req, bool forwarded,
                                       WriteCall& call);

// A batch op's "if_match" member: "*", or one tag, quoted or bare; false
// when it is neither (empty, or a character a tag cannot hold).
bool BatchIfMatch(std::string_view value, fence::Precondition* out);

}  // namespace fencepost::proxy
