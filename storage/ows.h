#pragma once

#include <string_view>

namespace fencepost::storage {

// Strips optional whitespace (SP and HTAB, RFC 9110 section 5.6.3) from both
// ends of a field value or list element.
inline std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace fencepost::storage
