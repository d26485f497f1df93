#include "storage/etcd_fence_cache.h"

#include "storage/etcd_json.h"
#include "storage/etcd_txn.h"

namespace fencepost::storage {

void EtcdFenceCache::CacheRead(const std::string& name,
                               const etcd::Seen& seen) {
  auto it = cache_.find(name);
  if (it == cache_.end() || it->second.mod_revision <= seen.mod_revision) {
    cache_[name] = seen;
  }
}

Awaitable<bool> EtcdFenceCache::Load(const Reads& want, ValuesRead* values,
                                     std::string* error) {
  using Json = http::JsonValue;
  if (want.fences.empty() && want.values.empty()) co_return true;
  etcd::Txn reads;
  for (const std::string& name : want.fences) {
    reads.Then(etcd::RangeOp(session_.FenceKey(name)));
  }
  for (const std::string& key : want.values) {
    reads.Then(etcd::RangeOp(session_.ValueKey(key), true));
  }
  // Reads only: safe to ask another member.
  EtcdApi::Reply reply =
      co_await session_.Call("/v3/kv/txn", reads.Json(), true);
  if (!reply.ok) {
    *error = reply.error;
    co_return false;
  }
  const std::size_t n = want.fences.size();
  const Json* responses = etcd::ResponsesOf(reply.json, n + want.values.size());
  if (responses == nullptr) {
    *error = "etcd answered a read of fences with something else";
    co_return false;
  }
  if (cache_.size() + n > kMaxCache) cache_.clear();
  for (std::size_t i = 0; i < n + want.values.size(); ++i) {
    const std::vector<Json>* kvs = etcd::RangeKvsAt(*responses, i);
    if (kvs == nullptr || kvs->size() > 1) {
      *error = "etcd answered a read of fences with something else";
      co_return false;
    }
    if (i >= n) {
      const std::int64_t revision =
          kvs->empty() ? 0 : etcd::Int64Of((*kvs)[0].Find("mod_revision"));
      if (revision < 0 || (!kvs->empty() && revision == 0)) {
        *error = "etcd answered a read of values with something else";
        co_return false;
      }
      (*values)[want.values[i - n]] = revision;
      continue;
    }
    etcd::Seen seen;
    if (!kvs->empty() && !etcd::SeenOf((*kvs)[0], &seen)) {
      *error = "the fence record of '" + want.fences[i] +
               "' in etcd is not fencepost's";
      co_return false;
    }
    CacheRead(want.fences[i], seen);
  }
  co_return true;
}

void EtcdFenceCache::Wrote(const std::string& name, const etcd::Seen& seen) {
  auto it = cache_.find(name);
  if (it == cache_.end() || it->second.mod_revision < seen.mod_revision) {
    cache_[name] = seen;
  }
}

void EtcdFenceCache::CacheFence(const std::string& name, fence::Token token,
                                std::int64_t updated_at_ns,
                                std::int64_t revision) {
  // Unless a group committed since (a failed compare corrects any entry
  // that is behind).
  if (revision <= 0) {
    cache_.erase(name);
  } else {
    Wrote(name, etcd::Seen{token, updated_at_ns, revision});
  }
}

}  // namespace fencepost::storage
