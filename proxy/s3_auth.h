#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proxy/http_types.h"
#include "sigv4/body_check.h"
#include "sigv4/secret.h"
#include "sigv4/verifier.h"

namespace fencepost::proxy {

// Who may speak through the S3 front door (SPEC "S3 front door"): every
// request signed with SigV4, in its header or presigned, by one of
// fencepost's own clients (--s3-client-credentials; the store's credentials
// are never handed out). The payload hash is checked against the body,
// aws-chunked bodies are decoded with every chunk signature and checksum
// checked, Content-MD5 is checked, and a clock more than max_skew off is
// refused. The fields the door acts on (Fencing-Token, If-Match,
// If-None-Match), user metadata (x-amz-meta-*) and, on a PUT, the fields
// an object keeps must be among the signed ones, as S3 wants of every
// x-amz-* field. A PUT or POST (DeleteObjects) whose body the signature
// does not cover is taken only where Options::unsigned_payloads says.
//
// Thread safety: const calls from any thread.
class S3Auth {
 public:
  struct Options {
    std::string region;  // requests must be signed for it
    // Access key id -> secret of fencepost's clients.
    std::map<std::string, sigv4::Secret> clients;
    std::chrono::seconds max_skew{15 * 60};
    std::uint64_t max_body = 4194304;  // --max-body, of the decoded body
    // Whether a PUT or POST may carry a body its signature does not cover
    // (UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, presigned):
    // over TLS, or with --s3-allow-unsigned-payload. Else 403 AccessDenied,
    // for on plain HTTP a relay could swap such a body under the sender's
    // token.
    bool unsigned_payloads = false;
  };

  // Why a request is refused, in S3's terms.
  struct Refusal {
    unsigned status = 400;
    std::string code;
    std::string message;
  };
  // The body to use (decoded), or why not.
  struct Verified {
    std::optional<Refusal> refusal;
    std::string body;
  };
  // A request whose signature and fields hold: what its body must pass
  // (sigv4::BodyCheck), or why it is refused.
  struct Admitted {
    std::optional<Refusal> refusal;
    std::optional<sigv4::BodyExpect> expect;  // set unless refused
    // An aws-chunked body's x-amz-decoded-content-length, when sent.
    std::optional<std::uint64_t> decoded_length;
  };

  explicit S3Auth(Options options) : options_(std::move(options)) {}

  const Options& options() const { return options_; }

  // The request's signature and fields checked, not its body (one that is
  // streamed): an aws-chunked body whose decoded length is over `max_body`
  // is refused (413 EntityTooLarge).
  Admitted Admit(const Request& request, std::uint64_t max_body) const;
  // Admit, then the whole body (Options::max_body at most) checked and
  // decoded.
  Verified Authenticate(const Request& request) const;
  // A body's check error (sigv4::BodyCheck) in S3's terms.
  static Refusal BodyRefusal(std::error_code error);

  // --s3-client-credentials FILE: "ACCESS_KEY_ID SECRET" per line (blank
  // lines and '#' comments skipped, a UTF-8 byte order mark ignored).
  // Throws std::runtime_error naming the file and line, never a secret,
  // when it cannot be read, others may read or change it (a mode other
  // than 0600, or 0640 when root owns it), a line is malformed, an id is
  // repeated or there is none.
  static std::map<std::string, sigv4::Secret> LoadClients(
      const std::string& path);

 private:
  // Admit's last step: what the body must pass, into `out` (or its
  // refusal).
  void ExpectBody(const Request& request, const sigv4::Claim& claim,
                  const sigv4::Secret& secret,
                  std::vector<sigv4::Header> headers, std::uint64_t max_body,
                  Admitted* out) const;
  // What the body of a request whose signature holds must pass; nullopt
  // when its x-amz-decoded-content-length is not a length. `*decoded`: that
  // length, when sent.
  std::optional<sigv4::BodyExpect> Expect(
      const Request& request, const sigv4::Claim& claim,
      const sigv4::Secret& secret, std::vector<sigv4::Header> headers,
      std::optional<std::uint64_t>* decoded) const;

  Options options_;
};

}  // namespace fencepost::proxy
