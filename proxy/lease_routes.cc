#include "proxy/lease_routes.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <limits>
#include <map>

#include "http/json.h"
#include "proxy/logging.h"
#include "proxy/routes.h"
#include "storage/async_commit.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using routes::kTokenHeader;
using routes::LimitOf;
using routes::Problemed;
using routes::QueryParam;
using routes::ReadToken;
using routes::Text;

namespace {

constexpr std::size_t kMaxHolderBytes = 256;
constexpr std::uint64_t kMinTtlMs = 100, kMaxTtlMs = 3600000;

Response LeaseDocument(const Request& req, const std::string& name,
                       const fence::LeaseTable::Entry& entry,
                       std::int64_t now) {
  std::string body;
  routes::AppendLease(&body, name, entry, now);
  body += "\n";
  Response res =
      Text(req, http::status::ok, std::move(body), "application/json");
  res.set(kTokenHeader, std::to_string(entry.record.token));
  return res;
}

Response BadLeaseBody(const Request& req, const std::string& name,
                      std::string detail) {
  return Problemed(req, {ProblemType::kBadRequest, std::move(detail), name,
                         std::nullopt, std::nullopt});
}

// A holder ID: 1 to 256 bytes of UTF-8 (checked by the JSON reader)
// without control characters (C0, DEL, C1) or the invisible format
// characters that can disguise text where it is shown or logged (soft
// hyphen, zero-width and bidirectional marks and overrides, line and
// paragraph separators, the byte order mark).
bool IsValidHolder(std::string_view holder) {
  if (holder.empty() || holder.size() > kMaxHolderBytes) return false;
  for (std::size_t i = 0; i < holder.size(); ++i) {
    const auto c = static_cast<unsigned char>(holder[i]);
    if (c < 0x20 || c == 0x7F) return false;
    const auto next = [&](std::size_t k) {
      return i + k < holder.size() ? static_cast<unsigned char>(holder[i + k])
                                   : 0;
    };
    if (c == 0xC2 && (next(1) < 0xA0 || next(1) == 0xAD)) {
      return false;  // U+0080..U+009F, U+00AD
    }
    if (c == 0xE2 && next(1) == 0x80 &&
        ((next(2) >= 0x8B && next(2) <= 0x8F) ||
         (next(2) >= 0xA8 && next(2) <= 0xAE))) {
      return false;  // U+200B..U+200F, U+2028..U+202E
    }
    if (c == 0xE2 && next(1) == 0x81 && next(2) >= 0xA0 && next(2) <= 0xAF) {
      return false;  // U+2060..U+206F
    }
    if (c == 0xEF && next(1) == 0xBB && next(2) == 0xBF) {
      return false;  // U+FEFF
    }
  }
  return true;
}

// Reads a lease body's members: `holder` always, `ttl_ms` when `ttl` is
// given. Returns what is wrong with the body, or an empty string.
std::string ReadLeaseBody(std::string_view body, std::string* holder,
                          std::uint64_t* ttl) {
  std::map<std::string, JsonScalar> members;
  if (std::string error = ParseFlatObject(body, &members, 4); !error.empty()) {
    return "the body must be a JSON object: " + error;
  }
  for (const auto& [name, value] : members) {
    if (name != "holder" && !(ttl && name == "ttl_ms")) {
      return "unknown member \"" + name.substr(0, 64) + "\"";
    }
  }
  auto h = members.find("holder");
  if (h == members.end() || h->second.kind != JsonScalar::Kind::kString ||
      !IsValidHolder(h->second.text)) {
    return "holder must be a string of 1 to 256 bytes of UTF-8 without "
           "control characters";
  }
  *holder = h->second.text;
  if (!ttl) return {};
  auto t = members.find("ttl_ms");
  const std::string_view text =
      t == members.end() ? std::string_view() : t->second.text;
  std::uint64_t n = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), n);
  if (t == members.end() || t->second.kind != JsonScalar::Kind::kNumber ||
      ec != std::errc() || end != text.data() + text.size() || n < kMinTtlMs ||
      n > kMaxTtlMs) {
    return "ttl_ms must be a whole number of milliseconds from 100 to "
           "3600000";
  }
  *ttl = n;
  return {};
}

}  // namespace

LeaseRoutes::LeaseRoutes(RouteContext& context) : RouteUnit(context) {}

Response LeaseRoutes::TooManyLeases(const Request& req,
                                    const std::string& name) {
  metrics_.LeaseLimitReached();
  return Problemed(req, {ProblemType::kTooManyLeases,
                         "--max-leases (" + std::to_string(config_.max_leases) +
                             ") leases are live; a lease is granted again "
                             "once one is released or runs out",
                         name, std::nullopt, std::nullopt});
}

Response LeaseRoutes::LeaseFailure(const Request& req, const std::string& name,
                                   const fence::WriteOutcome& outcome) {
  return Problemed(req, context_.StorageFailure(outcome.error, name, "lease"));
}

Awaitable<fence::WriteOutcome> LeaseRoutes::CommitLease(fence::LeaseOp op) {
  co_return co_await storage::AsyncCommit(fences_, std::move(op));
}

