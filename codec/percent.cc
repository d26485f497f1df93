#include "codec/percent.h"

namespace fencepost::codec {

std::optional<std::string> PercentDecode(std::string_view in,
                                         PercentMode mode) {
  const bool lenient = mode == PercentMode::kLenientQuery;
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '+' && lenient) {
      out.push_back(' ');
      continue;
    }
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    const int hi = i + 2 < in.size() ? HexDigitValue(in[i + 1]) : -1;
    const int lo = i + 2 < in.size() ? HexDigitValue(in[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      if (!lenient) return std::nullopt;
      out.push_back(c);
      continue;
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace fencepost::codec
