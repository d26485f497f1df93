// libFuzzer target: Fencing-Token parsing. A token that parses is 1 to 20
// ASCII digits (after trimming spaces and tabs) naming a uint64, and prints
// back to a text that parses to the same value.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fence/token.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto token = fencepost::fence::ParseToken(text);
  if (!token) return 0;
  std::string_view digits = text;
  while (!digits.empty() && (digits.front() == ' ' || digits.front() == '\t')) {
    digits.remove_prefix(1);
  }
  while (!digits.empty() && (digits.back() == ' ' || digits.back() == '\t')) {
    digits.remove_suffix(1);
  }
  if (digits.empty() || digits.size() > 20) std::abort();
  for (char c : digits) {
    if (c < '0' || c > '9') std::abort();
  }
  if (fencepost::fence::ParseToken(std::to_string(*token)) != token) {
    std::abort();
  }
  return 0;
}
