#pragma once

#include <string>
#include <string_view>

namespace fencepost::codec {

// The value of a hex digit (either case), or -1 for any other character.
constexpr int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `bytes` as lower-case hex, two digits a byte.
std::string HexOf(std::string_view bytes);

}  // namespace fencepost::codec
