#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/reliability/history.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"

namespace fencepost::reliability {

// An exception that ended a load thread's connection: the server closed it
// or died, or sent an answer the load could not read. Expected only once
// the harness has killed the server; any other is a failure.
struct Disconnect {
  std::int64_t at_ns = 0;  // when it was caught, on the steady clock (Op's)
  std::uint16_t port = 0;  // the port the thread was talking to
  std::string what;
  // Load's write in flight (an index into its history), left kUnknown.
  std::optional<std::size_t> op;
};

// One line per disconnect of `found` caught from `started` (the server's
// start) until `killed` (when the harness began to kill it): the server
// ended, or dropped or garbled an answer, by itself.
std::vector<std::string> DisconnectsWhileAlive(
    const std::vector<Disconnect>& found,
    std::chrono::steady_clock::time_point started,
    std::chrono::steady_clock::time_point killed);

// Nanoseconds on the steady clock, as Op's times.
std::int64_t SteadyNs(std::chrono::steady_clock::time_point t);

// The reliability harness's load: `threads` writers, each on its own
// connection, PUT to `keys` (half of the writes to the first `hot` keys
// when hot > 0) with fresh tokens from one rising counter, and one write in
// five a stale leader's (a token up to 30 below). Given an admin port, one
// write in ten is a DELETE and one in ten a fence bump on that port. Every
// write joins the history before it is sent (kUnknown until answered), so
// a write in flight when the server dies stays unknown.
//
// A PUT's body is "value TOKEN from WRITER": TokenOfBody reads the token
// back where the store keeps no Fencing-Token (an http:// upstream).
class Load {
 public:
  Load(std::vector<std::string> keys, std::size_t hot, int threads);
  ~Load() { Stop(); }

  void Start(std::uint16_t port);
  // As Start(port), with DELETEs and bumps (on `admin_port`) among the PUTs.
  void Start(std::uint16_t port, std::uint16_t admin_port);
  // Against replicas: each writer connects to `pick()`'s data port, and
  // when its connection fails (the replica died) records the write in
  // flight as unknown and connects to `pick()` again.
  void Start(std::function<std::uint16_t()> pick);
  // A 503 (the shared fence store did not answer) is an unknown outcome,
  // not an error: the write may still be applied.
  void CountUnavailableAsUnknown() { unavailable_unknown_ = true; }
  // Through an http:// backend, an accepted DELETE of a value the upstream
  // lacks is the upstream's 404 (with the Fencing-Token header).
  void AcceptRelayed404OnDelete() { relayed_404_ = true; }
  // Through an http:// backend, a 503 fence-held (after an unclean start,
  // or an unknown upstream outcome) refuses a write before any change: it
  // is kRefused, and its writer pauses 20 ms.
  void ExpectHeldFences() { held_fences_ = true; }
  // Along with the writers, `readers` threads (before Start; 0 unless
  // told) each GET the values of the keys (unless `values` is false), and
  // with an admin port their fences, on their own connections, recording
  // every answered read for Checker::Add.
  void ReadAlong(int readers, bool values = true) {
    readers_ = readers;
    read_values_ = values;
  }
  // The answered reads so far. Once stopped.
  const std::vector<Read>& reads() const { return reads_; }
  // Writes refused so far (kRefused).
  std::size_t refused() const { return refused_; }
  // Joins the writers (call once the server is gone, or to end the load).
  void Stop();

  const std::vector<std::string>& keys() const { return keys_; }
  const std::vector<Op>& history() const { return history_; }
  // Acknowledged writes among history()[from...].
  std::size_t AcknowledgedSince(std::size_t from) const;
  // Acknowledged writes of `kind` in history().
  std::size_t AcknowledgedOf(Op::Kind kind) const;
  // Acknowledged writes so far; may be read while the load runs.
  std::size_t acknowledged() const { return acknowledged_; }
  // While the load runs: waits until more than `count` writes are
  // acknowledged, or for at most `timeout`.
  void AwaitAcknowledgedAbove(std::size_t count,
                              std::chrono::seconds timeout) const;
  // Whether a write is acknowledged within `timeout` from now: a server
  // that stopped answering fails a cycle before its kill could hide it.
  bool AcknowledgesWithin(std::chrono::seconds timeout) const;
  // Writes sent so far; may be read while the load runs.
  std::size_t sent() const { return sent_; }
  // Every connection a writer lost (see Disconnect). Once stopped.
  const std::vector<Disconnect>& disconnects() const { return disconnects_; }

