#include "codec/duration.h"

#include <cstdint>

namespace fencepost::codec {

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  if (digits == 0 || digits > 18) return std::nullopt;
  std::int64_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) value = value * 10 + (text[i] - '0');
  const std::string_view unit = text.substr(digits);
  std::int64_t scale = 0;
  if (unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60 * 1000;
  } else if (unit == "h") {
    scale = 60 * 60 * 1000;
  } else {
    return std::nullopt;
  }
  if (value > INT64_MAX / scale) return std::nullopt;
  return std::chrono::milliseconds(value * scale);
}

std::string FormatDuration(std::chrono::milliseconds d) {
  const std::int64_t ms = d.count();
  if (ms != 0 && ms % (60 * 60 * 1000) == 0) {
    return std::to_string(ms / (60 * 60 * 1000)) + "h";
  }
  if (ms != 0 && ms % (60 * 1000) == 0) {
    return std::to_string(ms / (60 * 1000)) + "m";
  }
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace fencepost::codec
