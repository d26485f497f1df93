#include "client/etcd_leases.h"

#include <charconv>
#include <stdexcept>
#include <utility>

#include "client/json.h"

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Outcome = LeaseAttempt::Outcome;

constexpr std::string_view kDefaultPrefix = "fencepost/leases";

// etcd's JSON carries 64-bit integers as strings ("5"); numbers are read
// too. nullopt when absent or not an integer.
std::optional<std::int64_t> Int64(const Json* value) {
  if (value == nullptr) return std::nullopt;
  if (const std::string* text = value->AsString()) {
    std::int64_t out = 0;
    const auto [end, ec] =
        std::from_chars(text->data(), text->data() + text->size(), out);
    if (ec != std::errc() || end != text->data() + text->size()) {
      return std::nullopt;
    }
    return out;
  }
  return value->AsInt64();
}

// A field that proto3 JSON leaves out when it is zero.
std::int64_t Int64OrZero(const Json* value) {
  return value == nullptr ? 0 : Int64(value).value_or(-1);
}

std::string Quoted(std::int64_t n) { return "\"" + std::to_string(n) + "\""; }

}  // namespace

struct EtcdLeases::Call {
  bool ok = false;     // a 200 with a JSON object
  std::string detail;  // otherwise: what went wrong
  Json json;
};

EtcdLeases::EtcdLeases(const std::string& url, LeaseSpec spec,
                       std::string ca_file)
    : spec_(std::move(spec)) {
  if (spec_.name.empty()) throw std::invalid_argument("the lease needs a name");
  if (spec_.ttl < milliseconds(1)) {
    throw std::invalid_argument("the lease TTL must be positive");
  }
  std::string_view rest = url;
  bool tls = false;
  if (rest.rfind("etcd://", 0) == 0) {
    rest.remove_prefix(7);
  } else if (rest.rfind("etcds://", 0) == 0) {
    rest.remove_prefix(8);
    tls = true;
  } else {
    throw std::invalid_argument("an etcd URL starts with etcd:// or etcds://");
  }
  const std::size_t slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  std::string prefix(slash == std::string_view::npos ? kDefaultPrefix
                                                     : rest.substr(slash + 1));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.empty()) prefix = kDefaultPrefix;
  key_ = prefix + "/" + spec_.name;
  while (!hosts.empty()) {
    const std::size_t comma = hosts.find(',');
    const std::string_view host = hosts.substr(0, comma);
    if (host.empty() || host.find(':') == std::string_view::npos) {
      throw std::invalid_argument("an etcd endpoint is HOST:PORT, not '" +
                                  std::string(host) + "'");
    }
    Client::Options options;
    options.url = (tls ? "https://" : "http://") + std::string(host);
    options.ca_file = ca_file;
    options.max_body = std::size_t{1} << 20;
    Url::Parse(options.url);  // throws, naming the problem
    endpoints_.emplace_back(std::move(options));
    hosts = comma == std::string_view::npos ? std::string_view()
                                            : hosts.substr(comma + 1);
    if (comma != std::string_view::npos && hosts.empty()) {
      throw std::invalid_argument("an empty etcd endpoint");
    }
  }
  if (endpoints_.empty()) throw std::invalid_argument("no etcd endpoint");
}

EtcdLeases::~EtcdLeases() = default;

std::string EtcdLeases::Describe() const {
  std::string out = "etcd";
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    const Url& url = endpoints_[i].url();
    out += (i == 0 ? " " : ",") + url.ToString().substr(url.tls ? 8 : 7);
  }
  return out;
}

EtcdLeases::Call EtcdLeases::Post(const std::string& path,
                                  const std::string& body,
                                  Clock::time_point deadline) {
  Call call;
  for (std::size_t tried = 0; tried < endpoints_.size(); ++tried) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= milliseconds(0)) {
      call.detail = "etcd did not answer in time";
      return call;
    }
    Client& client = endpoints_[current_];
    client.set_timeout(left);
    const Result result =
        client.Send("POST", path, {{"Content-Type", "application/json"}}, body);
    if (!result.ok()) {
      call.detail = client.url().ToString() + ": " + result.detail;
      current_ = (current_ + 1) % endpoints_.size();
      // Only a request that cannot have reached etcd goes to the next
      // endpoint at once; any other may have been applied.
      if (result.error == Errc::kConnectFailed ||
          result.error == Errc::kResolveFailed ||
          result.error == Errc::kTlsFailed) {
        continue;
      }
      return call;
    }
    // A keep-alive answers with one JSON object per line.
    std::string_view text = result.response.body;
    if (const std::size_t nl = text.find('\n'); nl != std::string_view::npos) {
      text = text.substr(0, nl);
    }
    std::optional<Json> json = Json::Parse(text);
    if (result.response.status != 200) {
      const Json* message = json ? json->Find("message") : nullptr;
      if (message == nullptr && json) message = json->Find("error");
      call.detail =
          "etcd answered HTTP " + std::to_string(result.response.status) +
          (message && message->AsString() ? ": " + *message->AsString() : "");
      return call;
    }
    if (!json || json->kind() != Json::Kind::kObject) {
      call.detail = "etcd's answer is not a JSON object";
      return call;
    }
    call.ok = true;
    call.json = std::move(*json);
    return call;
  }
  return call;
}

std::string EtcdLeases::Revoke(std::int64_t lease, Clock::time_point deadline) {
  const Call call =
      Post("/v3/lease/revoke", "{\"ID\":" + Quoted(lease) + "}", deadline);
  return call.ok ? "" : call.detail;
}

