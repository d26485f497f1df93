// The server's event streams and long polls (GET /v1/watch, and GET
// /v1/fences/{key}?wait_above=N): each holds a watch slot of its port, and
// keeps a read pending on its connection so that a client that leaves frees
// the slot at once.

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "proxy/logging.h"
#include "proxy/problem.h"
#include "proxy/routes.h"
#include "proxy/server.h"
#include "proxy/server_wire.h"
#include "proxy/watch.h"
#include "storage/watch_hub.h"

namespace fencepost::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// `data` as one chunk of a chunked body.
std::string Chunk(std::string_view data) {
  char size[17];
  const int n = std::snprintf(size, sizeof size, "%zx", data.size());
  std::string chunk(size, static_cast<std::size_t>(n));
  chunk += "\r\n";
  chunk += data;
  chunk += "\r\n";
  return chunk;
}

// One Server-Sent Event (its data is one line of JSON).
void AppendEvent(std::string* out, const storage::WatchHub::Event& event) {
  *out += "id: " + std::to_string(event.id) + "\nevent: ";
  *out += event.type;
  *out += "\ndata: ";
  *out += event.data;
  *out += "\n\n";
}

// Keeps a stream subscribed for as long as it is sent.
class Subscription {
 public:
  Subscription(storage::WatchHub& hub, const watch::Query& query)
      : hub_(hub), subscriber_(hub.Subscribe(query.prefix, query.last_id)) {}
  ~Subscription() { hub_.Unsubscribe(subscriber_); }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  storage::WatchHub::Subscriber& operator*() { return *subscriber_; }

 private:
  storage::WatchHub& hub_;
  const std::shared_ptr<storage::WatchHub::Subscriber> subscriber_;
};

// Counts a watch in its port's while it is served.
class WatchSlot {
 public:
  explicit WatchSlot(std::size_t& count) : count_(count) { ++count_; }
  ~WatchSlot() { --count_; }
  WatchSlot(const WatchSlot&) = delete;
  WatchSlot& operator=(const WatchSlot&) = delete;

 private:
  std::size_t& count_;
};

}  // namespace

// Whether the client of a watch is still there, as a read kept pending on
// its connection sees it.
struct ClientWatch {
  explicit ClientWatch(asio::io_context& io) : ended(io) {}
  bool reading = true;
  bool stopping = false;  // the server stops the read (not the client)
  bool left = false;      // EOF or an error: the client is gone
  std::function<void()> on_left;
  asio::steady_timer ended;  // cancelled when the read ends
};

namespace {

// Reads from the connection until the client leaves (sets `left`, runs
// `on_left`) or Unwatch stops it: into `keep` (bytes of a pipelined
// request, kept; the read ends when it is full), or discarded when it is
// nullptr.
template <class Stream>
Awaitable<void> WatchClient(Stream& stream, beast::flat_buffer* keep,
                            ClientWatch& watch) {
  beast::error_code ec;
  auto token = asio::redirect_error(kUseAwaitable, ec);
  std::array<char, 4096> sink;
  while (!watch.stopping && (keep == nullptr || Room(*keep) > 0)) {
    if (keep != nullptr) {
      const std::size_t n =
          co_await stream.async_read_some(keep->prepare(Room(*keep)), token);
      keep->commit(n);
    } else {
      co_await stream.async_read_some(asio::buffer(sink), token);
    }
    if (ec) {
      if (!watch.stopping) {
        watch.left = true;
        if (watch.on_left) watch.on_left();
      }
      break;
    }
  }
  watch.reading = false;
  watch.ended.cancel();
}

// Stops WatchClient's read and waits for it to end.
template <class Stream>
Awaitable<void> Unwatch(Stream& stream, ClientWatch& watch) {
  watch.stopping = true;
  if (!watch.reading) co_return;
  beast::error_code ec;
  beast::get_lowest_layer(stream).socket().cancel(ec);
  watch.ended.expires_at(asio::steady_timer::time_point::max());
  while (watch.reading) {
    co_await watch.ended.async_wait(asio::redirect_error(kUseAwaitable, ec));
  }
}

// Writes `bytes` within `write_timeout`; false when it failed. A stream
// whose client let the write time out set `*timed_out`.
template <class Stream>
Awaitable<bool> WriteBytes(Stream& stream, const std::string& bytes,
                           std::chrono::milliseconds write_timeout,
                           Ports::Connection& self, bool* timed_out = nullptr) {
  beast::error_code ec;
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(write_timeout);
  self.since = std::chrono::steady_clock::now();
  co_await asio::async_write(stream, asio::buffer(bytes),
                             asio::redirect_error(kUseAwaitable, ec));
  lowest.expires_never();
  if (timed_out) *timed_out = ec == beast::error::timeout;
  co_return !ec;
}

}  // namespace

