#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fence/token.h"

namespace fencepost::fence {

// A fence: the highest token accepted for a key or a scope of keys.
struct FenceRecord {
  std::string name;
  Token token = 0;
  std::int64_t updated_at_ns = 0;  // Unix time `token` was set (a raise)
};

struct FenceList {
  std::vector<FenceRecord> fences;
  std::optional<std::string> next;  // the `after` of the following page
};

}  // namespace fencepost::fence
