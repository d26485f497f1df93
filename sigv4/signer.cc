#include "sigv4/signer.h"

#include <cstdio>
#include <utility>

#include "codec/hex.h"
#include "sigv4/crypto.h"

namespace fencepost::sigv4 {
namespace {

constexpr std::string_view kChunkSignatureKey = ";chunk-signature=";
constexpr size_t kSignatureHexSize = 64;

bool Digits(std::string_view s) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

int Number(std::string_view digits) {
  int n = 0;
  for (char c : digits) n = n * 10 + (c - '0');
  return n;
}

std::string Credential(std::string_view access_key_id, const Scope& scope) {
  std::string out(access_key_id);
  out.append("/").append(ScopeString(scope));
  return out;
}

size_t HexDigits(std::uint64_t n) {
  size_t digits = 1;
  while (n >>= 4) ++digits;
  return digits;
}

}  // namespace

std::string ScopeString(const Scope& scope) {
  std::string out = scope.date;
  out.append("/").append(scope.region).append("/").append(scope.service);
  out.append("/aws4_request");
  return out;
}

std::string FormatAmzDate(std::chrono::system_clock::time_point time) {
  using namespace std::chrono;
  auto day = floor<days>(time);
  year_month_day ymd{day};
  hh_mm_ss hms{floor<seconds>(time - day)};
  char out[32];
  std::snprintf(out, sizeof out, "%04d%02u%02uT%02d%02d%02dZ", int(ymd.year()),
                unsigned(ymd.month()), unsigned(ymd.day()),
                int(hms.hours().count()), int(hms.minutes().count()),
                int(hms.seconds().count()));
  return out;
}

std::optional<std::chrono::system_clock::time_point> ParseAmzDate(
    std::string_view s) {
  using namespace std::chrono;
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z' ||
      !Digits(s.substr(0, 8)) || !Digits(s.substr(9, 6))) {
    return std::nullopt;
  }
  year_month_day ymd{year(Number(s.substr(0, 4))),
                     month(unsigned(Number(s.substr(4, 2)))),
                     day(unsigned(Number(s.substr(6, 2))))};
  int h = Number(s.substr(9, 2));
  int m = Number(s.substr(11, 2));
  int sec = Number(s.substr(13, 2));
  if (!ymd.ok() || h > 23 || m > 59 || sec > 59) return std::nullopt;
  return sys_days(ymd) + hours(h) + minutes(m) + seconds(sec);
}

std::string StringToSign(std::string_view amz_date, const Scope& scope,
                         std::string_view canonical_request) {
  std::string out(kAlgorithm);
  out.append("\n").append(amz_date).append("\n");
  out.append(ScopeString(scope)).append("\n");
  out.append(HexSha256(canonical_request));
  return out;
}

Secret SigningKey(const Secret& secret_access_key, const Scope& scope) {
  Secret k_secret("AWS4" + std::string(secret_access_key.Reveal()));
  Secret k_date(HmacSha256(k_secret.Reveal(), scope.date));
  Secret k_region(HmacSha256(k_date.Reveal(), scope.region));
  Secret k_service(HmacSha256(k_region.Reveal(), scope.service));
  return Secret(HmacSha256(k_service.Reveal(), "aws4_request"));
}

std::string Signature(const Secret& signing_key,
                      std::string_view string_to_sign) {
  return codec::HexOf(HmacSha256(signing_key.Reveal(), string_to_sign));
}

std::string AuthorizationValue(std::string_view access_key_id,
                               const Scope& scope,
                               std::string_view signed_headers,
                               std::string_view signature) {
  std::string out(kAlgorithm);
  out.append(" Credential=").append(Credential(access_key_id, scope));
  out.append(", SignedHeaders=").append(signed_headers);
  out.append(", Signature=").append(signature);
  return out;
}

Signed SignCanonical(const Request& request, std::string_view amz_date,
                     const Scope& scope, const Secret& secret_access_key) {
  CanonicalRequest canonical = Canonicalize(request);
  Signed out;
  out.string_to_sign = StringToSign(amz_date, scope, canonical.text);
  out.signature =
      Signature(SigningKey(secret_access_key, scope), out.string_to_sign);
  out.canonical_request = std::move(canonical.text);
  out.signed_headers = std::move(canonical.signed_headers);
  return out;
}

