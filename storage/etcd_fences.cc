#include "storage/etcd_fences.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <stdexcept>

#include "fence/errc.h"
#include "fence/rules.h"
#include "fence/scope.h"
#include "storage/async_commit.h"
#include "storage/errc.h"
#include "storage/etcd_fence_cache.h"
#include "storage/etcd_groups.h"
#include "storage/etcd_json.h"
#include "storage/etcd_leases.h"
#include "storage/etcd_paging.h"
#include "storage/etcd_turns.h"
#include "storage/etcd_txn.h"

// The store's face: each write routed to its path (EtcdGroups, EtcdLeases),
// turns (EtcdTurns), and the reads of fences, values and the records of a
// start.

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;
using Json = http::JsonValue;

static_assert(EtcdFences::kMaxValueBytes == EtcdGroups::kMaxValueBytes);

EtcdFences::EtcdFences(asio::io_context& io, Options options)
    : EtcdFences(io, options,
                 std::make_unique<EtcdClient>(io, options.spec, options.timeout,
                                              options.on_request)) {}

EtcdFences::EtcdFences(asio::io_context& io, Options options,
                       std::unique_ptr<EtcdApi> api)
    : session_(io, std::move(options), std::move(api)),
      cache_(std::make_unique<EtcdFenceCache>(session_)),
      turns_(std::make_unique<EtcdTurns>(session_)),
      groups_(std::make_unique<EtcdGroups>(session_, *cache_, *turns_)),
      leases_(std::make_unique<EtcdLeases>(
          session_, *cache_,
          [this](Change change) { Tell(std::move(change)); })) {}

EtcdFences::~EtcdFences() = default;

void EtcdFences::Saw(const fence::FenceRecord& fence,
                     std::int64_t mod_revision) {
  if (mod_revision <= 0) return;
  cache_->Refresh(fence.name,
                  etcd::Seen{fence.token, fence.updated_at_ns, mod_revision});
}

std::uint64_t EtcdFences::transactions() const {
  return groups_->transactions() + leases_->transactions();
}

void EtcdFences::Shutdown() { turns_->Shutdown(); }

void EtcdFences::Submit(fence::FenceWrite write, fence::WriteDone done) {
  Enqueue({std::move(write), std::move(done), nullptr});
}

void EtcdFences::Enqueue(etcd::Pending pending) {
  const bool lease = std::holds_alternative<fence::LeaseOp>(pending.write);
  const std::size_t max_queue = session_.options().max_queue;
  WriteOutcome refused;
  refused.error = EtcdGroups::Refuse(pending.write);
  if (!refused.error && groups_->queued() >= max_queue) {
    refused.error = fence::Errc::kOverloaded;
  }
  if (lease && leases_->queued() >= max_queue) {
    refused.error = fence::Errc::kOverloaded;
  }
  if (refused.error) {
    pending.done(std::move(refused));
    return;
  }
  if (lease) {
    leases_->Enqueue(std::move(pending));
  } else {
    groups_->Enqueue(std::move(pending));
  }
}

// g++ 12 takes the write moved into Enqueue below for uninitialized, through
// std::variant's move, depending on what else the unit inlines (a false
// alarm, as the top CMakeLists.txt says).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
Awaitable<std::pair<WriteOutcome, Fences::Turn>> EtcdFences::CommitInTurn(
    fence::FencedWrite write) {
  Turn turn{write.fence, 0};
  if (!co_await turns_->EnsureLease()) {
    WriteOutcome outcome;
    outcome.error = Errc::kStoreUnavailable;
    co_return std::pair{std::move(outcome), turn};
  }
  // Set before the write is answered, and read only after: it lives in
  // this frame until then. (Only trivial captures in the submit function:
  // g++ 12 may destroy a lambda temporary of a co_await expression twice.)
  std::int64_t revision = 0;
  std::int64_t* revision_at = &revision;
  WriteOutcome outcome = co_await AsyncSubmit(
      [this, revision_at](fence::FenceWrite w, fence::WriteDone done) {
        Enqueue({std::move(w), std::move(done), revision_at});
      },
      std::move(write));
  turn.revision = revision;
  co_return std::pair{std::move(outcome), std::move(turn)};
}
#pragma GCC diagnostic pop

