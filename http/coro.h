#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace fencepost {

// Every coroutine of the server runs on the one io_context, so its frames
// carry that context's concrete executor rather than Asio's type-erased
// any_io_executor: no type-erased copy, dispatch or work count per step.
using Executor = boost::asio::io_context::executor_type;

template <class T = void>
using Awaitable = boost::asio::awaitable<T, Executor>;

inline constexpr boost::asio::use_awaitable_t<Executor> kUseAwaitable{};

}  // namespace fencepost
