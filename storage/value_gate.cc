#include "storage/value_gate.h"

#include <algorithm>

#include "storage/async_commit.h"
#include "storage/errc.h"

namespace fencepost::storage {

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t Ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

}  // namespace

Awaitable<ValueStore::Current> ValueStore::Prepare(
    const WriteRequest& /*request*/, bool /*read_value*/) {
  co_return Current{};
}

Awaitable<ValueStore::Current> ValueStore::Reread(const WriteRequest& request) {
  co_return co_await Prepare(request, true);
}

ValueGate::ValueGate(Fences& fences, ValueStore& store, Options options)
    : fences_(fences), store_(store), options_(options) {
  if (options_.hold_at_start > std::chrono::milliseconds(0)) {
    all_held_until_ = Clock::now() + options_.hold_at_start;
  }
}

std::chrono::milliseconds ValueGate::HoldLeft() const {
  auto until = all_held_until_;
  for (const auto& [fence, held] : held_until_) until = std::max(until, held);
  const auto now = Clock::now();
  if (until <= now) return std::chrono::milliseconds(0);
  // Rounded up: a hold handed on is never shorter than the one kept.
  return std::chrono::ceil<std::chrono::milliseconds>(until - now);
}

int ValueGate::HeldSeconds(const std::string& fence) {
  const auto now = Clock::now();
  auto until = all_held_until_;
  if (auto it = held_until_.find(fence); it != held_until_.end()) {
    if (now >= it->second) {
      held_until_.erase(it);
    } else {
      until = std::max(until, it->second);
    }
  }
  return fence::HeldSeconds(Ns(now), Ns(until));
}

Awaitable<WriteResult> ValueGate::Write(WriteRequest request) {
  FenceLocks::Guard turn = co_await locks_.Acquire(request.fence);
  const int wait = options_.disable_holds ? 0 : HeldSeconds(request.fence);
  if (wait == 0) co_return co_await CommitAndStore(request);

  WriteResult result;
  const Fences::Read read = co_await fences_.Get(request.fence);
  if (read.error) {
    result.outcome.error = read.error;
    co_return result;
  }
  const std::optional<fence::FenceRecord>& current = read.fence;
  if (std::optional<fence::WriteOutcome> stale = fence::RejectWhileHeld(
          ToFencedWrite(request),
          current ? std::optional(current->token) : std::nullopt,
          current ? current->updated_at_ns : 0)) {
    result.outcome = std::move(*stale);
    co_return result;
  }
  result.outcome.error = Errc::kFenceHeld;
  result.retry_after = wait;
  co_return result;
}

Awaitable<WriteResult> ValueGate::CommitAndStore(const WriteRequest& request) {
  WriteResult result;
  fence::FencedWrite write = ToFencedWrite(request);
  const bool conditional = !write.precondition.empty();
  ValueStore::Current before = co_await store_.Prepare(request, conditional);
  if (before.error) {
    result.outcome.error = before.error;
    co_return result;
  }
  // The rulebook decides the precondition over the value as read in the
  // key's turn, after the token.
  write.value_now = std::move(before.value);
  auto [outcome, shared_turn] = co_await fences_.CommitInTurn(std::move(write));
  result.outcome = std::move(outcome);
  if (!fence::Applied(result.outcome)) co_return result;
  // Raised now, whatever becomes of the value (SPEC: it stands there); the
  // fence store told watchers so as the commit became durable.

  // And again over the value as it is now that the turn among replicas is
  // taken too: another replica sharing the store may have written it.
  ValueStore::Current now;
  if (conditional) {
    now = co_await store_.Reread(request);
    result.outcome =
        now.error ? fence::AfterLanding(std::move(result.outcome),
                                        fence::Landing::kNotApplied, now.error)
                  : fence::RecheckPrecondition(std::move(result.outcome),
                                               request.precondition, now.value);
  }
  fence::Landing landing = fence::Landing::kNotApplied;
  if (fence::Applied(result.outcome)) {
    ValueStore::Stored stored =
        co_await store_.Store(request, conditional ? &now.value : nullptr);
    landing = stored.landing;
    result.outcome = fence::AfterLanding(std::move(result.outcome),
                                         stored.landing, stored.error);
    if (landing == fence::Landing::kApplied && !stored.etag.empty()) {
      result.outcome.etag = std::move(stored.etag);
    }
    result.created = stored.created;
    result.upstream = std::move(stored.upstream);
    result.detail = std::move(stored.detail);
    result.store_error = std::move(stored.store_error);
  }
  // The fence closes for `settle` here and among replicas when the value
  // may still land; else the next write of the fence may go at once.
  const bool hold = fence::HoldsFence(landing) && !options_.disable_holds;
  if (hold) held_until_[request.fence] = Clock::now() + options_.settle;
  fences_.EndTurn(std::move(shared_turn),
                  hold ? options_.settle : std::chrono::milliseconds(0));
  co_return result;
}

}  // namespace fencepost::storage
