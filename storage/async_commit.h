#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <functional>

#include "fence/write.h"
#include "http/coro.h"
#include "storage/backend.h"
#include "storage/fences.h"

namespace fencepost::storage {

// Submits `write` through `submit` (a Submit of fence::Committer's
// contract) and resumes the calling coroutine, on its own executor, once
// the write's group is durable (or failed). The outcome's verdict is
// kAccepted, kObserved, kRejected (stale: nothing changed) or kFailed with
// outcome.error fence::Errc::kMapFull, kStorage or kOverloaded (nothing
// changed). Never throws.
Awaitable<fence::WriteOutcome> AsyncSubmit(
    std::function<void(fence::FenceWrite, fence::WriteDone)> submit,
    fence::FenceWrite write);
// The same through `fences` (Fences::Submit), and then, before the calling
// coroutine goes on, the changes the write made told to the store's channel
// (Fences::TellChangesOf).
Awaitable<fence::WriteOutcome> AsyncCommit(Fences& fences,
                                           fence::FenceWrite write);

// The fence part of `request` (fence, token, observe, precondition; no
// value): the one
// place a WriteRequest becomes a fence write. Cannot fail.
fence::FencedWrite ToFencedWrite(const WriteRequest& request);
// The same with its value (a put's body, or a delete), for the engines that
// keep values with their fences.
fence::FencedWrite WithValue(WriteRequest request);

}  // namespace fencepost::storage
