#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/awaitable.hpp>

#include "fence/committer.h"

namespace fencepost::storage {

// Submits `write` to `committer` and resumes the calling coroutine, on its own
// executor, once the write's group is durable (or failed).
boost::asio::awaitable<fence::WriteOutcome> AsyncCommit(
    fence::Committer& committer, fence::FenceWrite write);

}  // namespace fencepost::storage
