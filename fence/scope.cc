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

bool Scopes::IsScope(std::string_view name) const {
  return std::find(prefixes_.begin(), prefixes_.end(), name) !=
         prefixes_.end();
}

ScopePlan PlanScopes(const Scopes& configured,
                     const std::vector<RecordedScope>& recorded) {
  ScopePlan plan;
  plan.record = configured.prefixes();
  for (const RecordedScope& scope : recorded) {
    if (!scope.fence || configured.IsScope(scope.name)) continue;
    plan.record.push_back(scope.name);
    // A name covers itself only when no configured prefix does.
    if (plan.refusal.empty() && configured.FenceFor(scope.name) == scope.name) {
      plan.refusal = "the scope " + scope.name + " has a fence at token " +
                     std::to_string(*scope.fence) +
                     " but is not among the --fence-scope flags: its keys "
                     "would fall back to fences of their own, which may be "
                     "lower; start with --fence-scope " + scope.name +
                     " (or a shorter prefix that covers it)";
    }
  }
  std::sort(plan.record.begin(), plan.record.end());
  return plan;
}

std::optional<Token> ScopeFloor(const Scopes& configured,
                                std::string_view scope,
                                std::optional<Token> scope_fence,
                                const std::vector<NamedToken>& under) {
  std::optional<Token> floor;
  for (const NamedToken& fence : under) {
    if (fence.name == scope || configured.FenceFor(fence.name) != scope) {
      continue;
    }
    if (!floor || fence.token > *floor) floor = fence.token;
  }
  if (!floor || (scope_fence && *scope_fence >= *floor)) return std::nullopt;
  return floor;
}

}  // namespace fencepost::fence
