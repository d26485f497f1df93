#pragma once

#include "cli/flags.h"

namespace fencepost::cli {

// `fencepost probe URL [--token N]`: whether the HTTP store at URL honours
// If-Match and If-None-Match (SPEC "Conditional writes"). Under a scratch
// key below URL it writes a value, then sends a PUT with a wrong If-Match,
// a PUT with If-None-Match: * over the value and a DELETE with a wrong
// If-Match; each holds when it is answered 412 and the value is as it was
// (it is put back for the next check when it was not). It removes the
// scratch key and prints a verdict per check. Exit 0 when every check
// holds, 1 when one does not (or the store refused the first write), 3
// when the store is unreachable or answers 5xx, 2 for a bad URL.
int Probe(const Flags& flags);

}  // namespace fencepost::cli
