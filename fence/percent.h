#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fencepost::fence {

// The value of a hex digit (either case), or -1 for any other character.
constexpr int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// How PercentDecode treats what is not a well-formed escape.
enum class PercentMode {
  // Paths (DecodeKey): every '%' starts two hex digits, or the input is
  // refused; '+' is itself.
  kStrict,
  // Query values (application/x-www-form-urlencoded): '+' is a space, and a
  // '%' not followed by two hex digits is kept as it is. Never refuses.
  kLenientQuery,
};

// `in` with each %XX replaced by its byte, once (a decoded '%' is not decoded
// again). Returns nullopt only in kStrict mode, for a malformed escape. The
// result may hold any byte, NUL and invalid UTF-8 included: callers check.
std::optional<std::string> PercentDecode(std::string_view in, PercentMode mode);

}  // namespace fencepost::fence
