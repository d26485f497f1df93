#pragma once

#include <string_view>

namespace fencepost::text {

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past
// U+10FFFF. Keys (fence/) and JSON strings (http/) must both pass it, so it
// sits below both.
bool IsValidUtf8(std::string_view s);

}  // namespace fencepost::text
