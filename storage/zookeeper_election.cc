// An election held in ZooKeeper (storage/election_source.h): the ephemeral
// child of PATH with the lowest sequence suffix holds it (the recipes of
// kazoo, Curator and fencepost's own ZooKeeper leases); its token is the
// node's czxid. A child that is not ephemeral is nobody's candidacy (no
// session ends it) and is passed over.
//
// ZooKeeper's C client (libzookeeper-mt) runs its own threads: its
// completions and watches only post to the io thread, where everything else
// happens. A read is the client's sync of PATH (so it sees every change the
// leader committed before it), the children of PATH (leaving a watch on
// them; on PATH itself when it does not exist yet), then the lowest child's
// data and stat. Sessions start on a thread of their own (the client
// resolves host names as it starts), never on the io thread.

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fence/election.h"
#include "storage/election_source.h"

namespace fencepost::storage {

namespace asio = boost::asio;

namespace {

constexpr std::size_t kMaxId = 256;
// Reads of the children again when the lowest one vanished meanwhile, and
// children passed over for not being ephemeral, at most.
constexpr int kMaxAttempts = 8;
// The session timeout asked for (the server bounds it).
constexpr int kSessionMs = 10000;

void DiscardLog(const char*) {}

// What the C client's threads share with the io thread. Every handle's
// watcher context is a heap copy of a weak pointer to it, freed once the
// handle is closed, so no thread of the client touches it once it is gone.
struct Shared {
  explicit Shared(asio::io_context& io) : io(io) {}
  asio::io_context& io;
  std::mutex mu;
  zhandle_t* zh = nullptr;    // guarded by mu; null: none yet, or expired
  bool connecting = false;    // guarded by mu: a session is being started
  std::string connect_error;  // guarded by mu: why the last start failed
  std::atomic<bool> stopped = false;
  std::function<void()> changed;  // the io thread's
};
using Context = std::weak_ptr<Shared>;

// Tells the io thread the election may have changed.
void TellChanged(const std::shared_ptr<Shared>& shared) {
  if (shared->stopped) return;
  asio::post(shared->io, [weak = Context(shared)] {
    const std::shared_ptr<Shared> alive = weak.lock();
    if (alive && !alive->stopped && alive->changed) alive->changed();
  });
}

// Closes `zh` on a thread of its own (never on the client's own threads,
// and never on the io thread: a close waits for the server), then frees its
// watcher context.
void CloseApart(zhandle_t* zh, Context* context) {
  std::thread([zh, context] {
    zookeeper_close(zh);
    delete context;
  }).detach();
}

// A coroutine waiting for a read's answer (the io thread's).
struct Waiter {
  explicit Waiter(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  bool done = false;
  ElectionHolder holder;
};

// One read, as it goes through the C client's completions.
struct Read {
  std::shared_ptr<Shared> shared;
  std::weak_ptr<Waiter> waiter;
  std::string path;
  int attempts = 0;
  std::vector<std::string> children;  // as listed, the skipped ones removed
  std::string child;                  // the one being read
};

std::string Describe(int rc) { return std::string("ZooKeeper: ") + zerror(rc); }

// Hands `holder` to the waiting coroutine, if it still waits.
void Finish(Read* read, ElectionHolder holder) {
  if (!read->shared->stopped) {
    asio::post(read->shared->io,
               [waiter = read->waiter, holder = std::move(holder)]() mutable {
                 const std::shared_ptr<Waiter> w = waiter.lock();
                 if (!w || w->done) return;
                 w->done = true;
                 w->holder = std::move(holder);
                 w->timer.cancel();
               });
  }
  delete read;
}

void Failed(Read* read, int rc) {
  Finish(read, {Describe(rc), std::nullopt, {}});
}

// Sends one request with the session's handle, under its lock (the
// requests only queue), or fails the read when there is none.
template <class Send>
void WithHandle(Read* read, Send send) {
  int rc = ZCONNECTIONLOSS;
  {
    std::lock_guard lock(read->shared->mu);
    if (read->shared->zh != nullptr) rc = send(read->shared->zh);
  }
  if (rc != ZOK) Failed(read, rc);
}

void OnChildren(int rc, const String_vector* children, const void* data);
void OnData(int rc, const char* value, int length, const Stat* stat,
            const void* data);

// Reads the lowest of the children left, or finishes with nobody.
void ReadLowest(Read* read) {
  std::vector<std::string_view> names(read->children.begin(),
                                      read->children.end());
  const std::optional<std::size_t> lowest = fence::LowestSequence(names);
  if (!lowest) {
    Finish(read, {});  // no candidate: nobody holds it
    return;
  }
  read->child = read->children[*lowest];
  const std::string node = read->path + "/" + read->child;
  WithHandle(read, [&](zhandle_t* zh) {
    return zoo_aget(zh, node.c_str(), 0, OnData, read);
  });
}

void ReadChildren(Read* read) {
  WithHandle(read, [&](zhandle_t* zh) {
    return zoo_aget_children(zh, read->path.c_str(), 1, OnChildren, read);
  });
}

void OnData(int rc, const char* value, int length, const Stat* stat,
            const void* data) {
  Read* read = static_cast<Read*>(const_cast<void*>(data));
  if (rc == ZNONODE && ++read->attempts < kMaxAttempts) {
    ReadChildren(read);  // the holder left between the two reads
    return;
  }
  if (rc != ZOK || stat == nullptr) {
    Failed(read, rc);
    return;
  }
  if (stat->ephemeralOwner == 0) {
    // Not a candidacy: no session's end removes it.
    if (++read->attempts >= kMaxAttempts) {
      Finish(read, {"ZooKeeper: too many children of the election that "
                    "are not ephemeral",
                    std::nullopt,
                    {}});
      return;
    }
    std::erase(read->children, read->child);
    ReadLowest(read);
    return;
  }
  if (stat->czxid <= 0) {
    Finish(read,
           {"ZooKeeper: the holder's node has no czxid", std::nullopt, {}});
    return;
  }
  ElectionHolder holder;
  holder.token = static_cast<fence::Token>(stat->czxid);
  if (value != nullptr && length > 0) {
    holder.id.assign(value, std::min<std::size_t>(length, kMaxId));
  }
  Finish(read, std::move(holder));
}

void OnPathWatched(int, const Stat*, const void*) {}

void OnChildren(int rc, const String_vector* children, const void* data) {
  Read* read = static_cast<Read*>(const_cast<void*>(data));
  if (rc == ZNONODE) {
    // No election node yet: nobody holds it. A watch on PATH tells when it
    // is made (a child watch needs the node).
    {
      std::lock_guard lock(read->shared->mu);
      if (read->shared->zh != nullptr) {
        zoo_aexists(read->shared->zh, read->path.c_str(), 1, OnPathWatched,
                    nullptr);
      }
    }
    Finish(read, {});
    return;
  }
  if (rc != ZOK || children == nullptr) {
    Failed(read, rc);
    return;
  }
  read->children.assign(children->data, children->data + children->count);
  ReadLowest(read);
}

void OnSynced(int rc, const char*, const void* data) {
  Read* read = static_cast<Read*>(const_cast<void*>(data));
  if (rc != ZOK) {
    Failed(read, rc);
    return;
  }
  ReadChildren(read);
}

class ZooKeeperElection final : public ElectionSource {
 public:
  ZooKeeperElection(asio::io_context& io, const ElectionSpec& spec,
                    std::chrono::milliseconds timeout)
      : spec_(spec), timeout_(timeout), shared_(std::make_shared<Shared>(io)) {
    static std::once_flag log_level;
    std::call_once(log_level, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); });
  }

