#include "storage/etcd_fences.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <set>
#include <stdexcept>

#include "fence/errc.h"
#include "fence/rules.h"
#include "fence/scope.h"
#include "storage/errc.h"
#include "storage/etcd_json.h"
#include "storage/etcd_paging.h"
#include "storage/etcd_txn.h"

// The store's core: the queue, groups and batches, and the reads. The
// group's transaction is etcd_group.cc's, leases etcd_leases.cc's, turns
// etcd_turns.cc's.

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;
using Json = http::JsonValue;

std::int64_t EtcdFences::WallNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool EtcdFences::FitsOneTransaction(const fence::Batch& batch) {
  std::set<std::string_view> fences, values;
  std::size_t bytes = 0;
  for (const fence::FencedWrite& w : batch.writes) {
    fences.insert(w.fence);
    if (w.value) {
      values.insert(w.value->key);
      if (w.value->body.size() > kMaxValueBytes) return false;
      bytes += w.value->body.size();
    }
  }
  return fences.size() <= kMaxGroupFences && values.size() <= kMaxGroupValues &&
         bytes <= kMaxGroupBytes;
}

Awaitable<EtcdApi::Reply> EtcdFences::Call(std::string_view path,
                                           std::string body, bool idempotent) {
  EtcdApi::Reply reply =
      co_await client_->Call(path, std::move(body), idempotent);
  if (!reply.ok) last_error_ = reply.error;
  co_return reply;
}

EtcdFences::EtcdFences(asio::io_context& io, Options options)
    : EtcdFences(io, options,
                 std::make_unique<EtcdClient>(io, options.spec, options.timeout,
                                              options.on_request)) {}

EtcdFences::EtcdFences(asio::io_context& io, Options options,
                       std::unique_ptr<EtcdApi> api)
    : io_(io), options_(std::move(options)), client_(std::move(api)) {}

std::string EtcdFences::FenceKey(std::string_view name) const {
  return options_.spec.prefix + "/fences/" + std::string(name);
}

std::string EtcdFences::TurnKey(std::string_view name) const {
  return options_.spec.prefix + "/turns/" + std::string(name);
}

std::string EtcdFences::LeaseKey(std::string_view name) const {
  return options_.spec.prefix + "/leases/" + std::string(name);
}

std::string EtcdFences::HoldKey(std::string_view fence) const {
  return options_.spec.prefix + "/holds/" + std::string(fence);
}

std::string EtcdFences::ValueKey(std::string_view key) const {
  return options_.spec.prefix + "/values/" + std::string(key);
}

std::string EtcdFences::ScopesKey() const {
  return options_.spec.prefix + "/scopes";
}

void EtcdFences::Submit(fence::FenceWrite write, fence::WriteDone done) {
  Enqueue({std::move(write), std::move(done), nullptr});
}

void EtcdFences::Enqueue(Pending pending) {
  const auto* batch = std::get_if<fence::Batch>(&pending.write);
  const auto* write = std::get_if<fence::FencedWrite>(&pending.write);
  const bool lease = std::holds_alternative<fence::LeaseOp>(pending.write);
  WriteOutcome refused;
  if (batch != nullptr && !FitsOneTransaction(*batch)) {
    refused.error = Errc::kBatchTooLarge;
  } else if (write != nullptr && write->value &&
             write->value->body.size() > kMaxValueBytes) {
    refused.error = Errc::kValueTooLarge;
  } else if (queue_.size() >= options_.max_queue) {
    refused.error = fence::Errc::kOverloaded;
  }
  if (lease && leases_.size() >= options_.max_queue) {
    refused.error = fence::Errc::kOverloaded;
  }
  if (refused.error) {
    pending.done(std::move(refused));
    return;
  }
  if (lease) {
    // Beside the writes' transactions: each lease operation is settled
    // alone, by one of a few workers (their compares order them).
    leases_.push_back(std::move(pending));
    if (lease_workers_ < kLeaseWorkers) {
      ++lease_workers_;
      asio::co_spawn(io_, SettleLeases(), asio::detached);
    }
    return;
  }
  queue_.push_back(std::move(pending));
  if (!running_) {
    running_ = true;
    asio::co_spawn(io_, Run(), asio::detached);
  }
}

Awaitable<void> EtcdFences::Run() {
  while (!queue_.empty()) co_await Settle(NextGroup());
  running_ = false;
}

