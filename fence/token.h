#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fencepost::fence {

// A fencing token: an unsigned 64-bit number that only goes up each time
// leadership changes hands.
using Token = std::uint64_t;

// Parses a Fencing-Token header value. Surrounding spaces and tabs are trimmed,
// as HTTP does for field values; what remains must be 1 to 20 ASCII digits
// naming a value no greater than 18446744073709551615. Anything else (empty,
// a sign, inner space, hex, overflow) yields nullopt, the only error.
// Thread safety: a pure function.
std::optional<Token> ParseToken(std::string_view text);

}  // namespace fencepost::fence
