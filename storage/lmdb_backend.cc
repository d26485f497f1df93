#include "storage/lmdb_backend.h"

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string_view>

#include "fence/env.h"
#include "fence/errc.h"
#include "fence/shards.h"
#include "fence/values.h"
#include "storage/async_commit.h"

namespace fencepost::storage {

Awaitable<ReadResult> LmdbBackend::Read(const ReadRequest& request) {
  ReadResult result;
  const fence::Env& env = shards_.env(shards_.IndexOf(request.fence));
  // A value logged but not yet in LMDB first, then a snapshot begun under
  // the overlay's lock (see fence::Overlay).
  auto lock = env.overlay().Lock();
  if (const fence::Overlay::Value* logged =
          env.overlay().FindValue(request.key)) {
    result.found = logged->present;
    if (logged->present) {
      result.token = logged->token;
      result.etag = fence::TagOf(logged->seq);
      result.content_type = logged->content_type;
      result.size = logged->body.size();
      if (!request.head) result.body = logged->body;
    }
    co_return result;
  }
  fence::Env::ReadTxn txn(env);
  lock.unlock();
  if (txn.get() == nullptr) {
    result.error = fence::FromLmdb(txn.error());
    co_return result;
  }
  fence::StoredValue stored;
  if (int rc = fence::ReadValue(txn.get(), env.values(), request.key, &stored);
      rc != 0) {
    result.error = fence::FromLmdb(rc);
    co_return result;
  }
  result.found = stored.found;
  result.token = stored.token;
  if (stored.found) result.etag = fence::TagOf(stored.seq);
  result.content_type.assign(stored.content_type);
  result.size = stored.body.size();
  if (!request.head) result.body.assign(stored.body);
  co_return result;
}

Awaitable<WriteResult> LmdbBackend::Write(WriteRequest request) {
  WriteResult result;
  result.outcome = co_await AsyncCommit(fences_, WithValue(std::move(request)));
  result.created = result.outcome.created;
  co_return result;
}

Awaitable<Backend::KeyPage> LmdbBackend::ListKeys(std::string prefix,
                                                  std::string after,
                                                  std::size_t limit) {
  KeyPage page;
  // At most limit + 1 keys from each environment, logged first (see Read):
  // enough to know whether there are more.
  std::set<std::string, std::less<>> keys;
  for (const fence::Env* env : shards_.envs()) {
    std::map<std::string, bool, std::less<>> logged;
    auto lock = env->overlay().Lock();
    for (auto& [key, present] : env->overlay().ValuesUnder(prefix)) {
      if (key > after) logged.emplace(std::move(key), present);
    }
    fence::Env::ReadTxn txn(*env);
    lock.unlock();
    if (txn.get() == nullptr) {
      page.error = fence::FromLmdb(txn.error());
      co_return page;
    }
    std::size_t taken = 0;
    const int rc = fence::ForEachValueAfter(
        txn.get(), env->values(), prefix, after,
        [&](std::string_view key, const fence::StoredValue&) {
          if (!logged.contains(key)) {
            keys.emplace(key);
            ++taken;
          }
          return taken <= limit;
        });
    if (rc != 0) {
      page.error = fence::FromLmdb(rc);
      co_return page;
    }
    for (auto& [key, present] : logged) {
      if (present) keys.insert(key);
    }
  }
  for (const std::string& key : keys) {
    if (page.keys.size() == limit) {
      page.more = true;
      break;
    }
    page.keys.push_back(key);
  }
  co_return page;
}

Awaitable<bool> LmdbBackend::Ready() { co_return shards_.Readable(); }

}  // namespace fencepost::storage
