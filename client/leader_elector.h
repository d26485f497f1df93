#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "client/client.h"
#include "client/lease_backend.h"
#include "client/stop_signal.h"

namespace fencepost::client {

// "<hostname>-<pid>-<8 random hex digits>": a holder ID unique per process
// (SPEC "Client commands").
std::string DefaultHolderId();

// Leader election on a lease: fencepost's own (the default), or one of
// another coordination system (Options::backend: etcd, ZooKeeper,
// PostgreSQL). Run() campaigns: it tries to
// acquire the lease, retrying every retry_period (jittered by ±50%) while
// another holder has it. Once elected it runs on_elected(token, stop) on a
// work thread of its own while a LeaseKeeper renews the lease every third
// of the TTL on another thread. `stop` fires
//  - at once when a renewal is refused or answered with another token;
//  - when no renewal succeeded before the last successful acquire or
//    renewal's send time + ttl - safety_margin (this process's steady
//    clock), so the work stops before the server can grant the lease to
//    someone else, as long as the clocks' rates differ by less than the
//    margin;
//  - when Stop() is called.
// on_elected must return soon after `stop` fires. Its writes carry the
// token it got, so once another holder has been granted the lease they
// are refused by fencepost rather than applied. When it has returned the
// elector releases the lease if it still holds it, calls on_lost(token,
// reason) and, unless stopped, campaigns again. on_elected returning on its
// own ends the term the same way (reason "the work returned"; the next
// campaign starts a jittered retry_period later). on_lost is called
// exactly once per on_elected, on the thread that called Run().
//
// If on_elected throws, the term ends as if it had returned, with the
// reason "the work threw: <what>". A failed acquire (unreachable, 5xx, a
// 4xx other than 409) is reported to on_error, if set, and retried like a
// refused one.
//
// Thread safety: Run() is called once, from one thread. Stop() may be
// called from any thread, e.g. one that handles signals with sigwait; it
// waits until Run() is about to return, except when called from on_elected
// or another callback, where it only asks to stop and returns at once.
// Nothing here is async-signal-safe. The destructor calls Stop().
class LeaderElector {
 public:
  using Token = std::uint64_t;

  struct Options {
    Client::Options client;  // the admin port; its timeout bounds each call
    std::string name;        // the lease's name
    std::string holder;      // "": DefaultHolderId()
    std::chrono::milliseconds ttl{10000};
    // Another system's leases; when set, its spec() gives the name, holder
    // and TTL (the three fields above are ignored) and client.url is not
    // used. The elector calls it from one thread at a time.
    std::shared_ptr<LeaseBackend> backend;
    std::chrono::milliseconds retry_period{0};   // 0: ttl / 3
    std::chrono::milliseconds safety_margin{0};  // 0: max(ttl / 10, 50 ms)
  };
  using ElectedCallback = std::function<void(Token, const StopSignal&)>;
  using LostCallback = std::function<void(Token, const std::string& reason)>;
  using ErrorCallback = std::function<void(const std::string& message)>;

  // Throws std::invalid_argument for an empty name, a bad URL, a
  // non-positive TTL or a margin not below it, and std::runtime_error for
  // an unreadable CA file. Does not contact the server.
  LeaderElector(Options options, ElectedCallback on_elected,
                LostCallback on_lost = {}, ErrorCallback on_error = {});
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  const std::string& holder() const { return backend_->spec().holder; }

  // Campaigns, leads and campaigns again until Stop(); returns once the
  // last term has ended (work returned, lease released, on_lost called).
  // Returns at once when Stop() came first.
  void Run();
  // Fires the current term's stop signal, and makes Run() return after
  // the work has returned and the lease has been released. An acquire or
  // release in flight is not cut short: Stop() may wait for it, at most
  // Options::client.timeout each.
  void Stop();

 private:
  std::optional<LeaseAttempt> Campaign();
  void Lead(const LeaseAttempt& grant);
  std::chrono::milliseconds Jittered(std::chrono::milliseconds period);
  bool StopRequested();

  Options options_;
  std::shared_ptr<LeaseBackend> backend_;
  ElectedCallback on_elected_;
  LostCallback on_lost_;
  ErrorCallback on_error_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool running_ = false;
  bool work_done_ = false;
  StopSignal* term_stop_ = nullptr;  // the current term's signal
  std::thread::id run_thread_;
  std::thread::id work_thread_;
};

}  // namespace fencepost::client
