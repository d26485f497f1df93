#pragma once

#include <cstdint>

namespace fencepost::fence {

// Fixed-width big-endian integers in record layouts, so that LMDB's byte
// order is numeric order.
inline std::uint64_t LoadBigEndian(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

inline void StoreBigEndian(char* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) {
    p[i] = static_cast<char>(v & 0xff);
  }
}

}  // namespace fencepost::fence
