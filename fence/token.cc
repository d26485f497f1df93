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

TokenState ReadTokenValues(const std::vector<std::string_view>& values,
                           Token* token) {
  if (values.empty()) return TokenState::kMissing;
  if (values.size() > 1) return TokenState::kInvalid;
  const std::optional<Token> parsed = ParseToken(values.front());
  if (!parsed) return TokenState::kInvalid;
  *token = *parsed;
  return TokenState::kOk;
}

std::string ShowPresented(const std::vector<std::string_view>& values) {
  std::string out;
  for (const std::string_view value : values) {
    if (!out.empty()) out += ", ";
    out += value;
  }
  if (out.size() > kMaxPresentedBytes) {
    std::size_t cut = kMaxPresentedBytes;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    out.resize(cut);
    out += "...";
  }
  return out;
}

}  // namespace fencepost::fence
