#pragma once

#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace fencepost::sigv4 {

// SHA-256 and HMAC-SHA256 as SigV4 uses them, through OpenSSL 3's EVP API.
// A failure inside OpenSSL (out of memory) is a bug here: it aborts.

// Lower-case hex of the SHA-256 of `data` (a payload hash, the hash of a
// canonical request).
std::string HexSha256(std::string_view data);

// The raw 32 bytes of HMAC-SHA256(key, data).
std::string HmacSha256(std::string_view key, std::string_view data);

// True when `a` equals `b`, in a time that depends on their lengths only
// (comparing a received signature with the expected one).
bool ConstantTimeEqual(std::string_view a, std::string_view b);

// The SHA-256 of data that arrives in pieces (a request body checked against
// x-amz-content-sha256). Not thread-safe.
class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  // Lower-case hex of everything updated so far; the object starts over.
  std::string HexDigest();

 private:
  struct Free {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> ctx_;
};

}  // namespace fencepost::sigv4
