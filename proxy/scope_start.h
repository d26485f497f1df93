#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <string>

#include "fence/scope.h"
#include "http/coro.h"
#include "storage/fences.h"

namespace fencepost::proxy {

// Before the ports open: applies fence::PlanScopes and fence::ScopeFloor to
// `fences` under the configured `scopes`, so that no --fence-scope change
// lowers a fence. Records the scopes, then raises each scope's fence to
// the highest fence it now guards (durably, through the store's own
// commit). Returns why the store must not be served (empty when it may).
// Throws std::runtime_error when the store cannot be read or written.
Awaitable<std::string> StartScopes(storage::Fences& fences,
                                   const fence::Scopes& scopes);

}  // namespace fencepost::proxy
