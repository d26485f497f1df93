#include "fence/token.h"

#include <limits>

namespace fencepost::fence {

std::optional<Token> ParseToken(std::string_view text) {
  auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.empty() || text.size() > 20) return std::nullopt;

  constexpr Token kMax = std::numeric_limits<Token>::max();
  Token value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const Token digit = static_cast<Token>(c - '0');
    if (value > (kMax - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

}  // namespace fencepost::fence