template <class Stream>
Awaitable<bool> Server::ServeWatch(Stream& stream, beast::flat_buffer& buffer,
                                   const Request& request, Listener& listener,
                                   Connection& self,
                                   const std::string& client) {
  const auto handled = std::chrono::steady_clock::now();
  if (listener.watches >= listener.max_watches) {
    const bool keep_alive = request.keep_alive() && !shutting_down();
    Response res = routes::Problemed(
        request,
        {ProblemType::kTooManyConnections,
         "this port's event streams and long polls are at their cap (" +
             std::to_string(listener.max_watches) + " of " +
             std::to_string(listener.max_connections) +
             " connections; the rest are kept for other calls); retry later",
         std::nullopt, std::nullopt, std::nullopt});
    res.set(http::field::retry_after, "1");
    const bool sent =
        co_await WriteResponse(stream, request, res, keep_alive, self);
    Account(listener.port, request, res, client, handled, handled);
    co_return sent&& keep_alive;
  }
  WatchSlot slot(listener.watches);
  ClientWatch watch(io_);
  watch.on_left = [this, &request] { service_.watches().ClientLeft(&request); };
  // A stream's client sends nothing more that matters; a long poll's may
  // pipeline its next request, which is kept. No deadline on the read: the
  // wait is the watch's.
  beast::get_lowest_layer(stream).expires_never();
  asio::co_spawn(
      io_,
      WatchClient(stream, watch::IsStreamRequest(request) ? nullptr : &buffer,
                  watch),
      asio::detached);
  Response res = co_await service_.Handle(listener.port, request, client);
  bool more = false;
  if (watch::IsEventStream(res)) {
    co_await StreamEvents(stream, request, res, self, watch);
    co_await Unwatch(stream, watch);
  } else {
    co_await Unwatch(stream, watch);
    // A long poll whose client left is not answered: nobody reads it.
    if (watch.left) co_return false;
    const bool keep_alive = request.keep_alive() && !shutting_down();
    const bool sent =
        co_await WriteResponse(stream, request, res, keep_alive, self);
    more = sent && keep_alive;
  }
  Account(listener.port, request, res, client, handled, handled);
  co_return more;
}

template <class Stream>
Awaitable<void> Server::StreamEvents(Stream& stream, const Request& request,
                                     Response& head, Connection& self,
                                     ClientWatch& watch) {
  std::string refusal;
  const std::optional<watch::Query> query =
      watch::ParseQuery(request, &refusal);  // the route accepted it
  if (!query) co_return;
  asio::steady_timer wake(io_);  // outlives the subscription, which uses it
  Subscription subscription(service_.watches(), *query);
  storage::WatchHub::Subscriber& subscriber = *subscription;
  subscriber.wake = [&wake] { wake.cancel(); };
  watch.on_left = [&wake] { wake.cancel(); };
  head.chunked(true);
  head.keep_alive(false);
  // A browser's EventSource comes back after a second when the stream ends.
  bool sent = co_await WriteBytes(stream, Head(head) + Chunk("retry: 1000\n\n"),
                                  options_.write_timeout, self);
  while (sent && !watch.left && !subscriber.closed && !subscriber.dropped) {
    if (subscriber.pending.empty()) {
      wake.expires_after(std::chrono::seconds(watch::kKeepAliveSeconds));
      beast::error_code ec;
      co_await wake.async_wait(asio::redirect_error(kUseAwaitable, ec));
      if (ec) continue;  // woken: an event, a drop, or the end
      sent = co_await WriteBytes(stream, Chunk(": keep-alive\n\n"),
                                 options_.write_timeout, self);
      continue;
    }
    // Up to 64 KiB of events in one chunk and one write.
    std::string events;
    while (!subscriber.pending.empty() && events.size() < (64u << 10)) {
      const storage::WatchHub::Event& event = *subscriber.pending.front();
      AppendEvent(&events, event);
      subscriber.pending_bytes -=
          std::min(subscriber.pending_bytes, storage::StreamBytes(event));
      subscriber.pending.pop_front();
    }
    bool timed_out = false;
    sent = co_await WriteBytes(stream, Chunk(events), options_.write_timeout,
                               self, &timed_out);
    // A client that takes nothing for --write-timeout stopped reading: it
    // is dropped like one whose queue passed the bound (which one comes
    // first depends on how much the kernel's buffers took).
    if (timed_out) service_.watches().Drop(subscriber);
  }
  if (sent && !watch.left) {
    co_await WriteBytes(stream, std::string("0\r\n\r\n"),
                        options_.write_timeout, self);
  }
  watch.on_left = nullptr;  // `wake` goes with this frame
}

}  // namespace fencepost::proxy
