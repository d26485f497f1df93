#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <memory>
#include <string>

#include "http/coro.h"
#include "storage/fences.h"

namespace fencepost::fence {
class FenceStore;
class Shards;
}  // namespace fencepost::fence

namespace fencepost::storage {

// The default: the fences of the data directory's LMDB environments.
// Thread safety: any thread.
class LocalFences : public Fences {
 public:
  explicit LocalFences(fence::Shards& shards);
  ~LocalFences() override;

  // A batch goes to the committer of its first write's fence (RefuseBatch
  // refuses one whose fences live in different shards); a lease operation
  // to its fence's.
  void Submit(fence::FenceWrite write, fence::WriteDone done) override;
  Awaitable<Read> Get(std::string name) override;
  Awaitable<ListRead> List(std::string prefix, std::string after,
                           std::size_t limit) override;
  Awaitable<LeaseRead> GetLease(std::string name, std::string fence) override;
  Awaitable<LeaseList> ListLeases(std::string prefix, std::string after,
                                  std::size_t limit) override;
  std::int64_t SteadyNow() const override;
  std::optional<std::string> RefuseBatch(const fence::Batch& batch,
                                         std::string* key) const override;
  Stats Statistics() override;
  std::string CheckLeases(const fence::Scopes& scopes) const override;
  std::optional<std::uint64_t> Count() override;
  Awaitable<bool> Ready() override;
  std::string_view consistency() const override { return "local"; }
  Awaitable<fence::ScopeRecord> RecordedScopes() override;
  Awaitable<void> RecordScopes(fence::ScopeRecord record) override;
  std::string RefuseScopeChange(const fence::Scopes& before,
                                const fence::Scopes& after) const override;

 private:
  // Tells every lease that ran out and was not noticed.
  void NoticeExpired();

  fence::Shards& shards_;
  std::unique_ptr<fence::FenceStore> store_;
};

}  // namespace fencepost::storage