std::vector<EtcdFences::Pending> EtcdFences::NextGroup() {
  std::vector<Pending> group;
  std::set<std::string, std::less<>> fences, values;
  std::size_t bytes = 0;
  while (!queue_.empty()) {
    // A batch is a transaction of its own.
    const bool batch =
        std::holds_alternative<fence::Batch>(queue_.front().write);
    if (!group.empty() &&
        (batch || std::holds_alternative<fence::Batch>(group.front().write))) {
      break;
    }
    if (batch) {
      group.push_back(std::move(queue_.front()));
      queue_.pop_front();
      break;
    }
    const auto& next = std::get<fence::FencedWrite>(queue_.front().write);
    const bool turn = queue_.front().turn != nullptr;
    const bool new_fence = !fences.count(next.fence);
    // A turn key counts as a value (one more put), once per fence.
    // (No key holds a NUL byte, so this names no value.)
    const std::string value_key =
        turn         ? std::string(1, '\0') + "turn/" + next.fence
        : next.value ? next.value->key
                     : "";
    if (turn && values.count(value_key)) break;
    const bool new_value = !value_key.empty() && !values.count(value_key);
    const std::size_t size = next.value ? next.value->body.size() : 0;
    if (!group.empty() && ((new_fence && fences.size() == kMaxGroupFences) ||
                           (new_value && values.size() == kMaxGroupValues) ||
                           bytes + size > kMaxGroupBytes)) {
      break;
    }
    bytes += size;
    fences.insert(next.fence);
    if (!value_key.empty()) values.insert(value_key);
    group.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return group;
}

Awaitable<void> EtcdFences::Settle(std::vector<Pending> group) {
  if (group.size() == 1 &&
      std::holds_alternative<fence::Batch>(group.front().write)) {
    co_await SettleBatch(std::move(group.front()));
    co_return;
  }
  for (int attempt = 0; attempt < kGroupAttempts; ++attempt) {
    if (attempt > 0 && options_.on_retry) options_.on_retry();
    if (co_await TryOnce(group) != Settled::kConflict) co_return;
  }
  // Contended: each write alone, so one replica's progress on one fence
  // cannot keep failing a whole group.
  for (Pending& pending : group) {
    std::vector<Pending> alone;
    alone.push_back(std::move(pending));
    Settled settled = Settled::kConflict;
    for (int attempt = 0;
         attempt < kAloneAttempts && settled == Settled::kConflict; ++attempt) {
      if (options_.on_retry) options_.on_retry();
      settled = co_await TryOnce(alone);
    }
    if (settled == Settled::kConflict) {
      FailAll(alone, fence::Errc::kOverloaded);
    }
  }
}

Awaitable<void> EtcdFences::SettleBatch(Pending batch) {
  std::vector<fence::FencedWrite>& writes =
      std::get<fence::Batch>(batch.write).writes;
  const std::size_t n = writes.size();
  auto outcomes = std::make_shared<std::vector<WriteOutcome>>(n);
  std::vector<Pending> items;
  for (std::size_t i = 0; i < n; ++i) {
    items.push_back(
        {std::move(writes[i]),
         [outcomes, i](WriteOutcome o) { (*outcomes)[i] = std::move(o); },
         nullptr});
  }
  Settled settled = Settled::kConflict;
  for (int attempt = 0;
       attempt < kAloneAttempts && settled == Settled::kConflict; ++attempt) {
    if (attempt > 0 && options_.on_retry) options_.on_retry();
    settled = co_await TryOnce(items, true);
  }
  WriteOutcome result;
  if (settled == Settled::kConflict) {
    result.error = fence::Errc::kOverloaded;
    batch.done(std::move(result));
    co_return;
  }
  // The outcomes up to the first that stopped the batch (it last).
  std::vector<WriteOutcome> decided;
  for (WriteOutcome& one : *outcomes) {
    decided.push_back(std::move(one));
    if (fence::StopsBatch(decided.back())) break;
  }
  batch.done(fence::BatchOutcome(std::move(decided)));
}

void EtcdFences::FailAll(std::vector<Pending>& group, std::error_code error) {
  for (Pending& pending : group) {
    cache_.erase(fence::RoutingFence(pending.write));
    WriteOutcome outcome;
    outcome.error = error;
    pending.done(std::move(outcome));
  }
}

// Reads.

Awaitable<Fences::Read> EtcdFences::Get(std::string name) {
  Read out;
  EtcdApi::Reply reply =
      co_await Call("/v3/kv/range", etcd::RangeOne(FenceKey(name)), true);
  if (!reply.ok) {
    out.error = Errc::kStoreUnavailable;
    co_return out;
  }
  const std::vector<Json>* kvs = etcd::KvsOf(reply.json);
  if (kvs == nullptr || kvs->size() > 1) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  if (kvs->empty()) co_return out;
  std::string text;
  fence::FenceRecord record{name, 0, 0};
  if (!etcd::BytesOf((*kvs)[0], "value", &text) ||
      !etcd::ParseFence(text, &record.token, &record.updated_at_ns)) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  out.fence = std::move(record);
  co_return out;
}

Awaitable<EtcdFences::StartRead> EtcdFences::ReadAtStart(
    const std::string& key) {
  EtcdApi::Reply reply =
      co_await Call("/v3/kv/range", etcd::RangeOne(key), true);
  const std::vector<Json>* kvs = reply.ok ? etcd::KvsOf(reply.json) : nullptr;
  StartRead out;
  if (kvs == nullptr || kvs->size() > 1 ||
      (kvs->size() == 1 && !etcd::BytesOf((*kvs)[0], "value", &out.value))) {
    throw std::runtime_error("cannot read " + key + " from etcd" +
                             (reply.ok ? "" : ": " + reply.error));
  }
  if (!kvs->empty()) {
    out.mod_revision = etcd::Int64Of((*kvs)[0].Find("mod_revision"));
  }
  co_return out;
}

Awaitable<fence::ScopeRecord> EtcdFences::RecordedScopes() {
  const std::string key = ScopesKey();
  const StartRead read = co_await ReadAtStart(key);
  scopes_revision_ = read.mod_revision;
  std::optional<fence::ScopeRecord> record =
      fence::DecodeScopeRecord(read.value);
  if (!record) {
    throw std::runtime_error(key + " in etcd does not hold a scope record");
  }
  co_return *record;
}

Awaitable<std::string> EtcdFences::CheckFormat() {
  constexpr std::string_view kFormat = "2";
  const std::string key = options_.spec.prefix + "/format";
  const StartRead read = co_await ReadAtStart(key);
  const std::string& found = read.value;
  if (read.mod_revision == 0) {
    // The first start of this release on the prefix (another replica's
    // may record it at the same moment: the same value).
    etcd::Txn txn;
    txn.If(etcd::CompareCreate(key, 0)).Then(etcd::PutOp(key, kFormat));
    EtcdApi::Reply put = co_await Call("/v3/kv/txn", txn.Json());
    if (!put.ok) {
      throw std::runtime_error("cannot record " + key +
                               " in etcd: " + put.error);
    }
    co_return std::string();
  }
  if (found == kFormat) co_return std::string();
  const bool digits =
      !found.empty() && found.size() <= 8 &&
      found.find_first_not_of("0123456789") == std::string::npos;
  co_return "the records under " + options_.spec.prefix +
      " in etcd were written by another release of fencepost (format " +
      (digits ? found : std::string("unknown")) + "; this release writes " +
      std::string(kFormat) + "): serve them with that release or a later one";
}

Awaitable<void> EtcdFences::RecordScopes(fence::ScopeRecord record) {
  const std::string key = ScopesKey();
  // Unchanged since RecordedScopes read it, or another replica's start
  // decided on other scopes in between.
  etcd::Txn txn;
  txn.If(etcd::CompareMod(key, scopes_revision_))
      .Then(etcd::PutOp(key, fence::EncodeScopeRecord(record)));
  EtcdApi::Reply reply = co_await Call("/v3/kv/txn", txn.Json());
  if (!reply.ok || !etcd::Succeeded(reply.json)) {
    throw std::runtime_error(
        "cannot record the scopes in " + key + " in etcd: " +
        (reply.ok ? "another replica changed them while this one started; "
                    "start again"
                  : reply.error));
  }
}

Awaitable<std::optional<etcd::Page>> EtcdFences::ReadPage(
    const std::string& base, const std::string& prefix,
    const std::string& after, std::size_t limit, std::error_code* error) {
  EtcdApi::Reply reply = co_await Call(
      "/v3/kv/range", etcd::PageRange(base, prefix, after, limit), true);
  if (!reply.ok) {
    *error = Errc::kStoreUnavailable;
    co_return std::nullopt;
  }
  std::optional<etcd::Page> page = etcd::ReadPage(reply.json, base);
  if (!page) *error = fence::Errc::kStorage;
  co_return page;
}

Awaitable<Fences::ListRead> EtcdFences::List(std::string prefix,
                                             std::string after,
                                             std::size_t limit) {
  ListRead out;
  const std::string base = FenceKey("");
  std::optional<etcd::Page> page =
      co_await ReadPage(base, prefix, after, limit, &out.error);
  if (!page) co_return out;
  for (etcd::PageItem& item : page->items) {
    fence::FenceRecord record;
    if (!etcd::ParseFence(item.value, &record.token, &record.updated_at_ns)) {
      out.error = fence::Errc::kStorage;
      co_return out;
    }
    record.name = std::move(item.name);
    out.list.fences.push_back(std::move(record));
  }
  if (page->more && !out.list.fences.empty()) {
    out.list.next = out.list.fences.back().name;
  }
  co_return out;
}

Awaitable<bool> EtcdFences::Ready() {
  // A linearizable read needs etcd's quorum, as every write does.
  EtcdApi::Reply reply =
      co_await Call("/v3/kv/range", etcd::CountOne(FenceKey("")), true);
  co_return reply.ok;
}

Awaitable<EtcdFences::ValueRead> EtcdFences::GetValue(std::string key) {
  ValueRead out;
  EtcdApi::Reply reply =
      co_await Call("/v3/kv/range", etcd::RangeOne(ValueKey(key)), true);
  if (!reply.ok) {
    out.error = Errc::kStoreUnavailable;
    co_return out;
  }
  const std::vector<Json>* kvs = etcd::KvsOf(reply.json);
  if (kvs == nullptr || kvs->size() > 1) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  if (kvs->empty()) co_return out;
  std::string record;
  const std::int64_t mod_revision =
      etcd::Int64Of((*kvs)[0].Find("mod_revision"));
  if (!etcd::BytesOf((*kvs)[0], "value", &record) ||
      !etcd::ParseValue(record, &out.token, &out.content_type, &out.body) ||
      mod_revision <= 0) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  out.found = true;
  out.etag = etcd::TagOf(mod_revision);
  co_return out;
}

}  // namespace fencepost::storage
