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
// serves with a set of scopes, it records them (ScopeRecord), and:
// - a scope that is new starts at the highest fence among those that
//   guarded its keys before: the fences under its prefix that it now
//   guards, and the fence of the scope it was carved out of (the longest
//   scope served last time that is a prefix of it) (ScopeFloor,
//   CarvedFrom), so no write refused before is accepted;
// - a recorded scope whose fence exists but that no configured scope covers
//   any more makes the start fail (PlanScopes' refusal): its keys would fall
//   back to fences of their own, below it, and a key never written has no
//   fence at all. A scope that a wider configured scope covers may go: the
//   wider one starts at least at its fence.
// A store with no record (new, or last served by a release before records)
// takes the flags of its first start as what it served.

// What a store records of its scopes: those served at its last start, and
// those served before that whose fences exist (retired).
struct ScopeRecord {
  std::vector<std::string> served;   // sorted
  std::vector<std::string> retired;  // sorted
  bool operator==(const ScopeRecord&) const = default;
};
// Each name NUL-terminated after a byte naming its list ('s' or 'r').
std::string EncodeScopeRecord(const ScopeRecord& record);
// nullopt for bytes that EncodeScopeRecord did not make.
std::optional<ScopeRecord> DecodeScopeRecord(std::string_view bytes);

struct RecordedScope {
  std::string name;
  std::optional<Token> fence;  // nullopt: the scope's fence was never set
};
struct ScopePlan {
  std::string refusal;  // non-empty: do not serve, and why
  ScopeRecord record;   // what to record before serving
};
// `recorded`: every scope of the last record, served or retired, with its
// fence.
ScopePlan PlanScopes(const Scopes& configured,
                     const std::vector<RecordedScope>& recorded);

// The scope that guarded the keys of `scope` at the last start, when
// `scope` was not served then: the longest served scope that is a proper
// prefix of it. nullopt when there is none, or `scope` was served.
std::optional<std::string> CarvedFrom(const ScopeRecord& last,
                                      std::string_view scope);

// The token scope `scope` must start at, given the fences under its prefix
// (names and tokens, the scope's own among them or not) and `carved`, the
// fence of CarvedFrom's scope: the highest of those it guards now and
// `carved`, or nullopt when its fence is already at or above them.
struct NamedToken {
  std::string_view name;
  Token token = 0;
};
std::optional<Token> ScopeFloor(const Scopes& configured,
                                std::string_view scope,
                                std::optional<Token> scope_fence,
                                const std::vector<NamedToken>& under,
                                std::optional<Token> carved = std::nullopt);

}  // namespace fencepost::fence
