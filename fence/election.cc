#include "fence/election.h"

#include <algorithm>

namespace fencepost::fence {

ElectedToken CheckElectedToken(std::optional<Token> fence, Token token,
                               std::optional<Token> holder) {
  if (fence && token <= *fence) return ElectedToken::kDecidedByFence;
  if (holder && token == *holder) return ElectedToken::kConfirmed;
  return ElectedToken::kAskSource;
}

HolderVerdict JudgeHolder(std::optional<Token> fence, Token holder) {
  if (!fence || holder > *fence) return HolderVerdict::kRaise;
  if (holder == *fence) return HolderVerdict::kAtFence;
  return HolderVerdict::kBehind;
}

std::optional<std::size_t> LowestSequence(
    const std::vector<std::string_view>& children) {
  constexpr std::size_t kDigits = 10;
  std::optional<std::size_t> lowest;
  std::string_view lowest_sequence;
  for (std::size_t i = 0; i < children.size(); ++i) {
    const std::string_view name = children[i];
    if (name.size() < kDigits) continue;
    const std::string_view sequence = name.substr(name.size() - kDigits);
    if (!std::all_of(sequence.begin(), sequence.end(),
                     [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    // Ten digits each: their order as text is their order as numbers.
    if (!lowest || sequence < lowest_sequence) {
      lowest = i;
      lowest_sequence = sequence;
    }
  }
  return lowest;
}

}  // namespace fencepost::fence
