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
  return std::find(prefixes_.begin(), prefixes_.end(), name) != prefixes_.end();
}

std::string EncodeScopeRecord(const ScopeRecord& record) {
  std::string out;
  for (const auto& [kind, names] :
       {std::pair{'s', &record.served}, std::pair{'r', &record.retired}}) {
    for (const std::string& name : *names) {
      out += kind;
      out += name;
      out += '\0';
    }
  }
  return out;
}

std::optional<ScopeRecord> DecodeScopeRecord(std::string_view bytes) {
  ScopeRecord record;
  while (!bytes.empty()) {
    const std::size_t end = bytes.find('\0');
    if (end == std::string_view::npos || end < 2 ||
        (bytes[0] != 's' && bytes[0] != 'r')) {
      return std::nullopt;
    }
    (bytes[0] == 's' ? record.served : record.retired)
        .emplace_back(bytes.substr(1, end - 1));
    bytes.remove_prefix(end + 1);
  }
  return record;
}

ScopePlan PlanScopes(const Scopes& configured,
                     const std::vector<RecordedScope>& recorded) {
  ScopePlan plan;
  plan.record.served = configured.prefixes();
  std::sort(plan.record.served.begin(), plan.record.served.end());
  for (const RecordedScope& scope : recorded) {
    if (!scope.fence || configured.IsScope(scope.name)) continue;
    plan.record.retired.push_back(scope.name);
    // A name covers itself only when no configured prefix does.
    if (plan.refusal.empty() && configured.FenceFor(scope.name) == scope.name) {
      plan.refusal = "the scope " + scope.name + " has a fence at token " +
                     std::to_string(*scope.fence) +
                     " but is not among the --fence-scope flags: its keys "
                     "would fall back to fences of their own, which may be "
                     "lower; start with --fence-scope " +
                     scope.name + " (or a shorter prefix that covers it)";
    }
  }
  std::sort(plan.record.retired.begin(), plan.record.retired.end());
  plan.record.retired.erase(
      std::unique(plan.record.retired.begin(), plan.record.retired.end()),
      plan.record.retired.end());
  return plan;
}

std::optional<std::string> CarvedFrom(const ScopeRecord& last,
                                      std::string_view scope) {
  std::optional<std::string> from;
  for (const std::string& served : last.served) {
    if (served == scope) return std::nullopt;
    if (served.size() < scope.size() &&
        scope.substr(0, served.size()) == served &&
        (!from || served.size() > from->size())) {
      from = served;
    }
  }
  return from;
}

std::optional<Token> ScopeFloor(const Scopes& configured,
                                std::string_view scope,
                                std::optional<Token> scope_fence,
                                const std::vector<NamedToken>& under,
                                std::optional<Token> carved) {
  std::optional<Token> floor = carved;
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
