#pragma once

// The one upper bound on time the tests keep. Speed is the benchmarks'
// business (tests/bench): on a loaded machine, or under a sanitizer, any
// step may take many times its usual time, so no test asserts how fast
// something was. What a test may assert is that a call given a timeout, or
// a stop that must come, came at all: not within kNoHang more means it
// hangs (waits on the kernel's TCP timeouts, on a frozen peer, forever).

#include <chrono>

namespace fencepost::testing {

inline constexpr std::chrono::seconds kNoHang{10};

}  // namespace fencepost::testing