void EtcdFences::EndTurn(Turn turn, std::chrono::milliseconds hold) {
  turns_->EndTurn(std::move(turn), hold);
}

Awaitable<Fences::LeaseRead> EtcdFences::GetLease(std::string name,
                                                  std::string fence) {
  co_return co_await leases_->GetLease(std::move(name), std::move(fence));
}

Awaitable<Fences::LeaseList> EtcdFences::ListLeases(std::string prefix,
                                                    std::string after,
                                                    std::size_t limit) {
  co_return co_await leases_->ListLeases(std::move(prefix), std::move(after),
                                         limit);
}

// Reads.

Awaitable<Fences::Read> EtcdFences::Get(std::string name) {
  Read out;
  EtcdApi::Reply reply = co_await session_.Call(
      "/v3/kv/range", etcd::RangeOne(session_.FenceKey(name)), true);
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
      co_await session_.Call("/v3/kv/range", etcd::RangeOne(key), true);
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
  const std::string key = session_.ScopesKey();
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
  const std::string key = session_.FormatKey();
  const StartRead read = co_await ReadAtStart(key);
  const std::string& found = read.value;
  if (read.mod_revision == 0) {
    // The first start of this release on the prefix (another replica's
    // may record it at the same moment: the same value).
    etcd::Txn txn;
    txn.If(etcd::CompareCreate(key, 0)).Then(etcd::PutOp(key, kFormat));
    EtcdApi::Reply put = co_await session_.Call("/v3/kv/txn", txn.Json());
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
  co_return "the records under " + session_.options().spec.prefix +
      " in etcd were written by another release of fencepost (format " +
      (digits ? found : std::string("unknown")) + "; this release writes " +
      std::string(kFormat) + "): serve them with that release or a later one";
}

Awaitable<void> EtcdFences::RecordScopes(fence::ScopeRecord record) {
  const std::string key = session_.ScopesKey();
  // Unchanged since RecordedScopes read it, or another replica's start
  // decided on other scopes in between.
  etcd::Txn txn;
  txn.If(etcd::CompareMod(key, scopes_revision_))
      .Then(etcd::PutOp(key, fence::EncodeScopeRecord(record)));
  EtcdApi::Reply reply = co_await session_.Call("/v3/kv/txn", txn.Json());
  if (!reply.ok || !etcd::Succeeded(reply.json)) {
    throw std::runtime_error(
        "cannot record the scopes in " + key + " in etcd: " +
        (reply.ok ? "another replica changed them while this one started; "
                    "start again"
                  : reply.error));
  }
}

Awaitable<Fences::ListRead> EtcdFences::List(std::string prefix,
                                             std::string after,
                                             std::size_t limit) {
  ListRead out;
  const std::string base = session_.FenceKey("");
  std::optional<etcd::Page> page =
      co_await session_.ReadPage(base, prefix, after, limit, &out.error);
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

Awaitable<Backend::KeyPage> EtcdFences::ListValueKeys(std::string prefix,
                                                      std::string after,
                                                      std::size_t limit) {
  Backend::KeyPage out;
  const std::string base = session_.ValueKey("");
  std::optional<etcd::Page> page =
      co_await session_.ReadPage(base, prefix, after, limit, &out.error);
  if (!page) co_return out;
  for (etcd::PageItem& item : page->items) {
    out.keys.push_back(std::move(item.name));
  }
  out.more = page->more;
  co_return out;
}

Awaitable<bool> EtcdFences::Ready() {
  // A linearizable read needs etcd's quorum, as every write does.
  EtcdApi::Reply reply = co_await session_.Call(
      "/v3/kv/range", etcd::CountOne(session_.FenceKey("")), true);
  co_return reply.ok;
}

Awaitable<EtcdFences::ValueRead> EtcdFences::GetValue(std::string key) {
  ValueRead out;
  EtcdApi::Reply reply = co_await session_.Call(
      "/v3/kv/range", etcd::RangeOne(session_.ValueKey(key)), true);
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
