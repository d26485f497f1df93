#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The token a request sent, from every value of its token field (each door
// names its own): kMissing when there is none, kInvalid unless there is
// exactly one and ParseToken reads it (then *token is set).
enum class TokenState { kOk, kMissing, kInvalid };
TokenState ReadTokenValues(const std::vector<std::string_view>& values,
                           Token* token);

// At most kMaxPresentedBytes of what was sent as the token (its values
// joined with ", "), for an invalid-token problem; "..." marks a cut, made
// on a character boundary so that valid UTF-8 stays valid.
inline constexpr std::size_t kMaxPresentedBytes = 64;
std::string ShowPresented(const std::vector<std::string_view>& values);

}  // namespace fencepost::fence
