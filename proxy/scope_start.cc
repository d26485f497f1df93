#include "proxy/scope_start.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "storage/async_commit.h"

namespace fencepost::proxy {
namespace {

constexpr std::size_t kPage = 1000;

Awaitable<std::optional<fence::Token>> TokenOf(storage::Fences& fences,
                                               const std::string& name) {
  const storage::Fences::Read read = co_await fences.Get(name);
  if (read.error) {
    throw std::runtime_error("cannot read the fence " + name + ": " +
                             read.error.message());
  }
  co_return read.fence ? std::optional(read.fence->token) : std::nullopt;
}

// Raises the fence of `scope` to the highest fence that guarded its keys
// (fence::ScopeFloor), if above it.
Awaitable<void> RaiseScope(storage::Fences& fences, const fence::Scopes& scopes,
                           const fence::ScopeRecord& last,
                           const std::string& scope) {
  const std::optional<fence::Token> was = co_await TokenOf(fences, scope);
  std::optional<fence::Token> carved;
  if (const auto from = fence::CarvedFrom(last, scope)) {
    carved = co_await TokenOf(fences, *from);
  }
  std::optional<fence::Token> floor;
  std::string after;
  do {
    const storage::Fences::ListRead page =
        co_await fences.List(scope, after, kPage);
    if (page.error) {
      throw std::runtime_error("cannot list the fences under " + scope + ": " +
                               page.error.message());
    }
    std::vector<fence::NamedToken> under;
    for (const fence::FenceRecord& record : page.list.fences) {
      under.push_back({record.name, record.token});
    }
    if (auto higher = fence::ScopeFloor(scopes, scope, floor ? floor : was,
                                        under, floor ? std::nullopt : carved)) {
      floor = higher;
    }
    after = page.list.next.value_or("");
  } while (!after.empty());
  if (!floor) co_return;
  fence::FencedWrite bump;
  bump.fence = scope;
  bump.token = *floor;
  const fence::WriteOutcome outcome =
      co_await storage::AsyncCommit(fences, std::move(bump));
  if (outcome.verdict != fence::WriteOutcome::Verdict::kAccepted &&
      outcome.verdict != fence::WriteOutcome::Verdict::kRejected) {
    throw std::runtime_error("cannot raise the fence of the scope " + scope +
                             ": " + outcome.error.message());
  }
  spdlog::info(
      "the scope {} starts at token {}, the highest fence that guarded its "
      "keys (it was {})",
      scope, *floor, was ? std::to_string(*was) : "unset");
}

}  // namespace

Awaitable<std::string> StartScopes(storage::Fences& fences,
                                   const fence::Scopes& scopes) {
  if (std::string refusal = co_await fences.CheckFormat(); !refusal.empty()) {
    co_return refusal;
  }
  const fence::ScopeRecord last = co_await fences.RecordedScopes();
  std::vector<fence::RecordedScope> recorded;
  for (const auto* names : {&last.served, &last.retired}) {
    for (const std::string& name : *names) {
      // Not inside the braces: g++ 12 miscompiles a co_await in an
      // aggregate's initializer list (the temporaries are destroyed twice).
      const std::optional<fence::Token> token = co_await TokenOf(fences, name);
      recorded.push_back({name, token});
    }
  }
  fence::ScopePlan plan = fence::PlanScopes(scopes, recorded);
  if (!plan.refusal.empty()) co_return plan.refusal;
  if (std::string refusal =
          fences.RefuseScopeChange(fence::Scopes(last.served), scopes);
      !refusal.empty()) {
    co_return refusal;
  }
  // Raised first: a start that stops before its record is written finds
  // the same scopes new again, and raises them again from the same record.
  for (const std::string& scope : scopes.prefixes()) {
    co_await RaiseScope(fences, scopes, last, scope);
  }
  if (!(plan.record == last)) co_await fences.RecordScopes(plan.record);
  co_return std::string();
}

}  // namespace fencepost::proxy
