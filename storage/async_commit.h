#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <functional>

#include "fence/committer.h"
#include "fence/shards.h"
#include "storage/backend.h"
#include "storage/fences.h"

namespace fencepost::storage {

// Submits `write` to `committer` and resumes the calling coroutine, on its own
// executor, once the write's group is durable (or failed). The outcome's
// verdict is kAccepted, kObserved, kRejected (stale: nothing changed) or
// kFailed with outcome.error fence::Errc::kMapFull, kStorage or kOverloaded
// (nothing changed). Never throws.
boost::asio::awaitable<fence::WriteOutcome> AsyncCommit(
    fence::Committer& committer, fence::FenceWrite write);
// The same through `submit` (a Submit of fence::Committer's contract).
boost::asio::awaitable<fence::WriteOutcome> AsyncSubmit(
    std::function<void(fence::FenceWrite, fence::Committer::Done)> submit,
    fence::FenceWrite write);
// The same through `fences` (Fences::Submit).
boost::asio::awaitable<fence::WriteOutcome> AsyncCommit(
    Fences& fences, fence::FenceWrite write);

// For backends that keep values outside the fence store: the fence write
// of `request` alone (ToFenceWrite), made durable before the value is
// written, taking the fence's turn among replicas (Fences::CommitInTurn;
// end it with Fences::EndTurn). Outcomes and errors as AsyncCommit's, and
// Errc::kFenceHeld. The caller keeps `request` alive until it completes.
boost::asio::awaitable<std::pair<fence::WriteOutcome, Fences::Turn>>
CommitFenceInTurn(Fences& fences, const WriteRequest& request);

// The fence part of `request` (fence, token, observe; no value): the one
// place a WriteRequest becomes a fence::FenceWrite. Cannot fail.
fence::FenceWrite ToFenceWrite(const WriteRequest& request);

// Whether a fence outcome lets the value be written (accepted, or observed).
// Cannot fail.
bool Applied(const fence::WriteOutcome& outcome);

}  // namespace fencepost::storage
