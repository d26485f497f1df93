#include "sigv4/verifier.h"

#include <optional>

#include "codec/percent.h"
#include "sigv4/errc.h"

namespace fencepost::sigv4 {
namespace {

constexpr auto kMaxExpires = std::chrono::seconds(7 * 24 * 3600);

// The headers named `lower`, in the order received.
std::vector<const Header*> Find(std::span<const Header> headers,
                                std::string_view lower) {
  std::vector<const Header*> found;
  for (const Header& h : headers) {
    if (EqualsLowerCase(h.name, lower)) found.push_back(&h);
  }
  return found;
}

const QueryParam* FindParam(std::span<const QueryParam> query,
                            std::string_view name) {
  for (const QueryParam& p : query) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool LowerHex(std::string_view s, size_t size) {
  if (s.size() != size) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// "AKID/20130524/us-east-1/s3/aws4_request"
bool ParseCredential(std::string_view text, Claim* claim) {
  std::string_view parts[4];
  for (int i = 3; i >= 0; --i) {
    size_t slash = text.rfind('/');
    if (slash == std::string_view::npos) return false;
    parts[i] = text.substr(slash + 1);
    text = text.substr(0, slash);
  }
  if (text.empty() || parts[3] != "aws4_request" || parts[0].size() != 8 ||
      parts[1].empty() || parts[2].empty()) {
    return false;
  }
  claim->access_key_id = std::string(text);
  claim->scope = {std::string(parts[0]), std::string(parts[1]),
                  std::string(parts[2])};
  return true;
}

// "host;range;x-amz-date"
std::error_code ParseSignedHeaders(std::string_view text, Claim* claim) {
  claim->signed_headers.clear();
  bool host = false;
  while (true) {
    size_t semicolon = text.find(';');
    std::string_view name = text.substr(0, semicolon);
    if (name.empty()) return Errc::kMalformed;
    for (char c : name) {
      if (c >= 'A' && c <= 'Z') return Errc::kMalformed;
    }
    for (const std::string& seen : claim->signed_headers) {
      if (seen == name) return Errc::kMalformed;
    }
    host = host || name == "host";
    claim->signed_headers.emplace_back(name);
    if (semicolon == std::string_view::npos) break;
    text.remove_prefix(semicolon + 1);
  }
  return host ? std::error_code() : Errc::kHostNotSigned;
}

std::error_code CheckDate(Claim* claim) {
  if (!ParseAmzDate(claim->amz_date) ||
      claim->amz_date.substr(0, 8) != claim->scope.date) {
    return Errc::kBadDate;
  }
  return {};
}

// "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..."
std::error_code ParseAuthorization(std::string_view value, Claim* claim) {
  value = TrimSpaces(value);
  size_t space = value.find(' ');
  if (space == std::string_view::npos) return Errc::kMalformed;
  if (value.substr(0, space) != kAlgorithm) {
    return Errc::kUnsupportedAlgorithm;
  }
  std::optional<std::string_view> credential, signed_headers, signature;
  std::string_view rest = value.substr(space + 1);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = TrimSpaces(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view()
                                           : rest.substr(comma + 1);
    size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view v =
        eq == std::string_view::npos ? "" : item.substr(eq + 1);
    auto* slot = key == "Credential"      ? &credential
                 : key == "SignedHeaders" ? &signed_headers
                 : key == "Signature"     ? &signature
                                          : nullptr;
    if (slot == nullptr || slot->has_value()) return Errc::kMalformed;
    *slot = v;
  }
  if (!credential || !signed_headers || !signature ||
      !ParseCredential(*credential, claim) || !LowerHex(*signature, 64)) {
    return Errc::kMalformed;
  }
  claim->signature = std::string(*signature);
  return ParseSignedHeaders(*signed_headers, claim);
}

std::error_code ParsePresigned(std::span<const QueryParam> query,
                               Claim* claim) {
  const QueryParam* algorithm = FindParam(query, "X-Amz-Algorithm");
  const QueryParam* credential = FindParam(query, "X-Amz-Credential");
  const QueryParam* date = FindParam(query, "X-Amz-Date");
  const QueryParam* expires = FindParam(query, "X-Amz-Expires");
  const QueryParam* headers = FindParam(query, "X-Amz-SignedHeaders");
  const QueryParam* signature = FindParam(query, "X-Amz-Signature");
  if (!algorithm || !credential || !date || !expires || !headers ||
      !signature) {
    return Errc::kMalformed;
  }
  if (algorithm->value != kAlgorithm) return Errc::kUnsupportedAlgorithm;
  if (!ParseCredential(credential->value, claim) ||
      !LowerHex(signature->value, 64) || expires->value.empty() ||
      expires->value.size() > 6 ||
      expires->value.find_first_not_of("0123456789") != std::string::npos) {
    return Errc::kMalformed;
  }
  claim->expires = std::chrono::seconds(std::stol(expires->value));
  if (claim->expires.count() < 1 || claim->expires > kMaxExpires) {
    return Errc::kMalformed;
  }
  claim->presigned = true;
  claim->signature = signature->value;
  claim->amz_date = date->value;
  return ParseSignedHeaders(headers->value, claim);
}

std::string_view PathOf(std::string_view target) {
  return target.substr(0, target.find('?'));
}

std::string_view QueryOf(std::string_view target) {
  size_t q = target.find('?');
  return q == std::string_view::npos ? std::string_view()
                                     : target.substr(q + 1);
}

}  // namespace

std::error_code ParseClaim(const Received& request, Claim* claim) {
  *claim = Claim();
  auto query = ParseQuery(QueryOf(request.target));
  if (!query) return Errc::kBadEncoding;
  auto authorization = Find(request.headers, "authorization");
  bool presigned = FindParam(*query, "X-Amz-Signature") != nullptr ||
                   FindParam(*query, "X-Amz-Algorithm") != nullptr;
  if (authorization.empty() && !presigned) return Errc::kNotSigned;
  if (authorization.size() > 1 || (!authorization.empty() && presigned)) {
    return Errc::kMalformed;
  }
  if (presigned) {
    if (auto ec = ParsePresigned(*query, claim)) return ec;
    return CheckDate(claim);
  }
  if (auto ec = ParseAuthorization(authorization.front()->value, claim)) {
    return ec;
  }
  auto date = Find(request.headers, "x-amz-date");
  if (date.size() != 1) return Errc::kBadDate;
  claim->amz_date = std::string(TrimSpaces(date.front()->value));
  return CheckDate(claim);
}

std::error_code ExpectedSignature(const Received& received, const Claim& claim,
                                  const Secret& secret_access_key,
                                  Signed* expected) {
  auto path = codec::PercentDecode(PathOf(received.target),
                                   codec::PercentMode::kStrict);
  auto query = ParseQuery(QueryOf(received.target));
  if (!path || !query) return Errc::kBadEncoding;
  Request request{std::string(received.method),
                  std::move(*path),
                  PathStyle::kS3,
                  {},
                  {},
                  {}};
  for (QueryParam& p : *query) {
    if (!(claim.presigned && p.name == "X-Amz-Signature")) {
      request.query.push_back(std::move(p));
    }
  }
  for (const std::string& name : claim.signed_headers) {
    auto found = Find(received.headers, name);
    if (found.empty()) return Errc::kMissingSignedHeader;
    for (const Header* h : found) request.headers.push_back(*h);
  }
  if (claim.presigned) {
    request.payload_hash = std::string(kUnsignedPayload);
  } else {
    auto hash = Find(received.headers, "x-amz-content-sha256");
    if (hash.size() != 1) return Errc::kMissingContentSha256;
    request.payload_hash = std::string(TrimSpaces(hash.front()->value));
  }
  *expected =
      SignCanonical(request, claim.amz_date, claim.scope, secret_access_key);
  return {};
}

std::error_code CheckTime(const Claim& claim,
                          std::chrono::system_clock::time_point now,
                          std::chrono::seconds max_skew) {
  auto signed_at = ParseAmzDate(claim.amz_date);
  if (!signed_at) return Errc::kBadDate;
  if (*signed_at > now + max_skew) return Errc::kTimeTooSkewed;
  if (claim.presigned) {
    return now > *signed_at + claim.expires ? Errc::kExpired
                                            : std::error_code();
  }
  return *signed_at < now - max_skew ? Errc::kTimeTooSkewed : std::error_code();
}

}  // namespace fencepost::sigv4
