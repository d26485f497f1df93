#include "proxy/routes.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "codec/percent.h"
#include "codec/utf8.h"
#include "fence/key.h"
#include "fence/token.h"
#include "proxy/conditional.h"

namespace fencepost::proxy::routes {

namespace http = boost::beast::http;

Response Problemed(const Request& req, Problem problem) {
  return MakeProblemResponse(problem, req.version());
}

Response Text(const Request& req, http::status status, std::string body,
              std::string_view content_type) {
  Response res(status, req.version());
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response MethodNotAllowed(const Request& req, std::string_view allow) {
  Response res = Problemed(
      req, {ProblemType::kMethodNotAllowed,
            std::string(req.method_string()) +
                " is not allowed here; allowed: " + std::string(allow),
            std::nullopt, std::nullopt, std::nullopt});
  res.set(http::field::allow, allow);
  return res;
}

std::vector<std::string_view> TokenValues(const Request& req) {
  std::vector<std::string_view> values;
  const auto [first, last] = req.equal_range(kTokenHeader);
  for (auto it = first; it != last; ++it) values.push_back(it->value());
  return values;
}

TokenState ReadToken(const Request& req, fence::Token* token) {
  return fence::ReadTokenValues(TokenValues(req), token);
}

std::string_view PathOf(std::string_view target) {
  return target.substr(0, target.find('?'));
}

std::string ShownKey(std::string_view target) {
  std::string_view path = PathOf(target);
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  std::string shown(path);
  if (auto decoded = codec::PercentDecode(path, codec::PercentMode::kStrict);
      decoded && codec::IsValidUtf8(*decoded) &&
      decoded->find('\0') == std::string::npos) {
    shown = std::move(*decoded);
  }
  if (shown.size() > fence::kMaxNameBytes) {
    std::size_t cut = fence::kMaxNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    shown.resize(cut);
  }
  return shown;
}

std::string ExpiresAt(const fence::LeaseRecord& lease) {
  return FormatRfc3339(lease.renewed_at_ns +
                       static_cast<std::int64_t>(lease.ttl_ms) * 1000000);
}

// One query parameter, percent-decoded with '+' as space; nullopt if absent
// or malformed.
std::optional<std::string> QueryParam(std::string_view target,
                                      std::string_view name) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  std::optional<std::string> found;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    const std::string_view raw =
        eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    found = codec::PercentDecode(raw, codec::PercentMode::kLenientQuery);
  }
  return found;
}

Problem StaleToken(const std::string& key, fence::Token presented,
                   std::optional<fence::Token> current) {
  return {ProblemType::kStaleToken,
          "token " + std::to_string(presented) +
              " is lower than the fence's highest token " +
              std::to_string(current.value_or(0)),
          key, presented, current};
}

std::size_t LimitOf(const Request& req, std::optional<Response>* refused) {
  constexpr std::size_t kDefaultLimit = 100, kMaxLimit = 1000;
  auto text = QueryParam(req.target(), "limit");
  if (!text) return kDefaultLimit;
  const bool digits = !text->empty() && text->find_first_not_of("0123456789") ==
                                            std::string::npos;
  std::uint64_t n = 0;
  auto [end, ec] =
      std::from_chars(text->data(), text->data() + text->size(), n);
  if (!digits || (ec == std::errc() && n == 0)) {
    *refused = Problemed(req, {ProblemType::kBadRequest,
                               "limit must be a whole number, at least 1 "
                               "(one above 1000 is taken as 1000)",
                               std::nullopt, std::nullopt, std::nullopt});
    return 0;
  }
  return ec == std::errc() ? std::min<std::uint64_t>(n, kMaxLimit) : kMaxLimit;
}

void FinishHead(const Request& req, Response& res,
                std::optional<std::uint64_t> unread_size) {
  if (req.method() != http::verb::head) return;
  // An empty body keeps the Content-Length it has (a relayed upstream HEAD
  // answer carries the upstream's).
  if (!unread_size && res.body().empty()) return;
  const std::uint64_t size = unread_size.value_or(res.body().size());
  res.body().clear();
  // 204 carries no Content-Length (RFC 9110 section 8.6).
  if (res.result() != http::status::no_content) res.content_length(size);
}

