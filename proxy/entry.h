#pragma once

#include "proxy/test_switches.h"

namespace fencepost::proxy {

// The whole binary: a client command (`lease`, `fence`, `batch`) or the
// server. Returns the process's exit status.
int Main(int argc, char** argv, const TestSwitches& test);

}  // namespace fencepost::proxy
