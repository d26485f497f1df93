#include "client/duration.h"

#include "codec/duration.h"

namespace fencepost::client {

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  return codec::ParseDuration(text);
}

std::string FormatDuration(std::chrono::milliseconds d) {
  return codec::FormatDuration(d);
}

}  // namespace fencepost::client
