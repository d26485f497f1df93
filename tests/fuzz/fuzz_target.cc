// libFuzzer target: request target -> fenced key -> upstream path. For every
// target DecodeKey accepts, the path the http:// backend sends upstream
// (fence::UpstreamTarget, the function it calls: BASE, '/', EncodeKey(key),
// the query) names exactly the fenced key to a store that reads paths the
// usual way (query and fragment cut, percent-decoded once, dot segments
// resolved, slashes merged), and decodes back to it; a refused target never
// has a key.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fence/key.h"

namespace {

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// What a store like nginx names the resource of `target`.
std::string StoreView(std::string_view target) {
  target = target.substr(0, target.find_first_of("?#"));
  std::string decoded;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%' && i + 2 < target.size() && Hex(target[i + 1]) >= 0 &&
        Hex(target[i + 2]) >= 0) {
      decoded.push_back(
          static_cast<char>(Hex(target[i + 1]) * 16 + Hex(target[i + 2])));
      i += 2;
    } else {
      decoded.push_back(target[i]);
    }
  }
  std::vector<std::string_view> segments;
  std::string_view rest = decoded;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
      continue;
    }
    segments.push_back(segment);
  }
  std::string out;
  for (const auto segment : segments) {
    out += '/';
    out += segment;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  using fencepost::fence::DecodeKey;
  using fencepost::fence::EncodeKey;
  using fencepost::fence::KeyError;
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  std::string key;
  if (DecodeKey(target, &key) != KeyError::kOk) return 0;
  if (target.front() != '/' || target.find('#') != std::string_view::npos) {
    std::abort();
  }
  const std::string path = EncodeKey(key);
  for (const char c : path) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                       c == '_' || c == '~' || c == '/' || c == '%';
    if (!plain) std::abort();
  }
  std::string again;
  if (DecodeKey("/" + path, &again) != KeyError::kOk || again != key) {
    std::abort();
  }
  for (const std::string base : {"", "/store"}) {
    const std::string upstream =
        fencepost::fence::UpstreamTarget(base, key, target);
    if (StoreView(upstream) != base + "/" + key) std::abort();
  }
  return 0;
}
