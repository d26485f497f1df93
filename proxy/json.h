#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace fencepost::proxy {

// Appends `s` as a JSON string literal. Bytes that are not valid UTF-8 are
// written as \u00XX escapes so the output is always valid JSON.
void AppendJsonString(std::string* out, std::string_view s);

// A member value of a flat JSON object: a string (decoded), a number (as
// written), null, or a boolean ("true"/"false").
struct JsonScalar {
  enum class Kind { kString, kNumber, kNull, kBool };
  Kind kind = Kind::kNull;
  std::string text;
};

// Parses `text` (RFC 8259) as one object whose member values are all
// scalars, each name at most once, at most `max_members` of them. Returns
// an empty string on success, else what is wrong with it.
std::string ParseFlatObject(std::string_view text,
                            std::map<std::string, JsonScalar>* members,
                            std::size_t max_members = 16);

// RFC 3339 UTC with microseconds, e.g. "2026-11-29T08:35:26.123456Z".
std::string FormatRfc3339(std::int64_t unix_ns);

}  // namespace fencepost::proxy
