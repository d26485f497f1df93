#include "sigv4/secret.h"

#include <openssl/crypto.h>

#include <ostream>

namespace fencepost::sigv4 {
namespace {

// Overwrites every byte the string owns, its spare capacity included (a
// shorter secret assigned over a longer one leaves the tail there).
void Wipe(std::string& s) {
  s.resize(s.capacity());
  OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

}  // namespace

Secret& Secret::operator=(const Secret& other) {
  if (this != &other) {
    Wipe(value_);
    value_ = other.value_;
  }
  return *this;
}

Secret::Secret(Secret&& other) noexcept : value_(other.value_) {
  Wipe(other.value_);
}

Secret& Secret::operator=(Secret&& other) noexcept {
  if (this != &other) {
    Wipe(value_);
    value_ = other.value_;
    Wipe(other.value_);
  }
  return *this;
}

Secret::~Secret() { Wipe(value_); }

void PrintTo(const Secret&, std::ostream* os) { *os << "Secret(redacted)"; }

}  // namespace fencepost::sigv4
