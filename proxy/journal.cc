#include "proxy/journal.h"

#include <openssl/sha.h>

namespace fencepost::proxy {

void Journal::Add(Rejection rejection) {
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(rejection));
  while (entries_.size() > capacity_) entries_.pop_front();
}

std::vector<Rejection> Journal::Recent(std::size_t limit) const {
  std::lock_guard lock(mu_);
  std::vector<Rejection> out;
  for (auto it = entries_.rbegin(); it != entries_.rend() && out.size() < limit;
       ++it) {
    out.push_back(*it);
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace fencepost::proxy
