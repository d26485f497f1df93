#include "proxy/s3_auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "http/fields.h"
#include "s3/object_fields.h"
#include "sigv4/body_check.h"
#include "sigv4/canonical.h"
#include "sigv4/checksum.h"
#include "sigv4/chunked.h"
#include "sigv4/crypto.h"
#include "sigv4/errc.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;

namespace {

using fencepost::http::AsciiLower;

// The S3 error of a verifier's or decoder's error code.
std::pair<unsigned, std::string> S3CodeOf(std::error_code e) {
  using sigv4::Errc;
  if (e == Errc::kNotSigned) return {403, "AccessDenied"};
  if (e == Errc::kTimeTooSkewed) return {403, "RequestTimeTooSkewed"};
  if (e == Errc::kExpired) return {403, "AccessDenied"};
  if (e == Errc::kChunkSignatureMismatch) return {403, "SignatureDoesNotMatch"};
  if (e == Errc::kChecksumMismatch) return {400, "BadDigest"};
  if (e == Errc::kIncompleteBody || e == Errc::kLengthMismatch) {
    return {400, "IncompleteBody"};
  }
  if (e == Errc::kBadTrailer || e == Errc::kMissingChecksum) {
    return {400, "MalformedTrailerError"};
  }
  if (e == Errc::kMalformed || e == Errc::kUnsupportedAlgorithm ||
      e == Errc::kBadDate || e == Errc::kHostNotSigned) {
    return {400, "AuthorizationHeaderMalformed"};
  }
  return {400, "InvalidArgument"};
}

// The first field the door acts on (the token's, the preconditions') or
// the object keeps (x-amz-meta-*) that the signature leaves out,
// lower-case; "" when each one present is signed. A replayed or relayed
// request could otherwise be given any token or metadata: S3 refuses
// unsigned x-amz-* fields alike.
std::string UnsignedField(const Request& request, const sigv4::Claim& claim) {
  static constexpr std::string_view kMustBeSigned[] = {
      "fencing-token", "if-match", "if-none-match"};
  for (const auto& field : request) {
    const std::string name = AsciiLower(field.name_string());
    // The object keeps its metadata and the fields S3 keeps with it: none
    // of them is a relay's to add.
    const bool kept =
        request.method() == http::verb::put && s3::KeptWithObject(name);
    if ((name.rfind("x-amz-meta-", 0) == 0 || kept ||
         std::find(std::begin(kMustBeSigned), std::end(kMustBeSigned), name) !=
             std::end(kMustBeSigned)) &&
        std::find(claim.signed_headers.begin(), claim.signed_headers.end(),
                  name) == claim.signed_headers.end()) {
      return name;
    }
  }
  return "";
}

}  // namespace

namespace {

// The keys let whoever reads them write as fencepost's clients: a file
// others may read or change is refused, as ssh refuses such a private key
// and PostgreSQL such a key file (0600, or 0640 when root owns it), and so
// is one owned by another user than this process's or root. Judged on the
// open file, so what is read is what was judged.
std::string ReadPrivate(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot read " + path);
  struct stat st;
  std::string error;
  if (::fstat(fd, &st) != 0) {
    error = "cannot read " + path;
  } else if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    error = path + " belongs to another user (uid " +
            std::to_string(st.st_uid) +
            "), who could change the keys; chown it to this user or root";
  } else if ((st.st_mode & 0777 & ~(st.st_uid == 0 ? 0640 : 0600)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 0777);
    error = path + " is open to others (mode " + mode +
            "): whoever reads it can sign as fencepost's clients; chmod 600 " +
            path + " (or 640 with root as its owner)";
  }
  // A keys file is a few lines: 1 MiB bounds what is read.
  constexpr std::size_t kMaxFile = 1 << 20;
  std::string content;
  char chunk[4096];
  while (error.empty()) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) error = "cannot read " + path;
    if (n <= 0) break;
    content.append(chunk, static_cast<std::size_t>(n));
    if (content.size() > kMaxFile) error = path + " is over 1 MiB";
  }
  ::close(fd);
  if (!error.empty()) throw std::runtime_error(error);
  return content;
}

