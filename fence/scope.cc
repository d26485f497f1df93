#include "fence/scope.h"

#include <algorithm>

namespace fencepost::fence {

Scopes::Scopes(std::vector<std::string> prefixes)
    : prefixes_(std::move(prefixes)) {
  std::sort(prefixes_.begin(), prefixes_.end(),
            [](const std::string& a, const std::string& b) {
              return a.size() != b.size() ? a.size() > b.size() : a < b;
            });
  prefixes_.erase(std::unique(prefixes_.begin(), prefixes_.end()),
                  prefixes_.end());
}

std::string_view Scopes::FenceFor(std::string_view key) const {
  for (const std::string& prefix : prefixes_) {
    if (key.substr(0, prefix.size()) == prefix) return prefix;
  }
  return key;
}

}  // namespace fencepost::fence
