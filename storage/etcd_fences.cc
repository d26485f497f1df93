#include "storage/etcd_fences.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "fence/rules.h"
#include "fence/errc.h"
#include "fence/scope.h"
#include "storage/async_commit.h"
#include "storage/errc.h"

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;
using Verdict = fence::WriteOutcome::Verdict;
using Json = http::JsonValue;

namespace {

constexpr std::size_t kMaxGroupFences = 64;
constexpr std::size_t kMaxGroupValues = 63;
constexpr std::size_t kMaxGroupBytes = 1u << 20;
constexpr int kGroupAttempts = 3;
constexpr int kAloneAttempts = 16;
constexpr std::size_t kMaxCache = 1u << 20;

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// etcd's JSON spells 64-bit integers as strings; absent means 0.
std::int64_t Int64Of(const Json* value) {
  if (value == nullptr) return 0;
  std::int64_t out = 0;
  const std::string& text = value->text;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size()) return -1;
  return out;
}

std::string Quoted(std::int64_t n) { return "\"" + std::to_string(n) + "\""; }

// The bytes of a kv's "key" or "value" (absent: empty).
bool BytesOf(const Json& kv, std::string_view field, std::string* out) {
  out->clear();
  const Json* value = kv.Find(field);
  if (value == nullptr) return true;
  return http::DecodeBase64(value->text, out);
}

// "TOKEN UPDATED_AT_NS".
bool ParseFence(std::string_view text, fence::Token* token,
                std::int64_t* updated_at_ns) {
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return false;
  const auto a = std::from_chars(text.data(), text.data() + space, *token);
  const auto b = std::from_chars(text.data() + space + 1,
                                 text.data() + text.size(), *updated_at_ns);
  return a.ec == std::errc() && a.ptr == text.data() + space &&
         b.ec == std::errc() && b.ptr == text.data() + text.size();
}

std::string FormatFence(fence::Token token, std::int64_t updated_at_ns) {
  return std::to_string(token) + " " + std::to_string(updated_at_ns);
}

// etcd counts lease TTLs in whole seconds.
std::int64_t EtcdSeconds(std::uint64_t ttl_ms) {
  return static_cast<std::int64_t>(
      std::max<std::uint64_t>(1, (ttl_ms + 999) / 1000));
}

// A hold: "TOKEN DEADLINE_NS NAME_BYTES\n" NAME HOLDER.
std::string FormatHold(fence::Token token, std::int64_t deadline_ns,
                       std::string_view name, std::string_view holder) {
  return std::to_string(token) + " " + std::to_string(deadline_ns) + " " +
         std::to_string(name.size()) + "\n" + std::string(name) +
         std::string(holder);
}

bool ParseHold(std::string_view text, fence::Token* token,
               std::int64_t* deadline_ns, std::string* name,
               std::string* holder) {
  const std::size_t newline = text.find('\n');
  if (newline == std::string_view::npos) return false;
  const char* p = text.data();
  const char* end = text.data() + newline;
  std::size_t name_bytes = 0;
  auto a = std::from_chars(p, end, *token);
  if (a.ec != std::errc() || a.ptr == end || *a.ptr != ' ') return false;
  auto b = std::from_chars(a.ptr + 1, end, *deadline_ns);
  if (b.ec != std::errc() || b.ptr == end || *b.ptr != ' ') return false;
  auto c = std::from_chars(b.ptr + 1, end, name_bytes);
  if (c.ec != std::errc() || c.ptr != end) return false;
  const std::string_view rest = text.substr(newline + 1);
  if (name_bytes > rest.size()) return false;
  *name = std::string(rest.substr(0, name_bytes));
  *holder = std::string(rest.substr(name_bytes));
  return true;
}

// A lease record: '-' or 'n' (its expiry was noticed), then the record.
std::string FormatLease(const fence::LeaseRecord& record, bool noticed) {
  return (noticed ? "n" : "-") + fence::EncodeLease(record);
}

bool ParseLease(std::string_view text, fence::LeaseRecord* record,
                bool* noticed) {
  if (text.empty() || (text[0] != '-' && text[0] != 'n')) return false;
  *noticed = text[0] == 'n';
  return fence::DecodeLease(text.substr(1), record);
}

std::string CompareMod(const std::string& key, std::int64_t revision) {
  return "{\"key\":\"" + EncodeBase64(key) +
         "\",\"target\":\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":\"" +
         std::to_string(revision) + "\"}";
}

std::string PutOp(const std::string& key, const std::string& value,
                  std::int64_t lease = 0) {
  std::string op = "{\"request_put\":{\"key\":\"" + EncodeBase64(key) +
                   "\",\"value\":\"" + EncodeBase64(value) + "\"";
  if (lease != 0) op += ",\"lease\":\"" + std::to_string(lease) + "\"";
  return op + "}}";
}

// The smallest key above every key that starts with `prefix`.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

// A range request for up to `limit` keys under `base` whose names start
// with `prefix`, after the name `after` (a page of a listing).
std::string PageRange(const std::string& base, const std::string& prefix,
                      const std::string& after, std::size_t limit) {
  std::string from = base + prefix;
  if (!after.empty() && after >= prefix) from = base + after + '\0';
  return "{\"key\":\"" + EncodeBase64(from) + "\",\"range_end\":\"" +
         EncodeBase64(PrefixEnd(base + prefix)) +
         "\",\"limit\":" + Quoted(static_cast<std::int64_t>(limit)) + "}";
}

std::string RangeOp(const std::string& key) {
  return "{\"request_range\":{\"key\":\"" + EncodeBase64(key) + "\"}}";
}

// The kvs of a range response ({"kvs": [...]}).
const std::vector<Json>* KvsOf(const Json& range) {
  static const std::vector<Json> kNone;
  const Json* kvs = range.Find("kvs");
  if (kvs == nullptr) return &kNone;
  if (kvs->kind != Json::Kind::kArray) return nullptr;
  return &kvs->items;
}