// Whether a PUT's or POST's body is one its signature does not cover
// (UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, presigned): on
// plain HTTP a relay could swap it under the sender's token, and a POST's
// body names what it changes (DeleteObjects' keys).
bool BodyUncovered(const Request& request, const sigv4::Claim& claim) {
  const std::string_view payload = request["x-amz-content-sha256"];
  return (claim.presigned || payload == sigv4::kUnsignedPayload ||
          payload == sigv4::kStreamingUnsignedTrailer) &&
         (request.method() == http::verb::put ||
          request.method() == http::verb::post);
}

}  // namespace

std::map<std::string, sigv4::Secret> S3Auth::LoadClients(
    const std::string& path) {
  std::istringstream in(ReadPrivate(path));
  std::map<std::string, sigv4::Secret> clients;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    // A UTF-8 byte order mark (some editors write one) is no part of the
    // first key id.
    if (number == 1 && line.rfind("\xef\xbb\xbf", 0) == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    std::istringstream fields(line);
    std::string id, secret, extra;
    fields >> id >> secret;
    const std::string where = path + " line " + std::to_string(number);
    if (id.empty() || secret.empty() || (fields >> extra)) {
      throw std::runtime_error(where +
                               ": expected ACCESS_KEY_ID SECRET (two fields)");
    }
    if (!clients.emplace(id, sigv4::Secret(secret)).second) {
      throw std::runtime_error(where + ": access key id " + id +
                               " given twice");
    }
  }
  if (clients.empty()) throw std::runtime_error(path + " holds no client key");
  return clients;
}

S3Auth::Admitted S3Auth::Admit(const Request& request,
                               std::uint64_t max_body) const {
  Admitted out;
  const auto refuse = [&out](unsigned status, std::string code,
                             std::string message) {
    out.refusal = Refusal{status, std::move(code), std::move(message)};
    return std::move(out);
  };
  std::vector<sigv4::Header> headers;
  for (const auto& field : request) {
    headers.push_back(
        {std::string(field.name_string()), std::string(field.value())});
  }
  const sigv4::Received received{request.method_string(), request.target(),
                                 headers};
  sigv4::Claim claim;
  if (const std::error_code e = sigv4::ParseClaim(received, &claim)) {
    auto [status, code] = S3CodeOf(e);
    return refuse(status, code,
                  e == sigv4::Errc::kNotSigned
                      ? "requests must be signed (SigV4) with a key of "
                        "--s3-client-credentials"
                      : e.message());
  }
  if (claim.scope.service != "s3" || claim.scope.region != options_.region) {
    return refuse(400, "AuthorizationHeaderMalformed",
                  "the credential scope must be for service s3 in region " +
                      options_.region);
  }
  const auto client = options_.clients.find(claim.access_key_id);
  if (client == options_.clients.end()) {
    return refuse(403, "InvalidAccessKeyId",
                  "the access key id is not one of fencepost's clients");
  }
  if (const std::error_code e = sigv4::CheckTime(
          claim, std::chrono::system_clock::now(), options_.max_skew)) {
    auto [status, code] = S3CodeOf(e);
    // S3's own words for a presigned URL past its X-Amz-Expires, which
    // SDKs and users search for.
    return refuse(
        status, code,
        e == sigv4::Errc::kExpired ? "Request has expired" : e.message());
  }
  sigv4::Signed expected;
  if (const std::error_code e = sigv4::ExpectedSignature(
          received, claim, client->second, &expected)) {
    return refuse(e == sigv4::Errc::kMissingContentSha256 ? 400 : 403,
                  e == sigv4::Errc::kMissingContentSha256
                      ? "InvalidRequest"
                      : "SignatureDoesNotMatch",
                  e.message());
  }
  if (!sigv4::ConstantTimeEqual(expected.signature, claim.signature)) {
    return refuse(403, "SignatureDoesNotMatch",
                  "the request signature does not match the one computed "
                  "with the key's secret");
  }
  if (const std::string field = UnsignedField(request, claim); !field.empty()) {
    return refuse(403, "AccessDenied",
                  "There were headers present in the request which were not "
                  "signed: " +
                      field);
  }
  if (BodyUncovered(request, claim) && !options_.unsigned_payloads) {
    // As S3 answers a bucket policy that denies requests without TLS.
    return refuse(
        403, "AccessDenied",
        "on plain HTTP a PUT's or POST's body must be covered by its "
        "signature (x-amz-content-sha256 the body's SHA-256, or signed "
        "aws-chunked chunks): UNSIGNED-PAYLOAD, "
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER and presigned PUTs and POSTs "
        "need the door on TLS (--tls-cert) or --s3-allow-unsigned-payload");
  }
  ExpectBody(request, claim, client->second, std::move(headers), max_body,
             &out);
  return out;
}

