#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fencepost::proxy {

// Appends `s` as a JSON string literal. Bytes that are not valid UTF-8 are
// written as \u00XX escapes so the output is always valid JSON.
void AppendJsonString(std::string* out, std::string_view s);

// RFC 3339 UTC with microseconds, e.g. "2026-11-29T08:35:26.123456Z".
std::string FormatRfc3339(std::int64_t unix_ns);

}  // namespace fencepost::proxy