LeaseAttempt EtcdLeases::Acquire(milliseconds timeout) {
  if (lease_id_) {
    LeaseAttempt held = Renew(token_, timeout);
    if (held.outcome != Outcome::kRefused) return held;
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  const Clock::time_point sent = Clock::now();
  const long long seconds = (spec_.ttl.count() + 999) / 1000;
  const Call grant =
      Post("/v3/lease/grant", "{\"TTL\":" + Quoted(seconds) + "}", deadline);
  if (!grant.ok) return LeaseAttempt::Failed("lease grant: " + grant.detail);
  const std::optional<std::int64_t> lease = Int64(grant.json.Find("ID"));
  const std::optional<std::int64_t> granted = Int64(grant.json.Find("TTL"));
  if (!lease || !granted || *granted <= 0) {
    return LeaseAttempt::Failed(
        "lease grant: etcd's answer has no lease ID and TTL");
  }
  const std::string key = Base64Encode(key_);
  const std::string body = "{\"compare\":[{\"key\":\"" + key +
                           "\",\"result\":\"EQUAL\",\"target\":\"CREATE\","
                           "\"create_revision\":\"0\"}],"
                           "\"success\":[{\"request_put\":{\"key\":\"" +
                           key + "\",\"value\":\"" +
                           Base64Encode(spec_.holder) +
                           "\",\"lease\":" + Quoted(*lease) +
                           "}}],"
                           "\"failure\":[{\"request_range\":{\"key\":\"" +
                           key + "\"}}]}";
  const Call txn = Post("/v3/kv/txn", body, deadline);
  if (!txn.ok) {
    // Whether the key was created is unknown; the lease expires unless a
    // later acquire finds the key bound to it.
    return LeaseAttempt::Failed("txn: " + txn.detail);
  }
  LeaseAttempt out;
  const Json* succeeded = txn.json.Find("succeeded");
  if (succeeded != nullptr && succeeded->AsBool().value_or(false)) {
    const Json* header = txn.json.Find("header");
    const std::optional<std::int64_t> revision =
        header ? Int64(header->Find("revision")) : std::nullopt;
    if (!revision || *revision <= 0) {
      return LeaseAttempt::Failed("txn: etcd's answer has no revision");
    }
    lease_id_ = *lease;
    token_ = static_cast<std::uint64_t>(*revision);
    out.outcome = Outcome::kHeld;
    out.token = token_;
    out.sent_at = sent;
    out.ttl = std::chrono::seconds(*granted);
    return out;
  }
  // The key exists: whose is it?
  std::string holder;
  const Json* responses = txn.json.Find("responses");
  if (responses != nullptr && !responses->items().empty()) {
    const Json* range = responses->items()[0].Find("response_range");
    const Json* kvs = range ? range->Find("kvs") : nullptr;
    if (kvs != nullptr && !kvs->items().empty()) {
      const Json& kv = kvs->items()[0];
      const std::string* value =
          kv.Find("value") ? kv.Find("value")->AsString() : nullptr;
      if (value != nullptr) holder = Base64Decode(*value).value_or("");
    }
  }
  // Our lease is of no use now: give it back rather than let it expire.
  Revoke(*lease, deadline);
  return LeaseAttempt::Refused("held", holder);
}

LeaseAttempt EtcdLeases::Renew(std::uint64_t token, milliseconds timeout) {
  if (!lease_id_ || token != token_)
    return LeaseAttempt::Refused("not held as that token");
  const Clock::time_point deadline = Clock::now() + timeout;
  const Clock::time_point sent = Clock::now();
  const Call keep = Post("/v3/lease/keepalive",
                         "{\"ID\":" + Quoted(*lease_id_) + "}", deadline);
  if (!keep.ok) return LeaseAttempt::Failed("lease keep-alive: " + keep.detail);
  const Json* result = keep.json.Find("result");
  const std::int64_t ttl = result ? Int64OrZero(result->Find("TTL")) : 0;
  if (ttl <= 0) {
    lease_id_.reset();
    return LeaseAttempt::Refused("the etcd lease expired");
  }
  const Call range = Post("/v3/kv/range",
                          "{\"key\":\"" + Base64Encode(key_) + "\"}", deadline);
  if (!range.ok) return LeaseAttempt::Failed("range: " + range.detail);
  const Json* kvs = range.json.Find("kvs");
  const Json* kv =
      kvs != nullptr && !kvs->items().empty() ? &kvs->items()[0] : nullptr;
  if (kv == nullptr ||
      Int64OrZero(kv->Find("create_revision")) !=
          static_cast<std::int64_t>(token) ||
      Int64OrZero(kv->Find("lease")) != *lease_id_) {
    const std::int64_t lease = *lease_id_;
    lease_id_.reset();
    Revoke(lease, deadline);
    return LeaseAttempt::Refused("the election key " + key_ +
                                 " was deleted or is no longer this lease's");
  }
  LeaseAttempt out;
  out.outcome = Outcome::kHeld;
  out.token = token;
  out.sent_at = sent;
  out.ttl = std::chrono::seconds(ttl);
  return out;
}

std::string EtcdLeases::Release(std::uint64_t token, milliseconds timeout) {
  if (!lease_id_ || token != token_) return "not held as that token";
  const std::int64_t lease = *lease_id_;
  lease_id_.reset();
  return Revoke(lease, Clock::now() + timeout);
}

}  // namespace fencepost::client
