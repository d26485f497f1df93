#include "sigv4/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstdlib>

#include "codec/hex.h"

namespace fencepost::sigv4 {
namespace {

// Fetched once: an implicit fetch per call costs a lookup in OpenSSL's
// method store, and a request signs with five HMACs and two hashes.
const EVP_MD* Sha256Md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (md == nullptr) std::abort();
  return md;
}

EVP_MAC* HmacMac() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) std::abort();
  return mac;
}

void Check(int ok) {
  if (ok != 1) std::abort();
}

}  // namespace

std::string HexSha256(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  Check(EVP_Digest(data.data(), data.size(), md, &size, Sha256Md(), nullptr));
  return codec::HexOf({reinterpret_cast<const char*>(md), size});
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(
      EVP_MAC_CTX_new(HmacMac()), &EVP_MAC_CTX_free);
  if (ctx == nullptr) std::abort();
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  // EVP_MAC_init refuses a null key even when it is empty.
  static constexpr unsigned char kNoKey[1] = {0};
  const auto* key_bytes =
      key.empty() ? kNoKey : reinterpret_cast<const unsigned char*>(key.data());
  Check(EVP_MAC_init(ctx.get(), key_bytes, key.size(), params));
  Check(EVP_MAC_update(ctx.get(),
                       reinterpret_cast<const unsigned char*>(data.data()),
                       data.size()));
  std::string out(EVP_MAX_MD_SIZE, '\0');
  size_t size = 0;
  Check(EVP_MAC_final(ctx.get(), reinterpret_cast<unsigned char*>(out.data()),
                      &size, out.size()));
  out.resize(size);
  return out;
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void Sha256::Free::operator()(evp_md_ctx_st* ctx) const {
  EVP_MD_CTX_free(ctx);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) std::abort();
  Check(EVP_DigestInit_ex2(ctx_.get(), Sha256Md(), nullptr));
}

void Sha256::Update(std::string_view data) {
  Check(EVP_DigestUpdate(ctx_.get(), data.data(), data.size()));
}

std::string Sha256::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  Check(EVP_DigestFinal_ex(ctx_.get(), md, &size));
  Check(EVP_DigestInit_ex2(ctx_.get(), Sha256Md(), nullptr));
  return codec::HexOf({reinterpret_cast<const char*>(md), size});
}

}  // namespace fencepost::sigv4