void S3Auth::ExpectBody(const Request& request, const sigv4::Claim& claim,
                        const sigv4::Secret& secret,
                        std::vector<sigv4::Header> headers,
                        std::uint64_t max_body, Admitted* out) const {
  out->expect =
      Expect(request, claim, secret, std::move(headers), &out->decoded_length);
  if (!out->expect) {
    out->refusal = Refusal{400, "InvalidArgument",
                           "x-amz-decoded-content-length is not a length"};
    return;
  }
  if (out->decoded_length && *out->decoded_length > max_body) {
    out->expect.reset();
    out->refusal =
        Refusal{413, "EntityTooLarge",
                "the object is larger than " +
                    std::string(max_body == options_.max_body ? "--max-body"
                                                              : "5 GiB")};
    return;
  }
  if (const std::error_code e = sigv4::BodyCheck(*out->expect).error()) {
    out->expect.reset();
    out->refusal = BodyRefusal(e);
  }
}

std::optional<sigv4::BodyExpect> S3Auth::Expect(
    const Request& request, const sigv4::Claim& claim,
    const sigv4::Secret& secret, std::vector<sigv4::Header> headers,
    std::optional<std::uint64_t>* decoded) const {
  sigv4::BodyExpect expect;
  expect.content_sha256 = request["x-amz-content-sha256"];
  expect.presigned = claim.presigned;
  if (const auto kind = sigv4::StreamingPayloadKind(expect.content_sha256)) {
    sigv4::ChunkedCheck& check = expect.chunked;
    check.kind = *kind;
    check.signing_key = sigv4::SigningKey(secret, claim.scope);
    check.amz_date = claim.amz_date;
    check.scope = claim.scope;
    check.seed_signature = claim.signature;
    check.trailer_header = request["x-amz-trailer"];
    const std::string length(request["x-amz-decoded-content-length"]);
    if (!length.empty()) {
      if (length.size() > 19 ||
          length.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;  // *decoded unset: not a length
      }
      check.decoded_length = std::stoull(length);
      *decoded = check.decoded_length;
    }
  }
  expect.headers = std::move(headers);
  return expect;
}

S3Auth::Refusal S3Auth::BodyRefusal(std::error_code e) {
  using sigv4::Errc;
  if (e == Errc::kPayloadHashMismatch) {
    return {400, "XAmzContentSHA256Mismatch",
            "x-amz-content-sha256 is not the body's SHA-256"};
  }
  if (e == Errc::kUnsupportedPayload) {
    return {400, "InvalidArgument",
            "x-amz-content-sha256 is not a SHA-256, UNSIGNED-PAYLOAD or an "
            "aws-chunked form fencepost decodes"};
  }
  if (e == Errc::kChecksumMismatch) {
    return {400, "BadDigest",
            "the body is not what its Content-MD5 or checksum says"};
  }
  if (e == Errc::kMalformed) {  // of a body: its Content-MD5
    return {400, "InvalidDigest", "The Content-MD5 you specified is not valid"};
  }
  auto [status, code] = S3CodeOf(e);
  return {status, std::move(code), e.message()};
}

S3Auth::Verified S3Auth::Authenticate(const Request& request) const {
  Verified out;
  Admitted admitted = Admit(request, options_.max_body);
  if (admitted.refusal) {
    out.refusal = std::move(admitted.refusal);
    return out;
  }
  // The whole body, through the check a streamed one passes as it arrives.
  sigv4::BodyCheck check(std::move(*admitted.expect));
  std::error_code e = check.Feed(request.body(), &out.body);
  if (!e) e = check.Finish();
  if (e) {
    out.body.clear();
    out.refusal = BodyRefusal(e);
  }
  return out;
}

}  // namespace fencepost::proxy
