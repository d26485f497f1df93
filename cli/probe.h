#pragma once

#include "cli/flags.h"

namespace fencepost::cli {

// `fencepost probe URL [--token N]`: whether the HTTP store at URL
// (http:// or https://, with an optional base path) honours If-Match and
// If-None-Match (SPEC "Conditional writes"). Under a scratch key
// fencepost-probe-<16 hex> below URL it writes a value and reads it back,
// then sends a PUT with a wrong If-Match, a PUT with If-None-Match: * over
// the value and a DELETE with a wrong If-Match; each holds when it is
// answered 412 and a GET after it finds the value as it was (it is written
// again for the next check when it was not). It removes the scratch key
// and prints a verdict per check, then one for the store. With --token N
// every write carries Fencing-Token N; --auth-token-file and --tls-ca are
// used as by the other commands. Every request ends within 10 s and its
// answer is read up to 1 MiB.
//
// Exit 0 when every check holds; 1 when one does not, the first write is
// refused (4xx) or the value does not read back; 3 when the store is
// unreachable, times out or answers 5xx; UsageError (2) for a bad URL.
int Probe(const Flags& flags);

}  // namespace fencepost::cli
