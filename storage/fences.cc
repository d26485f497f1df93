#include "storage/fences.h"

#include <algorithm>
#include <iterator>

#include "storage/async_commit.h"

namespace fencepost::storage {

boost::asio::awaitable<std::pair<fence::WriteOutcome, Fences::Turn>>
Fences::CommitInTurn(fence::FenceWrite write) {
  fence::WriteOutcome outcome = co_await AsyncCommit(*this, std::move(write));
  co_return std::pair{std::move(outcome), Turn{}};
}

boost::asio::awaitable<Fences::Read> LocalFences::Get(std::string name) {
  Read out;
  out.error = store_.Get(name, &out.fence);
  co_return out;
}

boost::asio::awaitable<Fences::ListRead> LocalFences::List(std::string prefix,
                                                           std::string after,
                                                           std::size_t limit) {
  ListRead out;
  out.error = store_.List(prefix, after, limit, &out.list);
  co_return out;
}

boost::asio::awaitable<Fences::LeaseRead> LocalFences::GetLease(
    std::string name, std::string fence) {
  LeaseRead out;
  fence::LeaseTable& table = shards_.LeasesOf(fence);
  out.now_ns = shards_.SteadyNow();
  out.expired = table.NoticeExpired(name, out.now_ns);
  out.entry = table.Find(name);
  co_return out;
}

boost::asio::awaitable<Fences::LeaseList> LocalFences::ListLeases(
    std::string prefix, std::string after, std::size_t limit) {
  LeaseList out;
  out.now_ns = shards_.SteadyNow();
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    fence::LeaseTable& table = shards_.env(i).lease_table();
    auto expired = table.NoticeExpired(out.now_ns);
    std::move(expired.begin(), expired.end(), std::back_inserter(out.expired));
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
  if (store_.Count(&count)) return std::nullopt;
  return count;
}

boost::asio::awaitable<bool> LocalFences::Ready() {
  co_return shards_.Readable();
}

}  // namespace fencepost::storage
