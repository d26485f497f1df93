#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "fence/token.h"
#include "http/coro.h"
#include "storage/etcd_records.h"
#include "storage/etcd_session.h"

namespace fencepost::storage {

// The fences as this replica last saw them in etcd (token, updated_at_ns and
// mod_revision), which the writes of a group are decided against, and the
// read that fills it. An entry may be behind etcd: another replica may have
// moved the fence since: the transaction that applies a decision compares
// the mod_revision it was decided on, and a failed compare reads the fence
// back (Take). Get of a fence missing from the cache gives (and caches) no
// record: Load reads the missing ones first.
//
// Thread safety: every call on the io thread of the session's io_context.
class EtcdFenceCache {
 public:
  // What Load reads: fences (by name) and values (by key).
  struct Reads {
    std::vector<std::string> fences, values;
  };
  // The mod_revision of each value key read for a precondition (0: none).
  using ValuesRead = std::map<std::string, std::int64_t, std::less<>>;

  explicit EtcdFenceCache(EtcdSession& session) : session_(session) {}

  bool Has(const std::string& name) const { return cache_.count(name) > 0; }
  // The fence `name` as cached (no record when it is not).
  etcd::Seen& Get(const std::string& name) { return cache_[name]; }
  // Caches `seen` as it is (a failed compare read it).
  void Take(const std::string& name, const etcd::Seen& seen) {
    cache_[name] = seen;
  }
  void Forget(const std::string& name) { cache_.erase(name); }
  // Brings a cached fence up to `seen` when it is older (another replica
  // moved it, as the watch reports); caches no fence it does not hold.
  void Refresh(const std::string& name, const etcd::Seen& seen) {
    auto it = cache_.find(name);
    if (it != cache_.end() && it->second.mod_revision < seen.mod_revision) {
      it->second = seen;
    }
  }

  // Reads `want.fences` into the cache (unless it holds a later state) and
  // the mod_revision of `want.values` into `*values`, in one read
  // transaction. False with `*error` set when etcd cannot be read or answers
  // something else.
  Awaitable<bool> Load(const Reads& want, ValuesRead* values,
                       std::string* error);
  // Caches a fence as a transaction at `seen.mod_revision` wrote it, unless
  // the cache holds that state or a later one.
  void Wrote(const std::string& name, const etcd::Seen& seen);
  // The same for a transaction that put `token` at `revision` (a lease
  // grant); forgets the fence when the revision is not known (0).
  void CacheFence(const std::string& name, fence::Token token,
                  std::int64_t updated_at_ns, std::int64_t revision);

 private:
  static constexpr std::size_t kMaxCache = 1u << 20;

  // Caches a fence as a read found it, unless the cache holds a later one.
  void CacheRead(const std::string& name, const etcd::Seen& seen);

  EtcdSession& session_;
  std::unordered_map<std::string, etcd::Seen> cache_;
};

}  // namespace fencepost::storage