  ~ZooKeeperElection() override {
    Stop();
    zhandle_t* zh = nullptr;
    {
      std::lock_guard lock(shared_->mu);
      std::swap(zh, shared_->zh);
    }
    if (zh != nullptr) {
      auto* context =
          static_cast<Context*>(const_cast<void*>(zoo_get_context(zh)));
      zookeeper_close(zh);
      delete context;
    }
  }

  void Start(std::function<void()> changed) override {
    shared_->changed = std::move(changed);
    Connect();
  }

  void Stop() override { shared_->stopped = true; }

  Awaitable<ElectionHolder> ReadHolder() override {
    auto waiter = std::make_shared<Waiter>(shared_->io);
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    boost::system::error_code ec;
    // A session being started is waited for, within the timeout.
    std::string not_connected = Connect();
    while (!not_connected.empty() && Connecting() &&
           std::chrono::steady_clock::now() < deadline) {
      waiter->timer.expires_after(std::chrono::milliseconds(10));
      co_await waiter->timer.async_wait(
          asio::redirect_error(kUseAwaitable, ec));
      not_connected = Connect();
    }
    if (!not_connected.empty()) {
      co_return ElectionHolder{std::move(not_connected), std::nullopt, {}};
    }
    waiter->timer.expires_at(deadline);
    auto* read = new Read{shared_, waiter, spec_.path, 0, {}, {}};
    WithHandle(read, [&](zhandle_t* zh) {
      return zoo_async(zh, spec_.path.c_str(), OnSynced, read);
    });
    if (!waiter->done) {
      co_await waiter->timer.async_wait(
          asio::redirect_error(kUseAwaitable, ec));
    }
    if (!waiter->done) {
      co_return ElectionHolder{
          "ZooKeeper did not answer in time", std::nullopt, {}};
    }
    co_return std::move(waiter->holder);
  }