Awaitable<Response> LeaseRoutes::AcquireLease(const Request& req,
                                              const std::string& name) {
  fence::LeaseOp op;
  op.kind = fence::LeaseOp::Kind::kAcquire;
  op.name = name;
  op.fence = std::string(scopes_.FenceFor(name));
  if (std::string error = ReadLeaseBody(req.body(), &op.holder, &op.ttl_ms);
      !error.empty()) {
    co_return BadLeaseBody(req, name, std::move(error));
  }
  if (context_.Elected(op.fence)) {
    co_return Problemed(
        req, {ProblemType::kFenceElected,
              "the lease's fence " + op.fence +
                  " follows an election held elsewhere (--election): its "
                  "holders are that election's",
              name, std::nullopt, std::nullopt});
  }
  const std::string holder = op.holder;
  const fence::WriteOutcome outcome = co_await CommitLease(std::move(op));
  if (outcome.verdict == fence::WriteOutcome::Verdict::kFailed) {
    co_return LeaseFailure(req, name, outcome);
  }
  const fence::LeaseOutcome& lease = *outcome.lease;
  using V = fence::LeaseOutcome::Verdict;
  if (lease.verdict == V::kTooManyLeases) co_return TooManyLeases(req, name);
  if (lease.verdict == V::kDenied) {
    metrics_.LeaseDenied();
    Problem problem{ProblemType::kLeaseHeld,
                    lease.blocking_lease.empty()
                        ? "the lease is held by another holder until it is "
                          "released or runs out"
                        : "the lease " + lease.blocking_lease +
                              " shares this lease's fence and is held; one "
                              "live lease per fence",
                    name, std::nullopt, std::nullopt};
    problem.holder = lease.lease.holder;
    problem.expires_in_ms = lease.expires_in_ms;
    co_return Problemed(req, std::move(problem));
  }
  const std::string token = std::to_string(lease.lease.token);
  if (lease.verdict == V::kGranted) {
    // A grant raises a fence as a bump does.
    context_.Accepted(outcome);
    metrics_.LeaseGranted();
    using R = fence::LeaseOutcome::GrantReason;
    const char* reason = lease.reason == R::kFirst      ? "first grant"
                         : lease.reason == R::kReleased ? "released"
                         : lease.reason == R::kExpired
                             ? "the previous holder's lease ran out"
                             : "the fence went above the lease's token";
    LogEvent(spdlog::level::info, "lease_granted", "lease granted",
             {{"lease", name},
              {"holder", holder},
              {"token", token, true},
              {"generation", std::to_string(lease.lease.transitions), true},
              {"ttl_ms", std::to_string(lease.lease.ttl_ms), true},
              {"expires_at", routes::ExpiresAt(lease.lease)},
              {"previous_holder", lease.previous_holder},
              {"reason", reason}});
  } else {
    metrics_.LeaseRenewed();
  }
  fence::LeaseTable::Entry entry;
  entry.record = lease.lease;
  const std::int64_t now = fences_.SteadyNow();
  entry.deadline_ns = now + lease.expires_in_ms * 1000000;
  co_return LeaseDocument(req, name, entry, now);
}

Awaitable<Response> LeaseRoutes::ReleaseLease(const Request& req,
                                              const std::string& name) {
  fence::LeaseOp op;
  op.kind = fence::LeaseOp::Kind::kRelease;
  op.name = name;
  op.fence = std::string(scopes_.FenceFor(name));
  ReadToken(req, &op.token);
  if (std::string error = ReadLeaseBody(req.body(), &op.holder, nullptr);
      !error.empty()) {
    co_return BadLeaseBody(req, name, std::move(error));
  }
  const std::string holder = op.holder;
  const fence::Token token = op.token;
  const fence::WriteOutcome outcome = co_await CommitLease(std::move(op));
  if (outcome.verdict == fence::WriteOutcome::Verdict::kFailed) {
    co_return LeaseFailure(req, name, outcome);
  }
  if (outcome.lease->verdict != fence::LeaseOutcome::Verdict::kReleased) {
    co_return Problemed(
        req, {ProblemType::kLeaseNotHeld,
              "only the live lease's holder can release it, with its token",
              name, token, std::nullopt});
  }
  metrics_.LeaseReleased();
  LogEvent(
      spdlog::level::info, "lease_released", "lease released",
      {{"lease", name},
       {"holder", holder},
       {"token", std::to_string(token), true},
       {"generation", std::to_string(outcome.lease->lease.transitions), true},
       {"reason", "released by its holder"}});
  Response res(http::status::no_content, req.version());
  co_return res;
}

Awaitable<Response> LeaseRoutes::GetLease(const Request& req,
                                          const std::string& name) {
  const storage::Fences::LeaseRead read =
      co_await fences_.GetLease(name, std::string(scopes_.FenceFor(name)));
  if (read.error)
    co_return Problemed(req,
                        context_.StorageFailure(read.error, name, "lease"));
  if (!read.entry) {
    co_return Problemed(
        req, {ProblemType::kNotFound, "this lease was never granted", name,
              std::nullopt, std::nullopt});
  }
  co_return LeaseDocument(req, name, *read.entry, read.now_ns);
}

Awaitable<Response> LeaseRoutes::ListLeases(const Request& req) {
  std::optional<Response> refused;
  const std::size_t limit = LimitOf(req, &refused);
  if (refused) co_return std::move(*refused);
  const std::string prefix = QueryParam(req.target(), "prefix").value_or("");
  const std::string after = QueryParam(req.target(), "after").value_or("");
  const storage::Fences::LeaseList list =
      co_await fences_.ListLeases(prefix, after, limit);
  if (list.error)
    co_return Problemed(req, context_.StorageFailure(list.error, "", "lease"));
  std::string body = "{\"leases\":[";
  for (std::size_t i = 0; i < list.leases.size(); ++i) {
    if (i > 0) body += ",";
    routes::AppendLease(&body, list.leases[i].first, list.leases[i].second,
                        list.now_ns);
  }
  body += "],\"next\":";
  if (list.next) {
    AppendJsonString(&body, *list.next);
  } else {
    body += "null";
  }
  body += "}\n";
  co_return Text(req, http::status::ok, std::move(body), "application/json");
}

std::string LeaseRoutes::CheckLeases() const {
  return fences_.CheckLeases(scopes_);
}

}  // namespace fencepost::proxy
