#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fence/token.h"
#include "http/coro.h"
#include "proxy/config.h"
#include "proxy/problem.h"
#include "storage/election_source.h"

namespace boost::asio {
class io_context;
}

namespace fencepost::proxy {

class RouteContext;

// The elections fencepost watches at their source (--election SCOPE=SOURCE;
// SPEC "Elections watched at their source"), one per elected fence.
//
// For each: the source tells when the holder may have changed (a watch),
// and is also read once a second; each read of the holder whose token is
// above the fence raises the fence to it (fence/election.h), durably,
// through the same commit as a bump, told to watchers with the cause
// "election". A holder below the fence is logged and counted, never obeyed.
//
// A token above an elected fence is taken only when the source confirms it
// is the holder's (Admit): one linearizable read per new token.
//
// Thread safety: the server's io thread.
class Elections {
 public:
  // Throws std::runtime_error when a source cannot be made (a TLS file).
  Elections(boost::asio::io_context& io, RouteContext& context,
            const std::vector<ElectionConfig>& elections,
            std::chrono::milliseconds timeout);
  ~Elections();
  Elections(const Elections&) = delete;
  Elections& operator=(const Elections&) = delete;

  // What is wrong with serving the elections: a live lease of fencepost's
  // own on an elected fence (its holders are the election's now), or "".
  // For start-up only; throws std::runtime_error when the store cannot be
  // read.
  Awaitable<std::string> RefuseLeases();

  // Starts following every election (the first read at once).
  void Start();
  // Stops following them (at shutdown); Admit refuses from then on.
  void Stop();

  // Whether every election was read once (for /readyz).
  bool Ready() const;
  // Whether the fence named `fence` follows an election.
  bool Elected(const std::string& fence) const;

  // What a write or bump with `token` on the fence `fence` (of `key`) needs
  // first: nullopt when it may go on to the fence's own decision; 409
  // unverified-token when the source says another holder holds the
  // election (counted and logged); 503 election-unavailable when the
  // source was not read in time. Waits for the election's first read.
  Awaitable<std::optional<Problem>> Admit(const std::string& fence,
                                          fence::Token token,
                                          const std::string& key);

 private:
  struct Election;
  struct Check;
  // Follows one election until Stop: a read at each change and every
  // second, and the raise it calls for.
  Awaitable<void> Follow(std::shared_ptr<Election> election);
  // One read of the holder, and the raise it calls for.
  Awaitable<void> ReadAndRaise(Election& election);
  enum class Raised { kFailed, kUnchanged, kRaised };
  // The fence of `election` raised to the token of the holder `id`, unless
  // it is there already (or above: the holder is behind). kFailed when the
  // fence could not be read or raised.
  Awaitable<Raised> Raise(Election& election, fence::Token token,
                          const std::string& id);
  // The 409 of a token the source did not confirm (`holder`: the token it
  // named), counted and logged.
  Problem RefuseUnverified(Election& election, const std::string& key,
                           fence::Token token,
                           std::optional<fence::Token> holder);
  // Notes whether the source answered (the gauge, and a line when it
  // changes).
  void NoteUp(Election& election, bool up, const std::string& error);
  Election* Find(const std::string& fence) const;
  // A linearizable read of the holder for a write that needs it, sent after
  // the write arrived; shared by the writes that wait at the same time.
  Awaitable<storage::ElectionHolder> ReadForWrites(Election& election);
  // Sends the writes' reads of `election`, one after another.
  Awaitable<void> RunChecks(std::shared_ptr<Election> election);

  boost::asio::io_context& io_;
  RouteContext& context_;
  const std::chrono::milliseconds timeout_;
  std::vector<std::shared_ptr<Election>> elections_;
  bool stopped_ = false;
};

}  // namespace fencepost::proxy
