#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace fencepost::storage {

// What changed, as events for watchers (GET /v1/watch, and the long poll of
// GET /v1/fences/KEY?wait_above=N): each event is published once its change
// is durable (the publisher answers the write that made it at the same
// moment), gets the next id, and goes to every subscriber whose prefix its
// key starts with. The last `retained` events are kept, so a subscriber that
// comes back with the id of the last event it saw gets those after it; one
// that was away longer, or so long that what it missed passes
// `max_unsent_bytes`, gets a reset instead.
//
// A subscriber that does not keep up never slows a publisher: once the
// events waiting for it pass `max_unsent_bytes` it is dropped (its queue is
// emptied, `dropped` set, and it is woken to close).
//
// Thread safety: the server's one io thread (publishers, subscribers and
// waiters alike).
class WatchHub {
 public:
  struct Event {
    std::uint64_t id = 0;
    std::string type;  // "fence", "lease", "rejection", or "reset"
    std::string key;   // the name the prefix is matched against
    std::string data;  // one JSON object on one line
  };
  using EventPtr = std::shared_ptr<const Event>;

  // One event stream. Its owner sends `pending` in order and waits for
  // `wake` when it is empty.
  struct Subscriber {
    std::string prefix;
    std::deque<EventPtr> pending;
    std::size_t pending_bytes = 0;
    bool dropped = false;  // fell `max_unsent_bytes` behind
    bool closed = false;   // the hub is closing (the server stops)
    std::function<void()> wake;
  };

  // One long poll on one fence: `wake` runs for each event of that fence,
  // and `signalled` stays set until the owner clears it. `abandoned`: the
  // client of its request left (ClientLeft), so nobody waits for the answer.
  struct Waiter {
    bool signalled = false;
    bool abandoned = false;
    const void* request = nullptr;
    std::function<void()> wake;
  };

  struct Options {
    std::size_t retained = 10000;
    std::size_t max_unsent_bytes = 1u << 20;
    // The id before the first event; 0: the wall clock in microseconds at
    // construction, so a restarted server's ids are above the last life's
    // and an id from that life is answered with a reset.
    std::uint64_t first_id = 0;
  };

  WatchHub() : WatchHub(Options{}) {}
  explicit WatchHub(Options options);
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Publishes a change: `type` "fence", "lease" or "rejection".
  void Publish(std::string_view type, std::string key, std::string data);

  // Registers a stream of the events whose key starts with `prefix`. With
  // `last_id` (the Last-Event-ID it comes back with), the retained events
  // after it are queued at once; or, when some after it are no longer held
  // or they pass `max_unsent_bytes` (they would drop it before it is sent
  // anything), a reset event. The subscriber stays registered until
  // Unsubscribe.
  std::shared_ptr<Subscriber> Subscribe(const std::string& prefix,
                                        std::optional<std::uint64_t> last_id);
  void Unsubscribe(const std::shared_ptr<Subscriber>& subscriber);

  // Registers a long poll of the fence `name` until Unwait. `request`
  // names the request it answers, for ClientLeft (nullptr: none).
  std::shared_ptr<Waiter> Wait(const std::string& name,
                               const void* request = nullptr);
  void Unwait(const std::string& name, const std::shared_ptr<Waiter>& waiter);
  // The client of `request` left while it was being answered (the server
  // saw its connection close): the long poll registered for that request
  // is woken with `abandoned` set, so it ends instead of holding its
  // connection's slot until its timeout.
  void ClientLeft(const void* request);
  // A subscriber that stopped taking its events (its queue passed the
  // bound, or its client let a write time out): dropped and counted.
  void Drop(Subscriber& subscriber);

  // Wakes every subscriber and waiter for the last time (shutdown).
  void Close();
  // Changes were missed (the store's feed lost them): the reset gets the
  // next id, the retained events are dropped (a subscriber that comes back
  // with an id from before the reset gets a reset too, never a replay that
  // skips the missed changes), every subscriber gets the reset, and every
  // waiter is woken to read again.
  void Reset();
  // Whether the fences store feeds the fence and lease events itself (etcd's
  // watch, with every replica's changes): then the changes this server
  // answers are not published again.
  void set_fed_by_store(bool fed) { fed_by_store_ = fed; }
  bool fed_by_store() const { return fed_by_store_; }

  std::uint64_t last_id() const { return last_id_; }
  bool closed() const { return closed_; }
  // For the metrics: subscribers and waiters now, and counts since start.
  std::size_t watchers() const { return subscribers_ + waiters_; }
  std::uint64_t events_total() const { return events_total_; }
  std::uint64_t dropped_total() const { return dropped_total_; }

 private:
  void Deliver(const EventPtr& event, Subscriber& subscriber);
  // The reset event at the latest id: a subscriber resuming from it misses
  // nothing that is still to come.
  EventPtr ResetEvent() const;
  // Whether the retained events after `last_id` under `prefix` are all held
  // and fit in one subscriber's queue.
  bool CanReplay(const std::string& prefix, std::uint64_t last_id) const;

  const Options options_;
  std::uint64_t last_id_;
  std::deque<EventPtr> retained_;
  // Subscribers by prefix: an event is matched once per distinct prefix.
  std::map<std::string, std::list<std::shared_ptr<Subscriber>>, std::less<>>
      by_prefix_;
  std::multimap<std::string, std::shared_ptr<Waiter>, std::less<>> waiters_by_;
  std::size_t subscribers_ = 0;
  std::size_t waiters_ = 0;
  std::uint64_t events_total_ = 0;
  std::uint64_t dropped_total_ = 0;
  bool closed_ = false;
  bool fed_by_store_ = false;
};

// The bytes one event takes in a stream (its id, event and data lines).
std::size_t StreamBytes(const WatchHub::Event& event);

}  // namespace fencepost::storage