// Whether a batch's writes fit one transaction.
bool FitsOneTransaction(const fence::Batch& batch) {
  std::set<std::string_view> fences, values;
  std::size_t bytes = 0;
  for (const fence::FencedWrite& w : batch.writes) {
    fences.insert(w.fence);
    if (w.value) {
      values.insert(w.value->key);
      if (w.value->body.size() > EtcdFences::kMaxValueBytes) return false;
      bytes += w.value->body.size();
    }
  }
  return fences.size() <= kMaxGroupFences && values.size() <= kMaxGroupValues &&
         bytes <= kMaxGroupBytes;
}

}  // namespace

bool EtcdFences::SeenOf(const Json& kv, Seen* seen) {
  std::string text;
  fence::Token token = 0;
  if (!BytesOf(kv, "value", &text) ||
      !ParseFence(text, &token, &seen->updated_at_ns)) {
    return false;
  }
  seen->token = token;
  seen->mod_revision = Int64Of(kv.Find("mod_revision"));
  return true;
}

bool EtcdFences::HoldOf(const Json& kv, Hold* hold) {
  std::string text;
  if (!BytesOf(kv, "value", &text) ||
      !ParseHold(text, &hold->token, &hold->deadline_ns, &hold->name,
                 &hold->holder)) {
    return false;
  }
  hold->etcd_lease = Int64Of(kv.Find("lease"));
  return hold->etcd_lease > 0;
}

asio::awaitable<EtcdClient::Reply> EtcdFences::Call(std::string_view path,
                                                    std::string body,
                                                    bool idempotent) {
  EtcdClient::Reply reply =
      co_await client_.Call(path, std::move(body), idempotent);
  if (!reply.ok) last_error_ = reply.error;
  co_return reply;
}

EtcdFences::EtcdFences(asio::io_context& io, Options options)
    : io_(io),
      options_(std::move(options)),
      client_(io, options_.spec, options_.timeout, options_.on_request) {}

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

asio::awaitable<void> EtcdFences::Run() {
  while (!queue_.empty()) {
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
    co_await Settle(std::move(group));
  }
  running_ = false;
}

