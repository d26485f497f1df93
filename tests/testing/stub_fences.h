#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "storage/fences.h"

namespace fencepost::testing {

// A storage::Fences for tests of what sits on top of it: every read finds
// nothing, it is ready, local, holds no fences and records scopes nowhere.
// A test overrides what it uses (Submit at least).
class StubFences : public storage::Fences {
 public:
  Awaitable<Read> Get(std::string) override { co_return Read{}; }
  Awaitable<ListRead> List(std::string, std::string, std::size_t) override {
    co_return ListRead{};
  }
  Awaitable<LeaseRead> GetLease(std::string, std::string) override {
    co_return LeaseRead{};
  }
  Awaitable<LeaseList> ListLeases(std::string, std::string,
                                  std::size_t) override {
    co_return LeaseList{};
  }
  std::optional<std::uint64_t> Count() override { return 0; }
  Awaitable<bool> Ready() override { co_return true; }
  std::string_view consistency() const override { return "local"; }
  Awaitable<fence::ScopeRecord> RecordedScopes() override {
    co_return fence::ScopeRecord{};
  }
  Awaitable<void> RecordScopes(fence::ScopeRecord) override { co_return; }
};

}  // namespace fencepost::testing
