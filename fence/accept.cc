#include "fence/accept.h"

namespace fencepost::fence {

Decision Decide(std::optional<Token> highest, Token token) {
  if (!highest) return {.accepted = true, .creates = true, .advances = false};
  if (token < *highest) return {};
  return {.accepted = true, .creates = false, .advances = token > *highest};
}

bool ReadAdmitted(std::optional<Token> highest, Token token) {
  return Decide(highest, token).accepted;
}

}  // namespace fencepost::fence