asio::awaitable<void> EtcdFences::Settle(std::vector<Pending> group) {
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

asio::awaitable<void> EtcdFences::SettleBatch(Pending batch) {
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

asio::awaitable<bool> EtcdFences::Load(const std::vector<Pending>& group,
                                       std::string* error) {
  std::vector<std::string> missing;
  for (const Pending& p : group) {
    const std::string& fence = fence::RoutingFence(p.write);
    if (!cache_.count(fence) &&
        std::find(missing.begin(), missing.end(), fence) == missing.end()) {
      missing.push_back(fence);
    }
  }
  if (missing.empty()) co_return true;
  std::string body = "{\"success\":[";
  for (std::size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) body += ",";
    body += RangeOp(FenceKey(missing[i]));
  }
  body += "]}";
  // Reads only: safe to ask another member.
  EtcdClient::Reply reply = co_await Call("/v3/kv/txn", std::move(body), true);
  if (!reply.ok) {
    *error = reply.error;
    co_return false;
  }
  const Json* responses = reply.json.Find("responses");
  if (responses == nullptr || responses->kind != Json::Kind::kArray ||
      responses->items.size() != missing.size()) {
    *error = "etcd answered a read of fences with something else";
    co_return false;
  }
  if (cache_.size() + missing.size() > kMaxCache) cache_.clear();
  for (std::size_t i = 0; i < missing.size(); ++i) {
    const Json* range = responses->items[i].Find("response_range");
    const std::vector<Json>* kvs = range ? KvsOf(*range) : nullptr;
    if (kvs == nullptr || kvs->size() > 1) {
      *error = "etcd answered a read of fences with something else";
      co_return false;
    }
    Seen seen;
    if (!kvs->empty() && !SeenOf((*kvs)[0], &seen)) {
      *error =
          "the fence record of '" + missing[i] + "' in etcd is not fencepost's";
      co_return false;
    }
    cache_[missing[i]] = seen;
  }
  co_return true;
}

asio::awaitable<EtcdFences::Settled> EtcdFences::TryOnce(
    std::vector<Pending>& group, bool all_or_nothing) {
  std::string error;
  if (!co_await Load(group, &error)) {
    FailAll(group, Errc::kStoreUnavailable);
    co_return Settled::kFailed;
  }

  // Decide every write in order against the fences as the writes before it
  // left them.
  const std::int64_t now_ns = NowNs();
  std::map<std::string, Seen, std::less<>> view;  // the group's fences
  std::map<std::string, std::size_t, std::less<>> last_value;  // key -> write
  std::vector<WriteOutcome> outcomes(group.size());
  std::vector<std::string> changed;  // fences to compare and put
  std::vector<std::size_t> turns;    // writes that take their fence's turn
  bool rejected = false;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const fence::FencedWrite& write = WriteOf(group[i]);
    auto [it, inserted] = view.try_emplace(write.fence, cache_[write.fence]);
    Seen& fence = it->second;
    WriteOutcome& outcome = outcomes[i];
    outcome =
        fence::DecideWrite(write, fence.token, fence.updated_at_ns, now_ns);
    if (!fence::Applied(outcome)) {
      rejected = true;
      continue;
    }
    if (std::find(changed.begin(), changed.end(), write.fence) ==
        changed.end()) {
      changed.push_back(write.fence);  // compared even when only observed
    }
    if (fence::MovesFence(outcome)) {
      fence.token = outcome.current;
      fence.updated_at_ns = outcome.updated_at_ns;
    }
    if (write.value) last_value[write.value->key] = i;
    if (group[i].turn) turns.push_back(i);
  }
  if (!turns.empty() && lease_ == 0) {
    // The lease ran out since the turn was asked for: no turn without it.
    std::vector<Pending> without;
    for (Pending& p : group) {
      if (p.turn) {
        WriteOutcome outcome;
        outcome.error = Errc::kStoreUnavailable;
        p.done(std::move(outcome));
      } else {
        without.push_back(std::move(p));
      }
    }
    group = std::move(without);
    co_return Settled::kConflict;  // decide the others again
  }
  if (changed.empty() || (all_or_nothing && rejected)) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      group[i].done(std::move(outcomes[i]));
    }
    co_return Settled::kDone;
  }

  // compare: each changed fence as this replica saw it; success: the
  // fences that moved and each value's last write, with its previous kv
  // (whether it existed); failure: the fences as they are.
  std::string body = "{\"compare\":[";
  for (std::size_t i = 0; i < changed.size(); ++i) {
    if (i > 0) body += ",";
    body += "{\"key\":\"" + EncodeBase64(FenceKey(changed[i])) +
            "\",\"target\":\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":" +
            Quoted(cache_[changed[i]].mod_revision) + "}";
  }
  for (std::size_t i : turns) {
    body += ",{\"key\":\"" + EncodeBase64(TurnKey(WriteOf(group[i]).fence)) +
            "\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
            "\"create_revision\":\"0\"}";
  }
  body += "],\"success\":[";
  bool first = true;
  std::size_t puts = 0;
  std::vector<std::string> moved;  // the fences put, in order
  for (const std::string& name : changed) {
    const Seen& now = view[name];
    if (now.token == cache_[name].token &&
        now.updated_at_ns == cache_[name].updated_at_ns) {
      continue;  // only observed writes: the fence stays
    }
    moved.push_back(name);
    if (!first) body += ",";
    first = false;
    body += "{\"request_put\":{\"key\":\"" + EncodeBase64(FenceKey(name)) +
            "\",\"value\":\"" +
            EncodeBase64(FormatFence(*now.token, now.updated_at_ns)) + "\"}}";
    ++puts;
  }
  std::vector<std::string> value_keys;  // in the order of their responses
  for (const auto& [key, i] : last_value) {
    const fence::ValueOp& op = *WriteOf(group[i]).value;
    if (!first) body += ",";
    first = false;
    const std::string encoded = EncodeBase64(ValueKey(key));
    if (op.kind == fence::ValueOp::Kind::kDelete) {
      body += "{\"request_delete_range\":{\"key\":\"" + encoded +
              "\",\"prev_kv\":true}}";
    } else {
      const fence::FencedWrite& write = WriteOf(group[i]);
      std::string record =
          (write.token ? std::to_string(*write.token) : std::string("-")) +
          "\n" + op.body;
      body += "{\"request_put\":{\"key\":\"" + encoded + "\",\"value\":\"" +
              EncodeBase64(record) + "\",\"prev_kv\":true}}";
    }
    value_keys.push_back(key);
  }
  // Each turn's value is unique, so a turn whose transaction's outcome is
  // unknown can be removed without touching a later one.
  std::vector<std::string> turn_values;
  for (std::size_t i : turns) {
    if (!first) body += ",";
    first = false;
    turn_values.push_back(options_.replica + " #" +
                          std::to_string(++turn_serial_));
    body += "{\"request_put\":{\"key\":\"" +
            EncodeBase64(TurnKey(WriteOf(group[i]).fence)) + "\",\"value\":\"" +
            EncodeBase64(turn_values.back()) +
            "\",\"lease\":" + Quoted(lease_) + "}}";
  }
  body += "],\"failure\":[";
  for (std::size_t i = 0; i < changed.size(); ++i) {
    if (i > 0) body += ",";
    body += RangeOp(FenceKey(changed[i]));
  }
  for (std::size_t i : turns) {
    body += "," + RangeOp(TurnKey(WriteOf(group[i]).fence));
  }
  body += "]}";

  EtcdClient::Reply reply = co_await Call("/v3/kv/txn", std::move(body));
  if (!reply.ok) {
    // etcd may still apply it: the turns it would take must not outlive
    // this failure (nothing is forwarded under them), or the fences would
    // stay held while this replica's lease lives.
    for (std::size_t t = 0; t < turns.size(); ++t) {
      const std::string key =
          EncodeBase64(TurnKey(WriteOf(group[turns[t]]).fence));
      asio::co_spawn(io_,
                     RemoveTurn(key,
                                "\"target\":\"VALUE\",\"result\":"
                                "\"EQUAL\",\"value\":\"" +
                                    EncodeBase64(turn_values[t]) + "\""),
                     asio::detached);
    }
    FailAll(group, Errc::kStoreUnavailable);
    co_return Settled::kFailed;
  }
  const Json* responses = reply.json.Find("responses");
  const Json* succeeded = reply.json.Find("succeeded");
  const bool success = succeeded != nullptr && succeeded->text == "true";
  const std::size_t expected =
      turns.size() + (success ? puts + value_keys.size() : changed.size());
  if (responses == nullptr ? expected != 0
                           : (responses->kind != Json::Kind::kArray ||
                              responses->items.size() != expected)) {
    FailAll(group, fence::Errc::kStorage);
    co_return Settled::kFailed;
  }

  if (!success) {
    // Another replica moved a fence: take them as they are now (the
    // failure branch read them), and decide again.
    for (std::size_t i = 0; i < changed.size(); ++i) {
      cache_.erase(changed[i]);
      const Json* range = responses->items[i].Find("response_range");
      const std::vector<Json>* kvs = range ? KvsOf(*range) : nullptr;
      if (kvs == nullptr || kvs->size() != 1) continue;  // Load reads it
      Seen seen;
      if (SeenOf((*kvs)[0], &seen)) cache_[changed[i]] = seen;
    }
    // A turn another replica holds: that write waits (503, retry).
    std::vector<bool> held(group.size(), false);
    for (std::size_t t = 0; t < turns.size(); ++t) {
      const Json* range =
          responses->items[changed.size() + t].Find("response_range");
      const std::vector<Json>* kvs = range ? KvsOf(*range) : nullptr;
      held[turns[t]] = kvs == nullptr || !kvs->empty();
    }
    std::vector<Pending> rest;
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (held[i]) {
        WriteOutcome outcome;
        outcome.error = Errc::kFenceHeld;
        group[i].done(std::move(outcome));
      } else {
        rest.push_back(std::move(group[i]));
      }
    }
    group = std::move(rest);
    co_return Settled::kConflict;
  }

  ++transactions_;
  const Json* header = reply.json.Find("header");
  const std::int64_t revision =
      header != nullptr ? Int64Of(header->Find("revision")) : 0;
  for (const std::string& name : moved) {
    // (A lease grant may have cached a later state meanwhile.)
    Seen now = view[name];
    now.mod_revision = revision;
    auto it = cache_.find(name);
    if (it == cache_.end() || it->second.mod_revision < revision) {
      cache_[name] = now;
    }
  }
  // Whether each value existed before the transaction, from its prev_kv.
  std::map<std::string, bool, std::less<>> present;
  for (std::size_t v = 0; v < value_keys.size(); ++v) {
    const Json& response = responses->items[puts + v];
    bool existed = false;
    if (const Json* put = response.Find("response_put")) {
      existed = put->Find("prev_kv") != nullptr;
    } else if (const Json* del = response.Find("response_delete_range")) {
      existed = Int64Of(del->Find("deleted")) > 0;
    }
    present[value_keys[v]] = existed;
  }
  for (std::size_t i = 0; i < group.size(); ++i) {
    WriteOutcome& outcome = outcomes[i];
    const fence::FencedWrite& write = WriteOf(group[i]);
    if (outcome.verdict != Verdict::kRejected && write.value) {
      bool& exists = present[write.value->key];
      const bool put = write.value->kind == fence::ValueOp::Kind::kPut;
      outcome.created = put && !exists;
      exists = put;
    }
    if (group[i].turn && outcome.verdict != Verdict::kRejected) {
      *group[i].turn = revision;
    }
    group[i].done(std::move(outcome));
  }
  co_return Settled::kDone;
}

