#include "storage/fences.h"

#include "storage/async_commit.h"

namespace fencepost::storage {

boost::asio::awaitable<std::pair<fence::WriteOutcome, Fences::Turn>>
Fences::CommitInTurn(fence::FencedWrite write) {
  fence::WriteOutcome outcome = co_await AsyncCommit(*this, std::move(write));
  co_return std::pair{std::move(outcome), Turn{}};
}

}  // namespace fencepost::storage