 private:
  void StartWriters(std::function<std::uint16_t()> pick, bool reconnect);
  // Writes through `pick()`'s port until stopped; when `reconnect` is
  // false, only until its connection fails.
  void Write(const std::function<std::uint16_t()>& pick, bool reconnect,
             int thread, std::uint32_t seed);
  // Reads through `pick()`'s port (and the admin port) until stopped, or
  // until its connection fails.
  void ReadLoop(const std::function<std::uint16_t()>& pick, bool reconnect,
                std::uint32_t seed);
  // A key as the writers pick them: half among the hot ones.
  const std::string& PickKey(std::mt19937& rng) const;
  // Records `r`, the answer to history_[at]; false when it was refused.
  bool Answered(std::size_t at, const testing::HttpResponse& r);

  const std::vector<std::string> keys_;
  const std::size_t hot_;
  const int threads_;
  std::atomic<std::uint64_t> counter_{100};
  std::atomic<bool> stop_ = false;
  std::atomic<std::size_t> acknowledged_ = 0;
  std::atomic<std::size_t> sent_ = 0;
  bool unavailable_unknown_ = false;
  bool relayed_404_ = false;
  bool held_fences_ = false;
  std::atomic<std::size_t> refused_ = 0;
  std::uint16_t admin_port_ = 0;  // 0: PUTs only
  std::mutex mu_;
  std::vector<Op> history_;
  std::vector<Disconnect> disconnects_;
  std::vector<Read> reads_;
  int readers_ = 0;
  bool read_values_ = true;
  std::vector<std::thread> writers_;  // and readers
  std::function<std::uint16_t()> pick_;
};

// Lease grants interleaved with the fenced writes of Load: one thread
// acquires `names` on the admin port under a fresh holder each time (so
// every 200 is a grant), with a short TTL, and releases half of them. Each
// grant is recorded once answered; the one in flight when the server dies
// is kept aside until Recover learns whether the server applied it.
//
// A name may be a key that Load writes to (without a --fence-scope over
// it, the lease and the key share the key's fence). A grant's token is
// 1 + max(the lease's token, the fence's token), and the grant raises the
// fence to it in the transaction that grants, so such a name's grants and
// writes order each other on one fence: Check verifies that against the
// writes' history, and GrantsAsWrites hands the grants' tokens to
// reliability::Check, which would otherwise take a fence or a 409 showing
// a grant's token for a token nobody presented.
//
// Thread safety: as Load; Recover, Check and GrantsAsWrites once stopped.
class LeaseLoad {
 public:
  struct Grant {
    std::string name;
    std::uint64_t token = 0;
    std::int64_t sent_ns = 0;
    // When the grant was answered; for one that Recover found applied,
    // when the restarted server showed it (it was applied by then).
    std::int64_t acked_ns = 0;
  };
  explicit LeaseLoad(std::vector<std::string> names)
      : names_(std::move(names)) {}
  ~LeaseLoad() { Stop(); }

  void Start(std::uint16_t admin_port);
  void Stop();
  // The grants answered with 200, and those Recover found applied.
  const std::vector<Grant>& grants() const { return grants_; }
  // How many of grants() were found applied by Recover (never answered).
  std::size_t recovered() const { return recovered_; }
  // Every connection it lost (see Disconnect). Once stopped.
  const std::vector<Disconnect>& disconnects() const { return disconnects_; }
  // After a restart, before the checks: reads each lease back. A lease
  // whose token no recorded grant has was granted by the acquire in flight
  // when the server died (applied, never answered): that grant joins
  // grants() with this token. Returns one line per lease whose token no
  // grant explains.
  std::vector<std::string> Recover(std::uint16_t admin_port);
  // The grants()[from...] of the names among `keys`, as bumps of unknown
  // outcome for reliability::Check, which takes an unknown bump only for
  // the token it presents to the key's fence (a grant raises the fence and
  // stores no value).
  std::vector<Op> GrantsAsWrites(const std::vector<std::string>& keys,
                                 std::size_t from = 0) const;
  // After a restart (and Recover): every grant's token is unique per name,
  // grants follow one another in token order, neither the lease nor its
  // fence is below an acknowledged grant, and the fence is not below the
  // lease's token (the grant raised both at once). For a name that is a
  // key of `writes` (Load's history), with times on Load's clock:
  //  - a grant's token is above every token the fence showed (a write's
  //    acknowledged acceptance, a 409's current_token) before the grant
  //    was sent;
  //  - a write sent after a grant was acknowledged is accepted only with a
  //    token not below the grant's, and a 409 it gets shows a
  //    current_token not below the grant's.
  // (A write sent before a grant's acknowledgement may be decided before
  // the grant and acknowledged after it: no order is asserted for it.)
  // Returns one line per violation.
  std::vector<std::string> Check(std::uint16_t admin_port,
                                 const std::vector<Op>& writes) const;

