#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fence/token.h"
#include "http/coro.h"
#include "storage/election_spec.h"

namespace boost::asio {
class io_context;
}

namespace fencepost::storage {

// The holder of an election as its source told it.
struct ElectionHolder {
  std::string error;                  // "": the source answered
  std::optional<fence::Token> token;  // nullopt: nobody holds it
  std::string id;  // the holder's value (its ID, as the elector wrote it)
};

// One election, read at its source. The source tells when the election may
// have changed hands (a watch); the reader reads the holder then.
//
// Thread safety: the io thread of the io_context it was made with; the
// callbacks run there.
class ElectionSource {
 public:
  virtual ~ElectionSource() = default;
  // Starts following the election: `changed` runs whenever its holder may
  // have changed, and each time the source was (re)connected.
  virtual void Start(std::function<void()> changed) = 0;
  // Stops following it (at shutdown): nothing keeps the io_context busy
  // after the reads in flight, and `changed` runs no more.
  virtual void Stop() = 0;
  // The holder now, by a linearizable read (a holder elected before it was
  // sent is seen), within the source's timeout. Never throws.
  virtual Awaitable<ElectionHolder> ReadHolder() = 0;
};

// The source of `spec`, not yet started; a read takes at most `timeout`.
// Throws std::runtime_error when a TLS file cannot be loaded.
std::unique_ptr<ElectionSource> MakeElectionSource(
    boost::asio::io_context& io, const ElectionSpec& spec,
    std::chrono::milliseconds timeout);

// Each kind's (etcd_election.cc, zookeeper_election.cc).
std::unique_ptr<ElectionSource> MakeEtcdElection(
    boost::asio::io_context& io, const ElectionSpec& spec,
    std::chrono::milliseconds timeout);
std::unique_ptr<ElectionSource> MakeZooKeeperElection(
    boost::asio::io_context& io, const ElectionSpec& spec,
    std::chrono::milliseconds timeout);

}  // namespace fencepost::storage
