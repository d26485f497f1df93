#include "storage/etcd_backend.h"

#include "storage/async_commit.h"

namespace fencepost::storage {

Awaitable<ReadResult> EtcdBackend::Read(const ReadRequest& request) {
  EtcdFences::ValueRead value = co_await fences_.GetValue(request.key);
  ReadResult result;
  result.error = value.error;
  if (value.error) result.detail = fences_.last_error();
  result.found = value.found;
  result.token = value.token;
  result.etag = std::move(value.etag);
  result.content_type = std::move(value.content_type);
  result.size = value.body.size();
  if (!request.head) result.body = std::move(value.body);
  co_return result;
}

Awaitable<WriteResult> EtcdBackend::Write(WriteRequest request) {
  WriteResult result;
  result.outcome = co_await AsyncCommit(fences_, WithValue(std::move(request)));
  result.created = result.outcome.created;
  if (result.outcome.error) result.detail = fences_.last_error();
  co_return result;
}

Awaitable<Backend::KeyPage> EtcdBackend::ListKeys(std::string prefix,
                                                  std::string after,
                                                  std::size_t limit) {
  co_return co_await fences_.ListValueKeys(std::move(prefix), std::move(after),
                                           limit);
}

Awaitable<bool> EtcdBackend::Ready() { co_return co_await fences_.Ready(); }

}  // namespace fencepost::storage
