#include "storage/fences.h"

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

std::optional<std::uint64_t> LocalFences::Count() {
  std::uint64_t count = 0;
  if (store_.Count(&count)) return std::nullopt;
  return count;
}

boost::asio::awaitable<bool> LocalFences::Ready() {
  co_return shards_.Readable();
}

}  // namespace fencepost::storage