 private:
  void Run(std::uint16_t admin_port, std::uint32_t seed);

  const std::vector<std::string> names_;
  std::atomic<bool> stop_ = false;
  std::atomic<std::uint64_t> holders_ = 0;
  std::mutex mu_;
  std::vector<Grant> grants_;
  // The acquire sent and not answered (its token unknown), if any.
  std::optional<Grant> in_flight_;
  std::size_t recovered_ = 0;
  std::vector<Disconnect> disconnects_;
  std::thread thread_;
};

// Batches among the other loads: one thread POSTs batches that put both
// keys of a pair (pair/I/a and pair/I/b, under the scope pair/) with one
// rising token and one body, so a batch applied by half shows as a pair
// whose two values differ.
//
// Thread safety: as Load.
class BatchLoad {
 public:
  static constexpr int kPairs = 8;
  ~BatchLoad() { Stop(); }
  void Start(std::uint16_t data_port);
  void Stop();
  std::size_t acknowledged() const { return acked_.size(); }
  // Every connection it lost (see Disconnect). Once stopped.
  const std::vector<Disconnect>& disconnects() const { return disconnects_; }
  // After a restart: both keys of every pair hold the same token and body,
  // and none is below a batch acknowledged for it.
  std::vector<std::string> Check(std::uint16_t data_port) const;

 private:
  void Run(std::uint16_t data_port, std::uint32_t seed);

  std::atomic<bool> stop_ = false;
  std::atomic<std::uint64_t> counter_{1000000};
  std::mutex mu_;
  std::vector<std::pair<int, std::uint64_t>> acked_;  // pair, token
  std::vector<Disconnect> disconnects_;
  std::thread thread_;
};

// What `server` holds for `keys`: each fence, and each value's token (its
// Fencing-Token) and body.
std::map<std::string, KeyState> ReadState(const testing::ServerProcess& server,
                                          const std::vector<std::string>& keys);
// `tokens_in_bodies`: a value's token is read from its body (TokenOfBody),
// for an http:// backend, whose answers carry no Fencing-Token.
std::map<std::string, KeyState> ReadState(std::uint16_t data_port,
                                          std::uint16_t admin_port,
                                          const std::vector<std::string>& keys,
                                          bool tokens_in_bodies = false);
// The token of a body that Load's PUT sent, if it is one.
std::optional<std::uint64_t> TokenOfBody(const std::string& body);

// Checks a history after each restart (see Checker): every fence read back
// becomes a floor for the reads after it.
class Restarts {
 public:
  Restarts() { checker_.CheckAfterRestarts(); }
  // The keys starting with `prefix` share the fence `prefix`.
  void Scope(std::string prefix) { checker_.Scope(std::move(prefix)); }
  // Adds, as one part, the writes of `history` (which only grows) not
  // added before and `more` (writes from elsewhere in the same cycle: a
  // LeaseLoad's new grants), with the reads of `reads` (which only grows:
  // Load::reads) not added before, then checks `state` against every
  // write added.
  std::vector<std::string> Check(const std::vector<Op>& history,
                                 const std::map<std::string, KeyState>& state,
                                 const std::vector<Op>& more = {},
                                 const std::vector<Read>& reads = {});

 private:
  Checker checker_;
  std::size_t added_ = 0;
  std::size_t reads_added_ = 0;
};

}  // namespace fencepost::reliability
