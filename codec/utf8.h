#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fencepost::codec {

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past
// U+10FFFF.
bool IsValidUtf8(std::string_view s);

// Appends code point `cp` (at most U+10FFFF) to `out` in UTF-8.
void AppendUtf8(std::string* out, std::uint32_t cp);

}  // namespace fencepost::codec
