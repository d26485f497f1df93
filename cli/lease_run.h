#pragma once

#include "cli/flags.h"

namespace fencepost::cli {

// `fencepost lease run NAME ... -- CMD [ARG...]`: runs CMD while it holds
// the lease (fencepost's, or through --via another system's), renewing it;
// stops CMD's process group when the lease is lost. Returns CMD's exit
// status (128 + signal when a signal ended it), kLeaseLost when the lease
// was lost while CMD ran, kNotFound or kCannotExecute when CMD cannot run
// (checked before the lease is taken).
int LeaseRun(const Flags& flags);

}  // namespace fencepost::cli