asio::awaitable<std::pair<WriteOutcome, Fences::Turn>> EtcdFences::CommitInTurn(
    fence::FencedWrite write) {
  Turn turn{write.fence, 0};
  if (!co_await EnsureLease()) {
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

void EtcdFences::EndTurn(Turn turn, std::chrono::milliseconds hold) {
  if (turn.revision == 0) return;
  if (hold.count() <= 0) {
    asio::co_spawn(io_, DeleteTurn(std::move(turn)), asio::detached);
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(io_, hold);
  std::erase_if(holds_, [](const auto& weak) { return weak.expired(); });
  holds_.push_back(timer);
  timer->async_wait([this, timer, turn = std::move(turn)](
                        const boost::system::error_code& ec) mutable {
    if (ec || stopped_) return;  // shut down: the lease ends the turn
    asio::co_spawn(io_, DeleteTurn(std::move(turn)), asio::detached);
  });
}

asio::awaitable<void> EtcdFences::DeleteTurn(Turn turn) {
  // Only this turn: the key as this replica created it.
  co_await RemoveTurn(EncodeBase64(TurnKey(turn.fence)),
                      "\"target\":\"CREATE\",\"result\":\"EQUAL\","
                      "\"create_revision\":" +
                          Quoted(turn.revision));
}

asio::awaitable<void> EtcdFences::RemoveTurn(std::string key,
                                             std::string compare) {
  const std::string body =
      "{\"compare\":[{\"key\":\"" + key + "\"," + compare +
      "}],\"success\":[{\"request_delete_range\":{\"key\":\"" + key + "\"}}]}";
  // Until etcd answers: a turn left behind would hold its fence on every
  // replica for as long as this one lives. (Stopped: the lease ends it.)
  auto wait = std::chrono::milliseconds(100);
  while (!(co_await Call("/v3/kv/txn", body)).ok && !stopped_) {
    asio::steady_timer timer(io_, wait);
    co_await timer.async_wait(asio::use_awaitable);
    wait =
        std::min<std::chrono::milliseconds>(wait * 2, std::chrono::seconds(5));
  }
}

asio::awaitable<bool> EtcdFences::EnsureLease() {
  while (lease_busy_) {
    asio::steady_timer wait(io_, std::chrono::milliseconds(5));
    co_await wait.async_wait(asio::use_awaitable);
  }
  const auto now = std::chrono::steady_clock::now();
  if (lease_ != 0 && now < lease_fresh_until_) co_return true;
  if (stopped_) co_return false;
  lease_busy_ = true;
  const auto sent = std::chrono::steady_clock::now();
  EtcdClient::Reply reply;
  if (lease_ != 0) {
    reply =
        co_await Call("/v3/lease/keepalive", "{\"ID\":" + Quoted(lease_) + "}");
    const Json* result = reply.ok ? reply.json.Find("result") : nullptr;
    if (result == nullptr || Int64Of(result->Find("TTL")) <= 0) {
      if (reply.ok) lease_ = 0;  // it ran out: a new one below
    }
  }
  if (lease_ == 0) {
    reply =
        co_await Call("/v3/lease/grant",
                      "{\"TTL\":" + Quoted(options_.turn_ttl.count()) + "}");
    if (reply.ok) lease_ = Int64Of(reply.json.Find("ID"));
    if (lease_ < 0) lease_ = 0;
  }
  const bool fresh = reply.ok && lease_ != 0;
  if (fresh) {
    // The lease lives turn_ttl from when etcd saw the request, which was
    // after `sent`.
    lease_fresh_until_ = sent + options_.turn_ttl - options_.turn_need;
    if (!keeping_alive_) {
      keeping_alive_ = true;
      asio::co_spawn(io_, KeepAlive(), asio::detached);
    }
  }
  lease_busy_ = false;
  co_return fresh;
}

asio::awaitable<void> EtcdFences::KeepAlive() {
  keepalive_timer_ = std::make_unique<asio::steady_timer>(io_);
  while (!stopped_) {
    keepalive_timer_->expires_after(options_.turn_ttl / 3);
    boost::system::error_code ec;
    co_await keepalive_timer_->async_wait(
        asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopped_) break;
    lease_fresh_until_ = {};  // renew now
    co_await EnsureLease();
  }
  keeping_alive_ = false;
}

void EtcdFences::Shutdown() {
  stopped_ = true;
  if (keepalive_timer_) keepalive_timer_->cancel();
  for (auto& weak : holds_) {
    if (auto timer = weak.lock()) timer->cancel();
  }
  holds_.clear();
}

asio::awaitable<Fences::Read> EtcdFences::Get(std::string name) {
  Read out;
  std::string body = "{\"key\":\"" + EncodeBase64(FenceKey(name)) + "\"}";
  EtcdClient::Reply reply =
      co_await Call("/v3/kv/range", std::move(body), true);
  if (!reply.ok) {
    out.error = Errc::kStoreUnavailable;
    co_return out;
  }
  const std::vector<Json>* kvs = KvsOf(reply.json);
  if (kvs == nullptr || kvs->size() > 1) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  if (kvs->empty()) co_return out;
  std::string text;
  fence::FenceRecord record{name, 0, 0};
  if (!BytesOf((*kvs)[0], "value", &text) ||
      !ParseFence(text, &record.token, &record.updated_at_ns)) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  out.fence = std::move(record);
  co_return out;
}

asio::awaitable<fence::ScopeRecord> EtcdFences::RecordedScopes() {
  const std::string key = options_.spec.prefix + "/scopes";
  EtcdClient::Reply reply = co_await Call(
      "/v3/kv/range", "{\"key\":\"" + EncodeBase64(key) + "\"}", true);
  const std::vector<Json>* kvs = reply.ok ? KvsOf(reply.json) : nullptr;
  std::string text;
  if (kvs == nullptr || kvs->size() > 1 ||
      (kvs->size() == 1 && !BytesOf((*kvs)[0], "value", &text))) {
    throw std::runtime_error("cannot read " + key + " from etcd" +
                             (reply.ok ? "" : ": " + reply.error));
  }
  scopes_revision_ =
      kvs->empty() ? 0 : Int64Of((*kvs)[0].Find("mod_revision"));
  std::optional<fence::ScopeRecord> record = fence::DecodeScopeRecord(text);
  if (!record) {
    throw std::runtime_error(key + " in etcd does not hold a scope record");
  }
  co_return *record;
}

asio::awaitable<void> EtcdFences::RecordScopes(fence::ScopeRecord record) {
  const std::string key = options_.spec.prefix + "/scopes";
  const std::string text = fence::EncodeScopeRecord(record);
  // Unchanged since RecordedScopes read it, or another replica's start
  // decided on other scopes in between.
  EtcdClient::Reply reply = co_await Call(
      "/v3/kv/txn", "{\"compare\":[" + CompareMod(key, scopes_revision_) +
                        "],\"success\":[" + PutOp(key, text) + "]}");
  const Json* succeeded = reply.ok ? reply.json.Find("succeeded") : nullptr;
  if (succeeded == nullptr || succeeded->text != "true") {
    throw std::runtime_error(
        "cannot record the scopes in " + key + " in etcd: " +
        (reply.ok ? "another replica changed them while this one started; "
                    "start again"
                  : reply.error));
  }
}

asio::awaitable<Fences::ListRead> EtcdFences::List(std::string prefix,
                                                   std::string after,
                                                   std::size_t limit) {
  ListRead out;
  const std::string base = FenceKey("");
  EtcdClient::Reply reply = co_await Call(
      "/v3/kv/range", PageRange(base, prefix, after, limit), true);
  if (!reply.ok) {
    out.error = Errc::kStoreUnavailable;
    co_return out;
  }
  const std::vector<Json>* kvs = KvsOf(reply.json);
  if (kvs == nullptr) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  for (const Json& kv : *kvs) {
    std::string key, text;
    fence::FenceRecord record;
    if (!BytesOf(kv, "key", &key) || key.compare(0, base.size(), base) != 0 ||
        !BytesOf(kv, "value", &text) ||
        !ParseFence(text, &record.token, &record.updated_at_ns)) {
      out.error = fence::Errc::kStorage;
      co_return out;
    }
    record.name = key.substr(base.size());
    out.list.fences.push_back(std::move(record));
  }
  const Json* more = reply.json.Find("more");
  if (more != nullptr && more->text == "true" && !out.list.fences.empty()) {
    out.list.next = out.list.fences.back().name;
  }
  co_return out;
}

asio::awaitable<bool> EtcdFences::Ready() {
  // A linearizable read needs etcd's quorum, as every write does.
  std::string body = "{\"key\":\"" + EncodeBase64(FenceKey("")) +
                     "\",\"limit\":\"1\",\"count_only\":true}";
  EtcdClient::Reply reply =
      co_await Call("/v3/kv/range", std::move(body), true);
  co_return reply.ok;
}

asio::awaitable<EtcdFences::ValueRead> EtcdFences::GetValue(std::string key) {
  ValueRead out;
  std::string body = "{\"key\":\"" + EncodeBase64(ValueKey(key)) + "\"}";
  EtcdClient::Reply reply =
      co_await Call("/v3/kv/range", std::move(body), true);
  if (!reply.ok) {
    out.error = Errc::kStoreUnavailable;
    co_return out;
  }
  const std::vector<Json>* kvs = KvsOf(reply.json);
  if (kvs == nullptr || kvs->size() > 1) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  if (kvs->empty()) co_return out;
  std::string record;
  const std::size_t newline = [&] {
    if (!BytesOf((*kvs)[0], "value", &record)) return std::string::npos;
    return record.find('\n');
  }();
  if (newline == std::string::npos) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  const std::string_view token(record.data(), newline);
  if (token != "-") {
    fence::Token t = 0;
    const auto [end, ec] =
        std::from_chars(token.data(), token.data() + token.size(), t);
    if (ec != std::errc() || end != token.data() + token.size()) {
      out.error = fence::Errc::kStorage;
      co_return out;
    }
    out.token = t;
  }
  out.found = true;
  out.body = record.substr(newline + 1);
  co_return out;
}

// Leases.

asio::awaitable<std::error_code> EtcdFences::ReadLease(
    const std::string& name, const std::string& fence_name, StoredLease* state) {
  std::string body = "{\"success\":[" + RangeOp(LeaseKey(name)) + "," +
                     RangeOp(HoldKey(fence_name)) + "," +
                     RangeOp(FenceKey(fence_name)) + "]}";
  EtcdClient::Reply reply = co_await Call("/v3/kv/txn", std::move(body), true);
  if (!reply.ok) co_return Errc::kStoreUnavailable;
  const Json* responses = reply.json.Find("responses");
  if (responses == nullptr || responses->kind != Json::Kind::kArray ||
      responses->items.size() != 3) {
    co_return fence::Errc::kStorage;
  }
  const Json* kv[3] = {nullptr, nullptr, nullptr};
  for (std::size_t i = 0; i < 3; ++i) {
    const Json* range = responses->items[i].Find("response_range");
    const std::vector<Json>* kvs = range ? KvsOf(*range) : nullptr;
    if (kvs == nullptr || kvs->size() > 1) co_return fence::Errc::kStorage;
    if (!kvs->empty()) kv[i] = &(*kvs)[0];
  }
  std::string text;
  if (kv[0] != nullptr) {
    fence::LeaseRecord record;
    if (!BytesOf(*kv[0], "value", &text) ||
        !ParseLease(text, &record, &state->noticed)) {
      co_return fence::Errc::kStorage;
    }
    state->record = std::move(record);
    state->record_revision = Int64Of(kv[0]->Find("mod_revision"));
  }
  if (kv[1] != nullptr) {
    Hold hold;
    if (!HoldOf(*kv[1], &hold)) co_return fence::Errc::kStorage;
    state->hold = std::move(hold);
    state->hold_revision = Int64Of(kv[1]->Find("mod_revision"));
  }
  if (kv[2] != nullptr && !SeenOf(*kv[2], &state->fence)) {
    co_return fence::Errc::kStorage;
  }
  co_return std::error_code();
}

asio::awaitable<std::int64_t> EtcdFences::GrantEtcdLease(std::uint64_t ttl_ms) {
  EtcdClient::Reply reply = co_await Call(
      "/v3/lease/grant", "{\"TTL\":" + Quoted(EtcdSeconds(ttl_ms)) + "}");
  if (!reply.ok) co_return 0;
  const std::int64_t id = Int64Of(reply.json.Find("ID"));
  co_return id > 0 ? id : 0;
}

void EtcdFences::RevokeEtcdLease(std::int64_t id) {
  if (id <= 0) return;
  // Best effort: an etcd lease left behind runs out by itself.
  asio::co_spawn(io_, Call("/v3/lease/revoke", "{\"ID\":" + Quoted(id) + "}"),
                 asio::detached);
}

asio::awaitable<void> EtcdFences::SettleLeases() {
  while (!leases_.empty()) {
    Pending pending = std::move(leases_.front());
    leases_.pop_front();
    co_await SettleLease(std::move(pending));
  }
  --lease_workers_;
}

asio::awaitable<void> EtcdFences::SettleLease(Pending pending) {
  WriteOutcome outcome;
  Settled settled = Settled::kConflict;
  for (int attempt = 0;
       attempt < kAloneAttempts && settled == Settled::kConflict; ++attempt) {
    if (attempt > 0 && options_.on_retry) options_.on_retry();
    outcome = WriteOutcome();
    settled = co_await TryLease(std::get<fence::LeaseOp>(pending.write),
                                &outcome);
  }
  if (settled == Settled::kConflict) {
    outcome = WriteOutcome();
    outcome.error = fence::Errc::kOverloaded;
  }
  pending.done(std::move(outcome));
}

// The rules are fence::DecideLease's; here the hold in etcd decides whether
// a lease is live, and the decision becomes one transaction that compares
// everything it was decided on.
asio::awaitable<EtcdFences::Settled> EtcdFences::TryLease(
    const fence::LeaseOp& op, WriteOutcome* outcome) {
  StoredLease state;
  if (std::error_code error = co_await ReadLease(op.name, op.fence, &state)) {
    outcome->error = error;
    co_return Settled::kFailed;
  }
  if (state.record && state.record->fence != op.fence) {
    // Another replica granted it under other --fence-scope settings: its
    // hold is under that fence, so this replica would not see it live.
    outcome->error = Errc::kScopeMismatch;
    co_return Settled::kFailed;
  }
  const std::int64_t now_ns = NowNs();
  const fence::LeaseState rules = RulesView(op, state, now_ns);
  // The lease ran out and no replica has counted it yet: the transaction
  // that changes its record counts it (its compare makes that one).
  const bool unnoticed = state.record && !state.record->released &&
                         !rules.live && !state.noticed;
  fence::LeaseDecision decision =
      fence::DecideLease(op, state.fence.token, rules, now_ns);
  *outcome = std::move(decision.outcome);
  if (!decision.next) {
    if (outcome->error) co_return Settled::kFailed;
    // A refusal changes nothing, but notices a lease that ran out.
    if (unnoticed && co_await NoticeExpiry(op.name, state)) {
      outcome->lease->expired = *state.record;
    }
    co_return Settled::kDone;
  }
  const Settled settled =
      co_await CommitLease(op, state, *decision.next, outcome, now_ns);
  if (settled == Settled::kDone && unnoticed) {
    outcome->lease->expired = *state.record;
  }
  co_return settled;
}

fence::LeaseState EtcdFences::RulesView(const fence::LeaseOp& op,
                                        const StoredLease& state,
                                        std::int64_t now_ns) {
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  const bool ours = hold != nullptr && hold->name == op.name;
  fence::LeaseState view;
  view.record = state.record;
  view.live = state.record && !state.record->released && ours &&
              hold->token == state.record->token;
  const std::int64_t left_ms =
      hold == nullptr ? 0
                      : std::max<std::int64_t>(
                            1, (hold->deadline_ns - now_ns + 999999) / 1000000);
  view.expires_in_ms = left_ms;
  if (hold != nullptr && !ours) {
    // The blocking lease, as its hold tells it (what the 409 shows).
    fence::LeaseRecord blocking;
    blocking.holder = hold->holder;
    blocking.fence = op.fence;
    blocking.token = hold->token;
    view.other = fence::LeaseState::Blocking{hold->name, std::move(blocking),
                                             left_ms};
  }
  return view;
}

asio::awaitable<EtcdFences::Settled> EtcdFences::CommitLease(
    const fence::LeaseOp& op, const StoredLease& state,
    const fence::LeaseRecord& next, WriteOutcome* outcome,
    std::int64_t now_ns) {
  using LeaseVerdict = fence::LeaseOutcome::Verdict;
  const LeaseVerdict verdict = outcome->lease->verdict;
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  const std::string lease_key = LeaseKey(op.name);
  const std::string hold_key = HoldKey(op.fence);
  const std::string hold_value = FormatHold(
      next.token, now_ns + static_cast<std::int64_t>(next.ttl_ms) * 1000000,
      op.name, next.holder);
  // Every transaction compares the record and the hold as read; an acquire
  // also the fence, since a renewal keeps its token only while the fence
  // is not above it.
  std::string txn = "{\"compare\":[" +
                    CompareMod(lease_key, state.record_revision) + "," +
                    CompareMod(hold_key, state.hold_revision);
  if (op.kind == fence::LeaseOp::Kind::kAcquire) {
    txn += "," + CompareMod(FenceKey(op.fence), state.fence.mod_revision);
  }
  txn += "],\"success\":[" + PutOp(lease_key, FormatLease(next, false));
  std::int64_t granted = 0;  // a new etcd lease for the hold
  std::int64_t revoke = 0;   // the etcd lease the hold leaves
  if (verdict == LeaseVerdict::kReleased) {
    txn += ",{\"request_delete_range\":{\"key\":\"" +
           EncodeBase64(hold_key) + "\"}}";
    revoke = hold->etcd_lease;
  } else {
    std::int64_t etcd_lease = 0;
    const bool live = verdict == LeaseVerdict::kRenewed && hold != nullptr &&
                      hold->name == op.name &&
                      hold->token == state.record->token;
    if (live &&
        EtcdSeconds(state.record->ttl_ms) == EtcdSeconds(next.ttl_ms)) {
      // etcd restarts the lease's TTL from when it sees this. The etcd
      // lease is this lease's own (each grant gets a new one), so the
      // keep-alive extends nobody else's; if the hold changed meanwhile,
      // the compare fails and nothing is renewed.
      const Settled kept = co_await KeepHoldAlive(hold->etcd_lease);
      if (kept != Settled::kDone) {
        if (kept == Settled::kFailed) {
          *outcome = WriteOutcome{};
          outcome->error = Errc::kStoreUnavailable;
        }
        co_return kept;
      }
      etcd_lease = hold->etcd_lease;
    } else {
      etcd_lease = granted = co_await GrantEtcdLease(next.ttl_ms);
      if (etcd_lease == 0) {
        *outcome = WriteOutcome{};
        outcome->error = Errc::kStoreUnavailable;
        co_return Settled::kFailed;
      }
      if (hold != nullptr) revoke = hold->etcd_lease;
    }
    if (verdict == LeaseVerdict::kGranted) {
      txn += "," + PutOp(FenceKey(op.fence), FormatFence(next.token, now_ns));
    }
    txn += "," + PutOp(hold_key, hold_value, etcd_lease);
  }
  EtcdClient::Reply reply = co_await Call("/v3/kv/txn", txn + "]}");
  if (!reply.ok) {
    // Unknown: it may be applied. A holder that asks again renews it.
    *outcome = WriteOutcome{};
    outcome->error = Errc::kStoreUnavailable;
    co_return Settled::kFailed;
  }
  const Json* succeeded = reply.json.Find("succeeded");
  if (succeeded == nullptr || succeeded->text != "true") {
    RevokeEtcdLease(granted);
    co_return Settled::kConflict;
  }
  ++transactions_;
  RevokeEtcdLease(revoke);
  if (verdict == LeaseVerdict::kGranted) {
    const Json* header = reply.json.Find("header");
    CacheFence(op.fence, next.token, now_ns,
               header != nullptr ? Int64Of(header->Find("revision")) : 0);
  }
  co_return Settled::kDone;
}

asio::awaitable<EtcdFences::Settled> EtcdFences::KeepHoldAlive(
    std::int64_t etcd_lease) {
  EtcdClient::Reply reply = co_await Call(
      "/v3/lease/keepalive", "{\"ID\":" + Quoted(etcd_lease) + "}");
  if (!reply.ok) co_return Settled::kFailed;
  const Json* result = reply.json.Find("result");
  if (result == nullptr || Int64Of(result->Find("TTL")) <= 0) {
    co_return Settled::kConflict;  // it ran out just now: read again
  }
  co_return Settled::kDone;
}

void EtcdFences::CacheFence(const std::string& name, fence::Token token,
                            std::int64_t updated_at_ns,
                            std::int64_t revision) {
  // Unless a group committed since (a failed compare corrects any entry
  // that is behind).
  auto it = cache_.find(name);
  if (revision <= 0) {
    cache_.erase(name);
  } else if (it == cache_.end() || it->second.mod_revision < revision) {
    cache_[name] = Seen{token, updated_at_ns, revision};
  }
}

asio::awaitable<bool> EtcdFences::NoticeExpiry(const std::string& name,
                                               const StoredLease& state) {
  const std::string key = LeaseKey(name);
  EtcdClient::Reply reply = co_await Call(
      "/v3/kv/txn", "{\"compare\":[" + CompareMod(key, state.record_revision) +
                        "],\"success\":[" +
                        PutOp(key, FormatLease(*state.record, true)) + "]}");
  const Json* succeeded = reply.ok ? reply.json.Find("succeeded") : nullptr;
  co_return succeeded != nullptr && succeeded->text == "true";
}

fence::LeaseEntry EtcdFences::EntryOf(const StoredLease& state,
                                             std::int64_t now) const {
  fence::LeaseEntry entry;
  entry.record = *state.record;
  const Hold* hold = state.hold ? &*state.hold : nullptr;
  if (!entry.record.released && hold != nullptr &&
      hold->token == entry.record.token) {
    // Live while the hold exists; how long for is the granting replica's
    // estimate (at least 1 ms).
    const std::int64_t left_ns = hold->deadline_ns - NowNs();
    entry.deadline_ns = now + std::max<std::int64_t>(1000000, left_ns);
  }
  entry.expiry_noticed = state.noticed;
  return entry;
}

asio::awaitable<Fences::LeaseRead> EtcdFences::GetLease(std::string name,
                                                        std::string fence) {
  LeaseRead out;
  StoredLease state;
  out.error = co_await ReadLease(name, fence, &state);
  if (state.hold && state.hold->name != name) state.hold.reset();
  out.now_ns = SteadyNow();
  if (out.error || !state.record) co_return out;
  if (state.record->fence != fence) {
    out.error = Errc::kScopeMismatch;
    co_return out;
  }
  out.entry = EntryOf(state, out.now_ns);
  if (fence::IsLive(*out.entry, out.now_ns) || state.record->released ||
      state.noticed) {
    co_return out;
  }
  const bool noticed = co_await NoticeExpiry(name, state);
  if (noticed) out.expired = *state.record;
  co_return out;
}

asio::awaitable<Fences::LeaseList> EtcdFences::ListLeases(std::string prefix,
                                                          std::string after,
                                                          std::size_t limit) {
  LeaseList out;
  const std::string base = LeaseKey("");
  EtcdClient::Reply reply = co_await Call(
      "/v3/kv/range", PageRange(base, prefix, after, limit), true);
  if (!reply.ok) {
    out.error = Errc::kStoreUnavailable;
    co_return out;
  }
  const std::vector<Json>* kvs = KvsOf(reply.json);
  if (kvs == nullptr) {
    out.error = fence::Errc::kStorage;
    co_return out;
  }
  std::vector<std::pair<std::string, StoredLease>> leases;
  for (const Json& kv : *kvs) {
    std::string key, text;
    StoredLease state;
    fence::LeaseRecord record;
    if (!BytesOf(kv, "key", &key) || key.compare(0, base.size(), base) != 0 ||
        !BytesOf(kv, "value", &text) ||
        !ParseLease(text, &record, &state.noticed)) {
      out.error = fence::Errc::kStorage;
      co_return out;
    }
    state.record = std::move(record);
    state.record_revision = Int64Of(kv.Find("mod_revision"));
    leases.emplace_back(key.substr(base.size()), std::move(state));
  }
  // The holds of their fences, 64 reads to a transaction.
  for (std::size_t first = 0; first < leases.size(); first += 64) {
    const std::size_t last = std::min(leases.size(), first + 64);
    std::string reads = "{\"success\":[";
    for (std::size_t i = first; i < last; ++i) {
      if (i > first) reads += ",";
      reads += RangeOp(HoldKey(leases[i].second.record->fence));
    }
    reads += "]}";
    EtcdClient::Reply holds =
        co_await Call("/v3/kv/txn", std::move(reads), true);
    const Json* responses = holds.ok ? holds.json.Find("responses") : nullptr;
    if (!holds.ok) {
      out.error = Errc::kStoreUnavailable;
      co_return out;
    }
    if (responses == nullptr || responses->kind != Json::Kind::kArray ||
        responses->items.size() != last - first) {
      out.error = fence::Errc::kStorage;
      co_return out;
    }
    for (std::size_t i = first; i < last; ++i) {
      const Json* range = responses->items[i - first].Find("response_range");
      const std::vector<Json>* found = range ? KvsOf(*range) : nullptr;
      if (found == nullptr || found->size() > 1) {
        out.error = fence::Errc::kStorage;
        co_return out;
      }
      if (found->empty()) continue;
      Hold hold;
      if (!HoldOf((*found)[0], &hold)) {
        out.error = fence::Errc::kStorage;
        co_return out;
      }
      if (hold.name == leases[i].first) leases[i].second.hold = std::move(hold);
    }
  }
  out.now_ns = SteadyNow();
  // A listing notices a few expiries (one transaction each), and none after
  // one that did not take: a read must not wait on many writes.
  int notices = 16;
  for (auto& [name, state] : leases) {
    fence::LeaseEntry entry = EntryOf(state, out.now_ns);
    if (!fence::IsLive(entry, out.now_ns) && !entry.record.released &&
        !state.noticed && notices > 0) {
      const bool noticed = co_await NoticeExpiry(name, state);
      if (noticed) {
        out.expired.emplace_back(name, entry.record);
        --notices;
      } else {
        notices = 0;
      }
    }
    out.leases.emplace_back(name, std::move(entry));
  }
  const Json* more = reply.json.Find("more");
  if (more != nullptr && more->text == "true" && !out.leases.empty()) {
    out.next = out.leases.back().first;
  }
  co_return out;
}

}  // namespace fencepost::storage
