#include "storage/watch_hub.h"

#include <chrono>
#include <string>
#include <utility>

namespace fencepost::storage {
namespace {

std::uint64_t WallMicros() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace

std::size_t StreamBytes(const WatchHub::Event& event) {
  // "id: N\nevent: T\ndata: D\n\n"
  return 4 + 20 + 8 + event.type.size() + 7 + event.data.size() + 2;
}

WatchHub::WatchHub(Options options)
    : options_(options),
      last_id_(options.first_id != 0 ? options.first_id : WallMicros()) {}

void WatchHub::Publish(std::string_view type, std::string key,
                       std::string data) {
  if (closed_) return;
  auto event = std::make_shared<Event>(
      Event{++last_id_, std::string(type), std::move(key), std::move(data)});
  ++events_total_;
  retained_.push_back(event);
  if (retained_.size() > options_.retained) retained_.pop_front();
  for (auto& [prefix, subscribers] : by_prefix_) {
    if (event->key.compare(0, prefix.size(), prefix) != 0) continue;
    for (const auto& subscriber : subscribers) Deliver(event, *subscriber);
  }
  if (type != "fence") return;
  auto [first, last] = waiters_by_.equal_range(event->key);
  for (auto it = first; it != last; ++it) {
    it->second->signalled = true;
    if (it->second->wake) it->second->wake();
  }
}

void WatchHub::Deliver(const EventPtr& event, Subscriber& subscriber) {
  if (subscriber.dropped || subscriber.closed) return;
  const bool was_empty = subscriber.pending.empty();
  subscriber.pending.push_back(event);
  subscriber.pending_bytes += StreamBytes(*event);
  if (subscriber.pending_bytes > options_.max_unsent_bytes) {
    Drop(subscriber);
  } else if (!was_empty) {
    return;  // woken already for the first one
  }
  if (subscriber.wake) subscriber.wake();
}

void WatchHub::Drop(Subscriber& subscriber) {
  if (subscriber.dropped) return;
  subscriber.dropped = true;
  subscriber.pending.clear();
  subscriber.pending_bytes = 0;
  ++dropped_total_;
}

WatchHub::EventPtr WatchHub::ResetEvent() const {
  return std::make_shared<Event>(Event{last_id_, "reset", "", "{}"});
}

bool WatchHub::CanReplay(const std::string& prefix,
                         std::uint64_t last_id) const {
  const std::uint64_t oldest_kept =
      retained_.empty() ? last_id_ + 1 : retained_.front()->id;
  // Every event after `last_id` is still held only when the one right
  // after it is (or none came after it); an id this server never gave
  // (a previous life's, one from before a reset, or one from the future)
  // is answered with a reset.
  if (last_id + 1 < oldest_kept || last_id > last_id_) return false;
  // A replay larger than a subscriber's queue would drop it before it is
  // sent anything, on every reconnection: a reset lets it go on.
  std::size_t bytes = 0;
  for (auto it = retained_.rbegin(); it != retained_.rend(); ++it) {
    const Event& event = **it;
    if (event.id <= last_id) break;
    if (event.key.compare(0, prefix.size(), prefix) != 0) continue;
    bytes += StreamBytes(event);
    if (bytes > options_.max_unsent_bytes) return false;
  }
  return true;
}

std::shared_ptr<WatchHub::Subscriber> WatchHub::Subscribe(
    const std::string& prefix, std::optional<std::uint64_t> last_id) {
  auto subscriber = std::make_shared<Subscriber>();
  subscriber->prefix = prefix;
  subscriber->closed = closed_;
  if (last_id && *last_id != last_id_) {
    if (CanReplay(prefix, *last_id)) {
      for (const EventPtr& event : retained_) {
        if (event->id > *last_id &&
            event->key.compare(0, prefix.size(), prefix) == 0) {
          Deliver(event, *subscriber);
        }
      }
    } else {
      Deliver(ResetEvent(), *subscriber);
    }
  }
  by_prefix_[prefix].push_back(subscriber);
  ++subscribers_;
  return subscriber;
}

void WatchHub::Unsubscribe(const std::shared_ptr<Subscriber>& subscriber) {
  auto it = by_prefix_.find(subscriber->prefix);
  if (it == by_prefix_.end()) return;
  auto& list = it->second;
  for (auto at = list.begin(); at != list.end(); ++at) {
    if (*at != subscriber) continue;
    list.erase(at);
    --subscribers_;
    break;
  }
  if (list.empty()) by_prefix_.erase(it);
}

std::shared_ptr<WatchHub::Waiter> WatchHub::Wait(const std::string& name,
                                                 const void* request) {
  auto waiter = std::make_shared<Waiter>();
  waiter->signalled = closed_;
  waiter->request = request;
  waiters_by_.emplace(name, waiter);
  ++waiters_;
  return waiter;
}

void WatchHub::Unwait(const std::string& name,
                      const std::shared_ptr<Waiter>& waiter) {
  auto [first, last] = waiters_by_.equal_range(name);
  for (auto it = first; it != last; ++it) {
    if (it->second != waiter) continue;
    waiters_by_.erase(it);
    --waiters_;
    return;
  }
}

void WatchHub::ClientLeft(const void* request) {
  if (request == nullptr) return;
  for (auto& [name, waiter] : waiters_by_) {
    if (waiter->request != request) continue;
    waiter->abandoned = true;
    waiter->signalled = true;
    if (waiter->wake) waiter->wake();
  }
}

void WatchHub::Reset() {
  if (closed_) return;
  // A new id, and nothing retained from before it: an id a subscriber saw
  // before the reset is older than every event held, so coming back with it
  // is answered with a reset, not a replay that skips what was missed.
  ++last_id_;
  retained_.clear();
  const EventPtr reset = ResetEvent();
  for (auto& [prefix, subscribers] : by_prefix_) {
    for (const auto& subscriber : subscribers) Deliver(reset, *subscriber);
  }
  for (auto& [name, waiter] : waiters_by_) {
    waiter->signalled = true;
    if (waiter->wake) waiter->wake();
  }
}

void WatchHub::Close() {
  closed_ = true;
  for (auto& [prefix, subscribers] : by_prefix_) {
    for (const auto& subscriber : subscribers) {
      subscriber->closed = true;
      if (subscriber->wake) subscriber->wake();
    }
  }
  for (auto& [name, waiter] : waiters_by_) {
    waiter->signalled = true;
    if (waiter->wake) waiter->wake();
  }
}

}  // namespace fencepost::storage
