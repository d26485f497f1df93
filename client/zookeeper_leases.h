#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/lease_backend.h"

namespace fencepost::client {

// A LeaseBackend on ZooKeeper, with the leader-election recipe: every
// candidate for lease NAME holds one ephemeral sequential node
// PATH/NAME/n_<sequence> (data: its holder ID) in a session of its own, and
// the candidate with the lowest sequence number holds the lease. The token
// is that node's czxid, the ID of the transaction that created it: zxids
// only go up, and every later holder's node was created later.
//
// The URL is "zk://HOST:PORT[,HOST:PORT...][/PATH]", PATH by default
// "/fencepost/leases". NAME may be any string: it becomes one node below
// PATH, with every byte but ASCII letters, digits and "-._~" written as an
// upper-case %XX escape (and "." and ".." as %2E escapes), so "demo/race"
// is PATH/demo%2Frace and no name reaches outside PATH. Missing nodes on
// the way are created as persistent nodes.
//
// The session timeout asked for is spec().ttl; the server may grant
// another within its min/max session timeout, and LeaseAttempt::ttl
// reports the one granted. The session, and with it the candidate's node,
// lasts across Acquire attempts; an expired session is replaced by a new
// one (and a new node) on the next Acquire. The lease is held while the
// node exists: Renew checks that with one round trip, which also proves
// the session alive at that time. When the connection is lost the
// ZooKeeper client reconnects on its own; Renew says kFailed meanwhile and
// kRefused once the server says the session expired.
//
// Each call returns within its timeout, except that a host name is
// resolved when a session starts, without a deadline. The destructor and
// Release close the session; the destructor waits until the close is done
// (up to about 5 s when the server does not answer).
//
// ZooKeeper's own log is discarded (and its level set to errors for the
// whole process); the outcomes' detail says what went wrong.
//
// Thread safety: calls must not overlap (LeaseBackend's rule); the
// ZooKeeper client's own threads only touch state behind a mutex.
class ZooKeeperLeases final : public LeaseBackend {
 public:
  // Does not connect. Throws std::invalid_argument, naming the problem, for
  // a bad URL (another scheme, no host, a host without a port, a port that
  // is not 1 to 65535, user info, a query or fragment, a PATH that is "/",
  // ends in "/", has an empty, "." or ".." step or a control or non-ASCII
  // byte, or lies under /zookeeper), an empty spec.name or a non-positive
  // spec.ttl.
  ZooKeeperLeases(std::string url, LeaseSpec spec);
  ~ZooKeeperLeases() override;
  ZooKeeperLeases(const ZooKeeperLeases&) = delete;
  ZooKeeperLeases& operator=(const ZooKeeperLeases&) = delete;

  const LeaseSpec& spec() const override { return spec_; }
  // "zookeeper 127.0.0.1:2181/fencepost/leases"
  std::string Describe() const override;
  // The node the candidates' nodes go under: PATH/NAME, NAME escaped.
  const std::string& election_path() const { return election_path_; }

  // Starts a session if there is none (or it expired), creates this
  // candidate's node if it has none, then lists the candidates: kHeld when
  // this one's node is the lowest (ttl: the session timeout granted),
  // kRefused with the lowest one's holder ID otherwise, kFailed when not
  // connected in time or a request got no answer in time.
  LeaseAttempt Acquire(std::chrono::milliseconds timeout) override;
  // kHeld when this candidate's node, created in the transaction `token`,
  // still exists (checked in one round trip sent at sent_at); kRefused when
  // it does not, the session expired or `token` is not this candidate's;
  // kFailed when no answer came in time.
  LeaseAttempt Renew(std::uint64_t token,
                     std::chrono::milliseconds timeout) override;
  // Deletes this candidate's node, created in the transaction `token`, then
  // closes the session (waiting for that at most until the deadline): ""
  // when the node was deleted, else why not; either way the next Acquire
  // starts afresh. When `token` is not this candidate's, changes nothing
  // and says so.
  std::string Release(std::uint64_t token,
                      std::chrono::milliseconds timeout) override;

 private:
  struct Session;
  using Clock = std::chrono::steady_clock;

  // Starts a session unless one is live; waits until it is connected.
  // "" when connected, else why not.
  std::string Connect(Clock::time_point deadline);
  // Creates this candidate's node, and the nodes above it when missing.
  int CreateNode(Clock::time_point deadline);
  // One look at the candidates; nullopt means "look again" (our node or
  // the lowest one vanished meanwhile).
  std::optional<LeaseAttempt> Elect(Clock::time_point deadline);
  // Drops the session: no call uses it any more, and a thread of its own
  // closes it. Waits for the close until `deadline`.
  void CloseSession(Clock::time_point deadline);
  void JoinFinishedClosers();
  LeaseAttempt Failed(int rc) const;

  LeaseSpec spec_;
  std::string hosts_;  // "HOST:PORT,..." as zookeeper_init takes it
  std::string path_;
  std::string election_path_;

  std::shared_ptr<Session> session_;  // null: none yet or closed
  std::string node_path_;             // our node; "" when none
  std::int64_t node_czxid_ = 0;

  struct Closer {
    std::thread thread;
    std::shared_future<void> done;
  };
  std::vector<Closer> closers_;
};

}  // namespace fencepost::client
