// An election held in ZooKeeper (storage/election_source.h): the child of
// PATH with the lowest sequence suffix holds it (the recipes of kazoo,
// Curator and fencepost's own ZooKeeper leases); its token is the node's
// czxid.
//
// ZooKeeper's C client (libzookeeper-mt) runs its own threads: its
// completions and watches only post to the io thread, where everything else
// happens. A read is the client's sync of PATH (so it sees every change the
// leader committed before it), the children of PATH (leaving a watch on
// them), then the lowest child's data and stat.

#include <zookeeper/zookeeper.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
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
// Reads of the children again when the lowest one vanished meanwhile.
constexpr int kMaxAttempts = 8;
// The session timeout asked for (the server bounds it).
constexpr int kSessionMs = 10000;

void DiscardLog(const char*) {}

// What the C client's threads share with the io thread.
struct Shared : std::enable_shared_from_this<Shared> {
  explicit Shared(asio::io_context& io) : io(io) {}
  asio::io_context& io;
  std::mutex mu;
  zhandle_t* zh = nullptr;  // guarded by mu; null: none (or being replaced)
  std::function<void()> changed;  // the io thread's
  bool stopped = false;           // the io thread's
};

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
};

std::string Describe(int rc) { return std::string("ZooKeeper: ") + zerror(rc); }

// Hands `holder` to the waiting coroutine, if it still waits.
void Finish(Read* read, ElectionHolder holder) {
  asio::post(read->shared->io,
             [waiter = read->waiter, holder = std::move(holder)]() mutable {
               const std::shared_ptr<Waiter> w = waiter.lock();
               if (!w || w->done) return;
               w->done = true;
               w->holder = std::move(holder);
               w->timer.cancel();
             });
  delete read;
}

zhandle_t* HandleOf(const Read& read) {
  std::lock_guard lock(read.shared->mu);
  return read.shared->zh;
}

void OnChildren(int rc, const String_vector* children, const void* data);

void ReadChildren(Read* read) {
  zhandle_t* zh = HandleOf(*read);
  const int rc = zh == nullptr ? ZCONNECTIONLOSS
                               : zoo_aget_children(zh, read->path.c_str(), 1,
                                                   OnChildren, read);
  if (rc != ZOK) Finish(read, {Describe(rc), std::nullopt, {}});
}

void OnData(int rc, const char* value, int length, const Stat* stat,
            const void* data) {
  Read* read = static_cast<Read*>(const_cast<void*>(data));
  if (rc == ZNONODE && ++read->attempts < kMaxAttempts) {
    ReadChildren(read);  // the holder left between the two reads
    return;
  }
  if (rc != ZOK || stat == nullptr) {
    Finish(read, {Describe(rc), std::nullopt, {}});
    return;
  }
  ElectionHolder holder;
  holder.token = static_cast<fence::Token>(stat->czxid);
  if (value != nullptr && length > 0) {
    holder.id.assign(value, std::min<std::size_t>(length, kMaxId));
  }
  Finish(read, std::move(holder));
}

void OnChildren(int rc, const String_vector* children, const void* data) {
  Read* read = static_cast<Read*>(const_cast<void*>(data));
  if (rc == ZNONODE) {
    Finish(read, {});  // no election node yet: nobody holds it
    return;
  }
  if (rc != ZOK || children == nullptr) {
    Finish(read, {Describe(rc), std::nullopt, {}});
    return;
  }
  std::vector<std::string_view> names;
  for (int i = 0; i < children->count; ++i)
    names.emplace_back(children->data[i]);
  const std::optional<std::size_t> lowest = fence::LowestSequence(names);
  if (!lowest) {
    Finish(read, {});
    return;
  }
  const std::string child = read->path + "/" + std::string(names[*lowest]);
  zhandle_t* zh = HandleOf(*read);
  const int sent = zh == nullptr ? ZCONNECTIONLOSS
                                 : zoo_aget(zh, child.c_str(), 0, OnData, read);
  if (sent != ZOK) Finish(read, {Describe(sent), std::nullopt, {}});
}

void OnSynced(int rc, const char*, const void* data) {
  Read* read = static_cast<Read*>(const_cast<void*>(data));
  if (rc != ZOK) {
    Finish(read, {Describe(rc), std::nullopt, {}});
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
    shared_->stopped = true;
    zhandle_t* zh = nullptr;
    {
      std::lock_guard lock(shared_->mu);
      std::swap(zh, shared_->zh);
    }
    if (zh != nullptr) zookeeper_close(zh);
  }

  void Start(std::function<void()> changed) override {
    shared_->changed = std::move(changed);
    Connect();
  }

  void Stop() override { shared_->stopped = true; }

  Awaitable<ElectionHolder> ReadHolder() override {
    if (!Connect()) {
      co_return ElectionHolder{"cannot start a ZooKeeper session with " +
                                   spec_.hosts + ": " + std::strerror(errno),
                               std::nullopt,
                               {}};
    }
    auto waiter = std::make_shared<Waiter>(shared_->io);
    waiter->timer.expires_after(timeout_);
    auto* read = new Read{shared_, waiter, spec_.path, 0};
    zhandle_t* zh = HandleOf(*read);
    const int rc = zh == nullptr
                       ? ZCONNECTIONLOSS
                       : zoo_async(zh, spec_.path.c_str(), OnSynced, read);
    if (rc != ZOK) {
      delete read;
      co_return ElectionHolder{Describe(rc), std::nullopt, {}};
    }
    boost::system::error_code ec;
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
  // Starts a session when there is none: at start, and after one expired.
  // False when the client could not start one.
  bool Connect() {
    std::lock_guard lock(shared_->mu);
    if (shared_->zh != nullptr) return true;
    zhandle_t* zh = zookeeper_init2(spec_.hosts.c_str(), &OnEvent, kSessionMs,
                                    nullptr, shared_.get(), 0, DiscardLog);
    if (zh == nullptr) return false;
    if (!spec_.digest.empty()) {
      zoo_add_auth(zh, "digest", spec_.digest.data(),
                   static_cast<int>(spec_.digest.size()), nullptr, nullptr);
    }
    shared_->zh = zh;
    return true;
  }

  // The client's watcher, on its thread: a change of the children, a
  // (re)connection, or the session's end.
  static void OnEvent(zhandle_t* zh, int type, int state, const char*,
                      void* context) {
    auto* shared = static_cast<Shared*>(context);
    const bool expired =
        type == ZOO_SESSION_EVENT &&
        (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE);
    if (expired) {
      // This handle is done: a new session on the next read. Closed by a
      // thread of its own (never from the client's own threads).
      std::lock_guard lock(shared->mu);
      if (shared->zh == zh) {
        shared->zh = nullptr;
        std::thread([zh] { zookeeper_close(zh); }).detach();
      }
    }
    const bool connected =
        type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE;
    if (connected || expired || type == ZOO_CHILD_EVENT ||
        type == ZOO_DELETED_EVENT || type == ZOO_CREATED_EVENT) {
      asio::post(shared->io, [weak = shared->weak_from_this()] {
        const std::shared_ptr<Shared> alive = weak.lock();
        if (alive && !alive->stopped && alive->changed) alive->changed();
      });
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
