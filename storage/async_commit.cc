#include "storage/async_commit.h"

#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>

namespace fencepost::storage {

namespace asio = boost::asio;

// Not a coroutine itself: it returns the awaitable that async_initiate makes.
boost::asio::awaitable<fence::WriteOutcome> AsyncCommit(
    fence::Committer& committer, fence::FenceWrite write) {
  auto initiate = [&committer](auto handler, fence::FenceWrite write) {
    // The committer's callback is a copyable std::function; the coroutine's
    // handler is move-only, so it travels in a shared_ptr.
    using Handler = decltype(handler);
    auto shared = std::make_shared<Handler>(std::move(handler));
    auto work = asio::make_work_guard(asio::get_associated_executor(*shared));
    committer.Submit(std::move(write), [shared, work](fence::WriteOutcome o) {
      asio::post(work.get_executor(), [shared, o = std::move(o)]() mutable {
        (*shared)(std::move(o));
      });
    });
  };
  return asio::async_initiate<decltype(asio::use_awaitable),
                              void(fence::WriteOutcome)>(
      initiate, asio::use_awaitable, std::move(write));
}

boost::asio::awaitable<fence::WriteOutcome> CommitFence(
    fence::Shards& shards, const WriteRequest& request) {
  return AsyncCommit(shards.CommitterOf(request.fence), ToFenceWrite(request));
}

fence::FenceWrite ToFenceWrite(const WriteRequest& request) {
  fence::FenceWrite write;
  write.fence = request.fence;
  write.token = request.token;
  write.observe = request.observe;
  return write;
}

bool Applied(const fence::WriteOutcome& outcome) {
  using Verdict = fence::WriteOutcome::Verdict;
  return outcome.verdict == Verdict::kAccepted ||
         outcome.verdict == Verdict::kObserved;
}

}  // namespace fencepost::storage
