#pragma once

#include "cli/flags.h"

namespace fencepost::cli {

// `fencepost watch [PREFIX]`: follows GET /v1/watch?prefix=PREFIX on the
// admin port and prints each event as one JSON object on one line (its data
// with "event" and "id" first). A stream that ends, breaks or stays silent
// past the server's keep-alive is opened again, with backoff, sending the
// last id printed as Last-Event-ID. Runs until SIGINT or SIGTERM (exit 0);
// when the first connection fails: 3 (unreachable, 5xx), 2 (400), 1 (other
// refusals, such as 401).
int Watch(const Flags& flags);

}  // namespace fencepost::cli
