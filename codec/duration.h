#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace fencepost::codec {

// A duration written as decimal digits and a unit: "500ms", "10s", "2m",
// "1h". nullopt for anything else (no sign, no fraction, no space, no
// missing unit) or a value past about 292 million years. The server's
// flags and the client's read durations alike through it.
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text);

// `d` in the largest unit that writes it exactly: "500ms", "10s", "2m".
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace fencepost::codec
