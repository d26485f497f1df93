// libFuzzer target: key decoding and validation. A key that decodes is 1 to
// 1024 bytes of valid UTF-8 with no NUL, no empty and no dot segment, and
// validates on its own.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "codec/utf8.h"
#include "fence/key.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  using fencepost::fence::KeyError;
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  std::string key;
  if (fencepost::fence::DecodeKey(target, &key) != KeyError::kOk) return 0;
  if (key.empty() || key.size() > fencepost::fence::kMaxNameBytes) std::abort();
  if (!fencepost::codec::IsValidUtf8(key)) std::abort();
  if (key.find('\0') != std::string::npos) std::abort();
  if (key.front() == '/' || key.back() == '/' ||
      key.find("//") != std::string::npos) {
    std::abort();
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = key.find('/', start);
    const std::string_view segment = std::string_view(key).substr(
        start, slash == std::string::npos ? slash : slash - start);
    if (segment == "." || segment == "..") std::abort();
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (fencepost::fence::ValidateKey(key) != KeyError::kOk) std::abort();
  return 0;
}
