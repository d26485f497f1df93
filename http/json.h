#pragma once

#include <cstdint>
#include <string>

#include "codec/base64.h"
#include "codec/json.h"

namespace fencepost::http {

// The JSON reader and writer, and base64, are codec/'s (one of each for
// the server and the client library); the server's folders name them here.
using codec::AppendJsonString;
using codec::DecodeBase64;
using codec::JsonLimits;
using codec::JsonMember;
using codec::JsonScalar;
using codec::JsonShape;
using codec::JsonStats;
using codec::JsonValue;
using codec::ParseFlatObject;
using codec::ParseJson;

// RFC 3339 UTC with microseconds, e.g. "2026-11-29T08:35:26.123456Z".
std::string FormatRfc3339(std::int64_t unix_ns);

}  // namespace fencepost::http
