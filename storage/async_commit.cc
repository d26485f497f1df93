#include "storage/async_commit.h"

#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <memory>

namespace fencepost::storage {

namespace asio = boost::asio;

// Not a coroutine itself: it returns the awaitable that async_initiate makes.
Awaitable<fence::WriteOutcome> AsyncSubmit(
    std::function<void(fence::FenceWrite, fence::WriteDone)> submit,
    fence::FenceWrite write) {
  auto initiate = [submit = std::move(submit)](auto handler,
                                               fence::FenceWrite write) {
    // The committer's callback is a copyable std::function; the coroutine's
    // handler is move-only, so it travels in a shared_ptr.
    using Handler = decltype(handler);
    auto shared = std::make_shared<Handler>(std::move(handler));
    auto work = asio::make_work_guard(asio::get_associated_executor(*shared));
    submit(std::move(write), [shared, work](fence::WriteOutcome o) {
      asio::post(work.get_executor(), [shared, o = std::move(o)]() mutable {
        (*shared)(std::move(o));
      });
    });
  };
  return asio::async_initiate<decltype(kUseAwaitable),
                              void(fence::WriteOutcome)>(
      std::move(initiate), kUseAwaitable, std::move(write));
}

Awaitable<fence::WriteOutcome> AsyncCommit(Fences& fences,
                                           fence::FenceWrite write) {
  const WriteSubject subject = SubjectOf(write);
  fence::WriteOutcome outcome = co_await AsyncSubmit(
      [&fences](fence::FenceWrite w, fence::WriteDone done) {
        fences.Submit(std::move(w), std::move(done));
      },
      std::move(write));
  // Durable now; told here, on the caller's thread, before it answers.
  fences.TellChangesOf(subject, outcome);
  co_return outcome;
}

// The default for stores without replicas: the commit alone, no turn.
Awaitable<std::pair<fence::WriteOutcome, Fences::Turn>> Fences::CommitInTurn(
    fence::FencedWrite write) {
  fence::WriteOutcome outcome = co_await AsyncCommit(*this, std::move(write));
  co_return std::pair{std::move(outcome), Turn{}};
}

fence::FencedWrite ToFencedWrite(const WriteRequest& request) {
  fence::FencedWrite write;
  write.fence = request.fence;
  write.token = request.token;
  write.observe = request.observe;
  write.precondition = request.precondition;
  return write;
}

fence::FencedWrite WithValue(WriteRequest request) {
  fence::FencedWrite write = ToFencedWrite(request);
  write.value = fence::ValueOp{request.kind == WriteKind::kDelete
                                   ? fence::ValueOp::Kind::kDelete
                                   : fence::ValueOp::Kind::kPut,
                               std::move(request.key), std::move(request.body),
                               std::move(request.content_type)};
  return write;
}

}  // namespace fencepost::storage
