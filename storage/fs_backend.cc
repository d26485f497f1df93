#include "storage/fs_backend.h"

#include "fence/rules.h"
#include "storage/blocking.h"

namespace fencepost::storage {

FsBackend::FsBackend(const std::string& dir, Fences& fences,
                     std::size_t threads, bool exclusive)
    : tree_(dir, exclusive),
      fences_(fences),
      pool_(threads),
      gate_(fences, *this, ValueGate::Options{}) {}

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
  co_return co_await gate_.Write(std::move(request));
}

Awaitable<ValueStore::Current> FsBackend::Prepare(const WriteRequest& request,
                                                  bool read_value) {
  Current current;
  current.error = co_await RunBlocking<std::error_code>(
      pool_, [this, &request, read_value, &current] {
        const bool remove = request.kind == WriteKind::kDelete;
        std::error_code e = tree_.Check(request.key, remove);
        if (!e && read_value) e = tree_.Current(request.key, &current.value);
        return e;
      });
  co_return current;
}

Awaitable<ValueStore::Current> FsBackend::Reread(const WriteRequest& request) {
  Current current;
  current.error =
      co_await RunBlocking<std::error_code>(pool_, [this, &request, &current] {
        return tree_.Current(request.key, &current.value);
      });
  co_return current;
}

Awaitable<ValueStore::Stored> FsBackend::Store(
    const WriteRequest& request, const fence::ValueNow* /*seen*/) {
  Stored stored;
  const std::error_code failed =
      co_await RunBlocking<std::error_code>(pool_, [this, &request, &stored] {
        return request.kind == WriteKind::kDelete
                   ? tree_.Remove(request.key)
                   : tree_.Write(request.key, request.body, request.token,
                                 request.content_type, &stored.created,
                                 &stored.etag);
      });
  // A failed file write leaves the file as it was.
  if (failed) {
    stored.landing = fence::Landing::kNotApplied;
    stored.error = failed;
  }
  co_return stored;
}

Awaitable<bool> FsBackend::Ready() {
  if (!co_await fences_.Ready()) co_return false;
  // On the pool: a hung file system must not stall the io thread.
  co_return co_await RunBlocking<bool>(pool_,
                                       [this] { return tree_.Usable(); });
}

}  // namespace fencepost::storage
