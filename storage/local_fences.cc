#include "storage/local_fences.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "fence/fence_store.h"
#include "fence/rules.h"
#include "fence/shards.h"

namespace fencepost::storage {

LocalFences::LocalFences(fence::Shards& shards)
    : shards_(shards),
      store_(std::make_unique<fence::FenceStore>(shards.envs())) {}

LocalFences::~LocalFences() = default;

std::string LocalFences::RefuseScopeChange(const fence::Scopes& before,
                                           const fence::Scopes& after) const {
  return shards_.RefuseScopeChange(before, after);
}

void LocalFences::Submit(fence::FenceWrite write, fence::WriteDone done) {
  shards_.CommitterOf(fence::RoutingFence(write))
      .Submit(std::move(write), std::move(done));
}

std::int64_t LocalFences::SteadyNow() const { return shards_.SteadyNow(); }

void LocalFences::NoticeExpired() {
  const std::int64_t now = shards_.SteadyNow();
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    for (const auto& [name, lease] :
         shards_.env(i).lease_table().NoticeExpired(now)) {
      Tell(LeaseExpired(name, lease, now));
    }
  }
}

std::optional<std::string> LocalFences::RefuseBatch(const fence::Batch& batch,
                                                    std::string* key) const {
  if (batch.writes.empty()) return std::nullopt;
  const std::size_t shard = shards_.IndexOf(batch.writes.front().fence);
  for (const fence::FencedWrite& w : batch.writes) {
    if (shards_.IndexOf(w.fence) != shard) {
      *key = w.value ? w.value->key : w.fence;
      return "the batch's fences live in different LMDB shards "
             "(--lmdb-shards), which cannot commit together";
    }
  }
  return std::nullopt;
}

Fences::Stats LocalFences::Statistics() {
  NoticeExpired();
  Stats stats;
  const std::int64_t now = shards_.SteadyNow();
  stats.live_leases = 0;
  Stats::Map map;
  fence::CommitStats log;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    log += shards_.committer(i).stats();
    const fence::Env& env = shards_.env(i);
    *stats.live_leases += env.lease_table().Live(now);
    map.used += env.used_bytes();
    map.size += env.map_size();
    map.max += env.max_map_size();
  }
  stats.map = map;
  stats.log = log;
  return stats;
}

std::string LocalFences::CheckLeases(const fence::Scopes& scopes) const {
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    for (const auto& [name, entry] : shards_.env(i).lease_table().List(
             "", "", std::numeric_limits<std::size_t>::max())) {
      const std::string_view fence = scopes.FenceFor(name);
      if (fence != entry.record.fence || shards_.IndexOf(fence) != i) {
        const std::string& granted = entry.record.fence;
        const std::string how =
            granted == name
                ? "with no --fence-scope that covers " + name
                : "with --fence-scope " + granted + " among the flags";
        return "the lease " + name + " was granted under the fence " + granted +
               ", but with these --fence-scope settings its fence "
               "is " +
               std::string(fence) +
               ". A lease keeps its fence for "
               "good: start " +
               how +
               " (the scopes it was granted under), "
               "or serve the other scopes from a data directory of their own";
      }
    }
  }
  return {};
}

Awaitable<fence::ScopeRecord> LocalFences::RecordedScopes() {
  co_return shards_.RecordedScopes();
}

Awaitable<void> LocalFences::RecordScopes(fence::ScopeRecord record) {
  shards_.RecordScopes(record);
  co_return;
}

Awaitable<Fences::Read> LocalFences::Get(std::string name) {
  Read out;
  out.error = store_->Get(name, &out.fence);
  co_return out;
}

Awaitable<Fences::ListRead> LocalFences::List(std::string prefix,
                                              std::string after,
                                              std::size_t limit) {
  ListRead out;
  out.error = store_->List(prefix, after, limit, &out.list);
  co_return out;
}

Awaitable<Fences::LeaseRead> LocalFences::GetLease(std::string name,
                                                   std::string fence) {
  LeaseRead out;
  fence::LeaseTable& table = shards_.LeasesOf(fence);
  out.now_ns = shards_.SteadyNow();
  out.expired = table.NoticeExpired(name, out.now_ns);
  if (out.expired) Tell(LeaseExpired(name, *out.expired, out.now_ns));
  out.entry = table.Find(name);
  co_return out;
}

Awaitable<Fences::LeaseList> LocalFences::ListLeases(std::string prefix,
                                                     std::string after,
                                                     std::size_t limit) {
  LeaseList out;
  out.now_ns = shards_.SteadyNow();
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    fence::LeaseTable& table = shards_.env(i).lease_table();
    for (auto& [name, lease] : table.NoticeExpired(out.now_ns)) {
      Tell(LeaseExpired(name, lease, out.now_ns));
      out.expired.emplace_back(std::move(name), std::move(lease));
    }
    auto part = table.List(prefix, after, limit + 1);
    std::move(part.begin(), part.end(), std::back_inserter(out.leases));
  }
  std::sort(out.leases.begin(), out.leases.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (out.leases.size() > limit) {
    out.leases.resize(limit);
    out.next = out.leases.back().first;
  }
  co_return out;
}

std::optional<std::uint64_t> LocalFences::Count() {
  std::uint64_t count = 0;
  if (store_->Count(&count)) return std::nullopt;
  return count;
}

Awaitable<bool> LocalFences::Ready() { co_return shards_.Readable(); }

}  // namespace fencepost::storage
