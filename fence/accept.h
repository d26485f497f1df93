#pragma once

#include <optional>

#include "fence/token.h"

namespace fencepost::fence {

// The outcome of presenting a token to a fence.
struct Decision {
  bool accepted = false;  // t >= h, or no record yet
  bool creates = false;   // accepted and there was no record
  bool advances = false;  // accepted with t > h on an existing record (churn)
};

// The accept rule. `highest` is the fence's highest accepted token, nullopt
// when the fence has no record. A write with `token` is accepted when there is
// no record or token >= highest, and rejected when token < highest. An
// accepted write sets the fence to `token`, so a fence never goes down.
Decision Decide(std::optional<Token> highest, Token token);

// The rule of a fenced read (a read that presents `token`): answered when
// the accept rule would take the token, refused as stale when it is below
// the fence's highest, so a holder that was replaced cannot serve reads as
// leader. A read never moves the fence.
bool ReadAdmitted(std::optional<Token> highest, Token token);

}  // namespace fencepost::fence
