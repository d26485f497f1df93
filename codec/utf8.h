#pragma once

#include <string_view>

namespace fencepost::codec {

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past
// U+10FFFF.
bool IsValidUtf8(std::string_view s);

}  // namespace fencepost::codec
