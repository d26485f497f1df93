#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fencepost::fence {

// Maps keys to the fences that guard them. By default every key is its own
// fence; a key that starts with a configured scope prefix shares that
// prefix's fence, and the longest matching prefix wins.
//
// Thread safety: immutable after construction.
class Scopes {
 public:
  explicit Scopes(std::vector<std::string> prefixes);

  // The name of the fence guarding `key`: a scope prefix, or the key itself.
  std::string_view FenceFor(std::string_view key) const;

 private:
  std::vector<std::string> prefixes_;  // longest first
};

}  // namespace fencepost::fence
