#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fence/token.h"

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
  // Whether `name` is exactly one of the prefixes.
  bool IsScope(std::string_view name) const;
  // The prefixes, longest first.
  const std::vector<std::string>& prefixes() const { return prefixes_; }

 private:
  std::vector<std::string> prefixes_;  // longest first
};

// A fence never goes down, whatever the --fence-scope flags. Before a store
// serves with a set of scopes, it records them (every scope it has served
// stays recorded while its fence exists), and:
// - a scope that is new, or newly covers keys, starts at the highest fence
//   it now guards (ScopeFloor), so no write refused before is accepted;
// - a recorded scope whose fence exists but that no configured scope covers
//   any more makes the start fail (PlanScopes' refusal): its keys would fall
//   back to fences of their own, below it, and a key never written has no
//   fence at all. A scope that a wider configured scope covers may go: the
//   wider one starts at least at its fence.
struct RecordedScope {
  std::string name;
  std::optional<Token> fence;  // nullopt: the scope's fence was never set
};
struct ScopePlan {
  std::string refusal;              // non-empty: do not serve, and why
  std::vector<std::string> record;  // what to record before serving
};
ScopePlan PlanScopes(const Scopes& configured,
                     const std::vector<RecordedScope>& recorded);

// The token scope `scope` must start at, given the fences under its prefix
// (names and tokens, the scope's own among them or not): the highest of
// those it guards now, or nullopt when its fence is already at or above
// them.
struct NamedToken {
  std::string_view name;
  Token token = 0;
};
std::optional<Token> ScopeFloor(const Scopes& configured,
                                std::string_view scope,
                                std::optional<Token> scope_fence,
                                const std::vector<NamedToken>& under);

}  // namespace fencepost::fence