 private:
  bool Connecting() {
    std::lock_guard lock(shared_->mu);
    return shared_->connecting;
  }

  // Starts a session on a thread of its own when there is none (at start,
  // and after one expired). "" when there is one, else why not (yet).
  std::string Connect() {
    std::lock_guard lock(shared_->mu);
    if (shared_->zh != nullptr) return "";
    if (shared_->connecting) return "ZooKeeper: a session is starting";
    shared_->connecting = true;
    std::thread([shared = shared_, hosts = spec_.hosts, digest = spec_.digest] {
      auto* context = new Context(shared);
      zhandle_t* zh = zookeeper_init2(hosts.c_str(), &OnEvent, kSessionMs,
                                      nullptr, context, 0, DiscardLog);
      const int error = errno;
      if (zh != nullptr && !digest.empty()) {
        zoo_add_auth(zh, "digest", digest.data(),
                     static_cast<int>(digest.size()), nullptr, nullptr);
      }
      std::lock_guard lock(shared->mu);
      shared->connecting = false;
      if (zh == nullptr) {
        delete context;
        shared->connect_error = "cannot start a ZooKeeper session with " +
                                hosts + ": " + std::strerror(error);
      } else if (shared->stopped) {
        CloseApart(zh, context);
      } else {
        shared->zh = zh;
      }
    }).detach();
    const std::string last = shared_->connect_error;
    return last.empty() ? "ZooKeeper: a session is starting" : last;
  }

  // The client's watcher, on its thread: a change of the children, PATH
  // made, a (re)connection, or the session's end.
  static void OnEvent(zhandle_t* zh, int type, int state, const char*,
                      void* context) {
    const std::shared_ptr<Shared> shared =
        static_cast<Context*>(context)->lock();
    if (!shared) return;
    const bool expired =
        type == ZOO_SESSION_EVENT &&
        (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE);
    if (expired) {
      // This handle is done: a new session on the next read.
      std::lock_guard lock(shared->mu);
      if (shared->zh == zh) {
        shared->zh = nullptr;
        CloseApart(zh, static_cast<Context*>(context));
      }
    }
    const bool connected =
        type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE;
    if (connected || expired || type == ZOO_CHILD_EVENT ||
        type == ZOO_DELETED_EVENT || type == ZOO_CREATED_EVENT) {
      TellChanged(shared);
    }
  }

  const ElectionSpec spec_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace

std::unique_ptr<ElectionSource> MakeZooKeeperElection(
    asio::io_context& io, const ElectionSpec& spec,
    std::chrono::milliseconds timeout) {
  return std::make_unique<ZooKeeperElection>(io, spec, timeout);
}

}  // namespace fencepost::storage
