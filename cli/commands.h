#pragma once

namespace fencepost::cli {

// The client commands of SPEC "Client commands": argv[1] is "lease",
// "fence", "batch", "probe", "watch" or "effect" (`fencepost lease
// acquire|release|get|run ...`, `fencepost fence get|bump ...`, `fencepost
// batch --token N [FILE]`, `fencepost effect NAME[/REST] ...`). They
// use only the client libraries (fencepost::client and the electors').
// Returns the exit status: 0 success, 1 refused (lease held, stale token,
// not held, not found, unauthorized), 2 usage error (message on stderr) or
// a request the server calls bad (400; 405 for a batch without the lmdb
// backend), 3 fencepost unreachable or a 5xx; `lease run` exits with its
// command's status (128 + signal when a signal ended it), or 75 when the
// lease was lost while the command ran.
int RunClientCommand(int argc, char** argv);

// Whether argv[1] names a client command rather than the server's.
bool IsClientCommand(int argc, char** argv);

}  // namespace fencepost::cli
