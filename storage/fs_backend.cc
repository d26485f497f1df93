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
  result.etag = std::move(value.etag);
  result.content_type = std::move(value.content_type);
  co_return result;
}

Awaitable<WriteResult> FsBackend::Write(WriteRequest request) {
  WriteResult result;
  const bool remove = request.kind == WriteKind::kDelete;
  FenceLocks::Guard turn = co_await locks_.Acquire(request.fence);

  fence::FencedWrite write = ToFencedWrite(request);
  const bool conditional = !write.precondition.empty();
  fence::ValueNow before;
  const std::error_code refused = co_await RunBlocking<std::error_code>(
      pool_, [this, &request, remove, conditional, &before] {
        std::error_code e = tree_.Check(request.key, remove);
        if (!e && conditional) e = tree_.Current(request.key, &before);
        return e;
      });
  if (refused) {
    result.outcome.error = refused;
    co_return result;
  }
  // The rulebook decides the precondition over the file as read under the
  // key's turn, after the token; and again over the file as it is once the
  // turn among replicas is taken too (another replica sharing DIR may have
  // written it in between: then the fence has moved, which is safe, but
  // the file is not written).
  write.value_now = before;
  const fence::Precondition precondition = write.precondition;
  auto [outcome, shared_turn] = co_await fences_.CommitInTurn(std::move(write));
  result.outcome = std::move(outcome);
  if (!fence::Applied(result.outcome)) co_return result;
  // Raised now, whatever the file write below does.
  TellIfRaised(raised_, request.fence, result.outcome);

  bool created = false;
  bool changed = false;  // since it was read: by another replica, say
  std::string etag;
  const std::error_code failed =
      co_await RunBlocking<std::error_code>(pool_, [&] {
        if (conditional) {
          fence::ValueNow now;
          if (auto e = tree_.Current(request.key, &now)) return e;
          if (!fence::PreconditionHolds(precondition, now)) {
            changed = true;
            result.outcome.etag = now.tag;
            return std::error_code{};
          }
        }
        return remove ? tree_.Remove(request.key)
                      : tree_.Write(request.key, request.body, request.token,
                                    request.content_type, &created, &etag);
      });
  // The file is written (or the write failed without touching it).
  fences_.EndTurn(std::move(shared_turn), std::chrono::milliseconds(0));
  if (failed) {
    result.outcome.verdict = fence::WriteOutcome::Verdict::kFailed;
    result.outcome.error = failed;
  } else if (changed) {
    // The fence has moved to this write's token, which is always safe.
    result.outcome.verdict = fence::WriteOutcome::Verdict::kPreconditionFailed;
  } else if (!remove) {
    result.outcome.etag = std::move(etag);
  }
  result.created = created;
  co_return result;
}

bool FsBackend::TellRaises(FenceRaised raised) {
  raised_ = std::move(raised);
  return true;
}

Awaitable<bool> FsBackend::Ready() {
  if (!co_await fences_.Ready()) co_return false;
  // On the pool: a hung file system must not stall the io thread.
  co_return co_await RunBlocking<bool>(pool_,
                                       [this] { return tree_.Usable(); });
}

}  // namespace fencepost::storage
