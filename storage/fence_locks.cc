#include "storage/fence_locks.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace fencepost::storage {

namespace asio = boost::asio;

Awaitable<FenceLocks::Guard> FenceLocks::Acquire(const std::string& fence) {
  auto [it, free] = waiters_.try_emplace(fence);
  if (!free) {
    const auto executor = co_await asio::this_coro::executor;
    asio::steady_timer turn(executor, asio::steady_timer::time_point::max());
    it->second.push_back(&turn);
    boost::system::error_code ec;
    co_await turn.async_wait(asio::redirect_error(kUseAwaitable, ec));
  }
  co_return Guard(this, fence);
}

void FenceLocks::Release(const std::string& fence) {
  auto it = waiters_.find(fence);
  if (it == waiters_.end()) return;
  if (it->second.empty()) {
    waiters_.erase(it);
    return;
  }
  // Hand the turn straight to the oldest waiter: the fence stays held.
  asio::steady_timer* next = it->second.front();
  it->second.pop_front();
  next->cancel();
}

}  // namespace fencepost::storage
