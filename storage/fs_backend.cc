#include "storage/fs_backend.h"

#include "fence/rules.h"
#include "storage/async_commit.h"
#include "storage/blocking.h"

namespace fencepost::storage {

FsBackend::FsBackend(const std::string& dir, Fences& fences,
                     std::size_t threads, bool exclusive)
    : tree_(dir, exclusive), fences_(fences), pool_(threads) {}

FsBackend::~FsBackend() { pool_.join(); }

Awaitable<ReadResult> FsBackend::Read(const ReadRequest& request) {
  FsValue value;
  const std::error_code error =
      co_await RunBlocking<std::error_code>(pool_, [this, &request, &value] {
        return tree_.Read(request.key, request.head, &value);
      });
  ReadResult result;
  result.error = error;
  result.found = value.found;
  result.body = std::move(value.body);
  result.size = value.size;
  result.token = value.token;
  co_return result;
}

Awaitable<WriteResult> FsBackend::Write(WriteRequest request) {
  WriteResult result;
  const bool remove = request.kind == WriteKind::kDelete;
  FenceLocks::Guard turn = co_await locks_.Acquire(request.fence);

  const std::error_code refused = co_await RunBlocking<std::error_code>(
      pool_,
      [this, &request, remove] { return tree_.Check(request.key, remove); });
  if (refused) {
    result.outcome.error = refused;
    co_return result;
  }

  auto [outcome, shared_turn] = co_await CommitFenceInTurn(fences_, request);
  result.outcome = std::move(outcome);
  if (!fence::Applied(result.outcome)) co_return result;

  bool created = false;
  const std::error_code failed = co_await RunBlocking<std::error_code>(
      pool_, [this, &request, remove, &created] {
        return remove ? tree_.Remove(request.key)
                      : tree_.Write(request.key, request.body, request.token,
                                    &created);
      });
  // The file is written (or the write failed without touching it).
  fences_.EndTurn(std::move(shared_turn), std::chrono::milliseconds(0));
  if (failed) {
    result.outcome.verdict = fence::WriteOutcome::Verdict::kFailed;
    result.outcome.error = failed;
  }
  result.created = created;
  co_return result;
}

Awaitable<bool> FsBackend::Ready() {
  if (!co_await fences_.Ready()) co_return false;
  // On the pool: a hung file system must not stall the io thread.
  co_return co_await RunBlocking<bool>(pool_,
                                       [this] { return tree_.Usable(); });
}

}  // namespace fencepost::storage
