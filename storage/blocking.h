#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>

#include "http/coro.h"

namespace fencepost::storage {

// Runs `f` (blocking file I/O) on `pool` and resumes the awaiting coroutine
// on its own executor with f's result. Not a coroutine itself: it returns the
// awaitable async_initiate makes, so the caller must co_await it at once
// (then `f` may refer to the caller's locals).
template <class R, class F>
Awaitable<R> RunBlocking(boost::asio::thread_pool& pool, F f) {
  namespace asio = boost::asio;
  auto initiate = [&pool](auto handler, F f) {
    using Handler = decltype(handler);
    auto shared = std::make_shared<Handler>(std::move(handler));
    auto work = asio::make_work_guard(asio::get_associated_executor(*shared));
    asio::post(pool, [shared, work, f = std::move(f)]() mutable {
      R result = f();
      asio::post(work.get_executor(),
                 [shared, result = std::move(result)]() mutable {
                   (*shared)(std::move(result));
                 });
    });
  };
  return asio::async_initiate<decltype(kUseAwaitable), void(R)>(
      initiate, kUseAwaitable, std::move(f));
}

}  // namespace fencepost::storage