Signed SignRequest(Request& request, const Credentials& credentials,
                   const SigningParams& params) {
  std::string amz_date = FormatAmzDate(params.time);
  Scope scope{amz_date.substr(0, 8), params.region, params.service};
  request.headers.push_back({"x-amz-date", amz_date});
  if (params.content_sha256_header) {
    request.headers.push_back({"x-amz-content-sha256", request.payload_hash});
  }
  Header token{"x-amz-security-token",
               std::string(credentials.session_token.Reveal())};
  bool has_token = !credentials.session_token.empty();
  if (has_token && params.sign_session_token) request.headers.push_back(token);
  Signed out =
      SignCanonical(request, amz_date, scope, credentials.secret_access_key);
  if (has_token && !params.sign_session_token) request.headers.push_back(token);
  request.headers.push_back(
      {"Authorization", AuthorizationValue(credentials.access_key_id, scope,
                                           out.signed_headers, out.signature)});
  return out;
}

Presigned Presign(const Request& request, const Credentials& credentials,
                  const SigningParams& params, std::chrono::seconds expires) {
  std::string amz_date = FormatAmzDate(params.time);
  Scope scope{amz_date.substr(0, 8), params.region, params.service};
  Request presigned = request;
  if (presigned.payload_hash.empty()) {
    presigned.payload_hash = std::string(kUnsignedPayload);
  }
  CanonicalHeaders headers = CanonicalizeHeaders(request.headers);
  std::vector<QueryParam>& query = presigned.query;
  query.push_back({"X-Amz-Algorithm", std::string(kAlgorithm)});
  query.push_back(
      {"X-Amz-Credential", Credential(credentials.access_key_id, scope)});
  query.push_back({"X-Amz-Date", amz_date});
  query.push_back({"X-Amz-Expires", std::to_string(expires.count())});
  query.push_back({"X-Amz-SignedHeaders", headers.signed_headers});
  if (!credentials.session_token.empty()) {
    query.push_back({"X-Amz-Security-Token",
                     std::string(credentials.session_token.Reveal())});
  }
  Presigned out;
  out.steps =
      SignCanonical(presigned, amz_date, scope, credentials.secret_access_key);
  out.query = CanonicalQuery(query);
  out.query.append("&X-Amz-Signature=").append(out.steps.signature);
  return out;
}

std::string ChunkStringToSign(std::string_view amz_date, const Scope& scope,
                              std::string_view previous_signature,
                              std::string_view chunk_hash) {
  std::string out(kChunkAlgorithm);
  out.append("\n").append(amz_date).append("\n");
  out.append(ScopeString(scope)).append("\n");
  out.append(previous_signature).append("\n");
  out.append(kEmptyPayloadHash).append("\n");
  out.append(chunk_hash);
  return out;
}

ChunkSigner::ChunkSigner(Secret signing_key, std::string amz_date, Scope scope,
                         std::string seed_signature)
    : signing_key_(std::move(signing_key)),
      amz_date_(std::move(amz_date)),
      scope_(std::move(scope)),
      previous_(std::move(seed_signature)) {}

std::string ChunkSigner::Next(std::string_view data) {
  return NextOfHash(HexSha256(data));
}

std::string ChunkSigner::NextOfHash(std::string_view chunk_hash) {
  previous_ = Signature(signing_key_, ChunkStringToSign(amz_date_, scope_,
                                                        previous_, chunk_hash));
  return previous_;
}

std::string ChunkHeader(std::uint64_t size, std::string_view signature) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(size));
  std::string out(hex);
  out.append(kChunkSignatureKey).append(signature).append("\r\n");
  return out;
}

std::uint64_t ChunkedContentLength(std::uint64_t decoded_length,
                                   std::uint64_t chunk_size) {
  auto framed = [](std::uint64_t size) {
    return HexDigits(size) + kChunkSignatureKey.size() + kSignatureHexSize + 2 +
           size + 2;
  };
  std::uint64_t total = framed(0);
  if (chunk_size == 0) return total;
  std::uint64_t full = decoded_length / chunk_size;
  total += full * framed(chunk_size);
  if (std::uint64_t rest = decoded_length % chunk_size) total += framed(rest);
  return total;
}

}  // namespace fencepost::sigv4
