#pragma once

#include <boost/asio/io_context.hpp>

#include "fence/committer.h"

namespace fencepost::storage {

// Drives the LMDB committers from `io`'s thread (fence::Committer::Loop):
// a write is decided, logged, synced through io_uring and answered on the
// thread that read it. The watches last as long as `io` does.
fence::Committer::Options::Loop CommitLoopOn(boost::asio::io_context& io);

}  // namespace fencepost::storage