void AppendFence(std::string* out, const fence::FenceRecord& fence) {
  *out += "{\"fence\":";
  AppendJsonString(out, fence.name);
  *out += ",\"token\":" + std::to_string(fence.token) + ",\"updated_at\":";
  AppendJsonString(out, FormatRfc3339(fence.updated_at_ns));
  *out += "}";
}

void AppendLease(std::string* out, const std::string& name,
                 const fence::LeaseTable::Entry& entry, std::int64_t now) {
  const fence::LeaseRecord& lease = entry.record;
  const bool live = fence::IsLive(entry, now);
  *out += "{\"name\":";
  AppendJsonString(out, name);
  *out += ",\"holder\":";
  if (live) {
    AppendJsonString(out, lease.holder);
  } else {
    *out += "null";
  }
  const std::int64_t left_ms =
      live ? (entry.deadline_ns - now + 999999) / 1000000 : 0;
  *out += ",\"token\":" + std::to_string(lease.token) +
          ",\"ttl_ms\":" + std::to_string(lease.ttl_ms) +
          ",\"expires_in_ms\":" + std::to_string(left_ms) + ",\"acquired_at\":";
  AppendJsonString(out, FormatRfc3339(lease.acquired_at_ns));
  *out += ",\"renewed_at\":";
  AppendJsonString(out, FormatRfc3339(lease.renewed_at_ns));
  *out += ",\"transitions\":" + std::to_string(lease.transitions) + "}";
}

Response AnswerRead(const Request& req, ReadDone& done,
                    std::unique_ptr<BodySource>* body) {
  if (done.problem) return Problemed(req, std::move(*done.problem));
  storage::ReadResult& read = done.value;
  if (done.not_modified) {
    // No body; Content-Length is the value's, as RFC 9110 8.6 allows.
    Response res(http::status::not_modified, req.version());
    res.set(http::field::etag, QuoteTag(read.etag));
    res.set(http::field::content_length, std::to_string(read.size));
    return res;
  }
  if (read.upstream) {
    read.upstream->version(req.version());
    if (body != nullptr) *body = std::move(read.stream);
    return std::move(*read.upstream);
  }
  Response res(http::status::ok, req.version());
  res.set(http::field::content_type, read.content_type.empty()
                                         ? "application/octet-stream"
                                         : read.content_type);
  if (!read.etag.empty()) res.set(http::field::etag, QuoteTag(read.etag));
  if (read.token) res.set(kTokenHeader, std::to_string(*read.token));
  if (req.method() == http::verb::head) {
    // The backend did not read the value: only its size.
    FinishHead(req, res, read.size);
  } else {
    res.body() = std::move(read.body);
    res.prepare_payload();
  }
  return res;
}

Response AnswerWrite(const Request& req, Written& written) {
  if (written.problem) return Problemed(req, std::move(*written.problem));
  if (written.upstream) {
    // The upstream's answer, with the fence's token.
    Response res = std::move(*written.upstream);
    res.version(req.version());
    if (written.fence_token) {
      res.set(kTokenHeader, std::to_string(*written.fence_token));
    }
    return res;
  }
  // PUT: 201 when it made the value, else 200 with an empty body. DELETE:
  // 204, which RFC 9110 forbids to carry Content-Length.
  http::status status = http::status::ok;
  if (req.method() == http::verb::delete_) {
    status = http::status::no_content;
  } else if (written.created) {
    status = http::status::created;
  }
  Response res(status, req.version());
  if (written.fence_token) {
    res.set(kTokenHeader, std::to_string(*written.fence_token));
  }
  if (!written.etag.empty()) {
    res.set(http::field::etag, QuoteTag(written.etag));
  }
  if (status != http::status::no_content) res.prepare_payload();
  return res;
}

}  // namespace fencepost::proxy::routes
