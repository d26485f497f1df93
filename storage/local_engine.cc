#include "storage/local_engine.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <stdexcept>
#include <utility>

#include "fence/committer.h"
#include "fence/env.h"
#include "fence/shards.h"
#include "storage/lmdb_backend.h"
#include "storage/local_fences.h"

namespace fencepost::storage {
namespace {

namespace asio = boost::asio;

// Calls `ready` each time the descriptor turns readable; keeps itself alive
// through its pending wait, so it lasts as long as the io_context runs.
//
// A watch is not work of its own: io_context::run returns once everything
// else is done (the server drained), whether or not a watch is pending. A
// write waiting for its sync keeps the loop running through its own work
// guard (AsyncSubmit), so its completion is still watched for.
class Watch : public std::enable_shared_from_this<Watch> {
 public:
  Watch(asio::io_context& io, int fd, std::function<void()> ready)
      : io_(io), descriptor_(io, fd), ready_(std::move(ready)) {}

  // Call from a handler running on the loop (never while the count of
  // outstanding work could reach zero before the wait is counted).
  void Arm() {
    descriptor_.async_wait(
        asio::posix::stream_descriptor::wait_read,
        [self = shared_from_this()](const boost::system::error_code& ec) {
          // The loop counts this completion off; count it back first.
          self->io_.get_executor().on_work_started();
          if (ec) return;
          self->ready_();
          self->Arm();
        });
    io_.get_executor().on_work_finished();
  }

 private:
  asio::io_context& io_;
  asio::posix::stream_descriptor descriptor_;
  std::function<void()> ready_;
};

// Drives the LMDB committers from `io`'s thread (fence::Committer::Loop):
// a write is decided, logged, synced through io_uring and answered on the
// thread that read it. The watches last as long as `io` does.
fence::Committer::Options::Loop CommitLoopOn(asio::io_context& io) {
  fence::Committer::Options::Loop loop;
  loop.post = [&io](std::function<void()> fn) {
    asio::post(io, std::move(fn));
  };
  loop.watch = [&io](int fd, std::function<void()> ready) {
    // Its own descriptor: the committer closes its own when it stops.
    const int own = ::dup(fd);
    if (own < 0) throw std::runtime_error("cannot watch the committer's fds");
    // Armed from a posted handler, which holds the loop's work meanwhile.
    auto watch = std::make_shared<Watch>(io, own, std::move(ready));
    asio::post(io, [watch] { watch->Arm(); });
  };
  return loop;
}

}  // namespace

static_assert(kDefaultLmdbShards == fence::Shards::kDefaultCount);
static_assert(kMaxLmdbShards == fence::Shards::kMaxCount);

LocalEngine::LocalEngine(const Options& options) : dir_(options.dir) {
  fence::Shards::Options shards;
  shards.dir = options.dir;
  shards.max_map_size = options.max_map_size;
  shards.count = options.shards;
  shards.max_leases = options.max_leases;
  shards.committer.on_fatal = options.on_fatal;
  if (options.max_queue_writes) {
    shards.committer.max_queue_writes = *options.max_queue_writes;
  }
  if (options.segment_bytes) {
    // Shards divides it among the shards.
    shards.committer.segment_bytes = *options.segment_bytes;
  }
  if (options.max_unapplied_bytes) {
    shards.committer.max_unapplied_bytes = *options.max_unapplied_bytes;
  }
  shards.committer.answer_before_sync = options.answer_before_sync;
  shards.committer.checkpoint_without_sync = options.checkpoint_without_sync;
  shards.committer.loop = CommitLoopOn(*options.io);
  // The engine notices leases that run out, whether or not anyone asks.
  shards.committer.on_lease_expired = [this, changes = options.changes](
                                          const std::string& name,
                                          const fence::LeaseRecord& lease) {
    if (changes) changes(LeaseExpired(name, lease, shards_->SteadyNow()));
  };
  shards_ = std::make_unique<fence::Shards>(shards);
  fences_ = std::make_unique<LocalFences>(*shards_);
  fences_->TellChanges(options.changes);
}

LocalEngine::~LocalEngine() { Stop(); }

std::size_t LocalEngine::shard_count() const { return shards_->size(); }

std::unique_ptr<Backend> LocalEngine::MakeBackend() {
  return std::make_unique<LmdbBackend>(*shards_, *fences_);
}

std::string LocalEngine::sync_fallback() const {
  return shards_->committer(0).sync_fallback();
}

std::vector<std::string> LocalEngine::Notices(std::size_t asked_shards) const {
  std::vector<std::string> out;
  for (const fence::Env* env : shards_->envs()) {
    if (env->format_found() == fence::Env::kFormat) continue;
    out.push_back(
        env->dir() + ": upgraded in place from data format " +
        std::to_string(env->format_found()) + " to " +
        std::to_string(fence::Env::kFormat) +
        (env->format_found() < 2
             ? " (entity tags); its values keep the tag \"0\" until they are "
               "next written"
             : ""));
  }
  if (shards_->size() != asked_shards) {
    out.push_back(dir_ + " keeps the " + std::to_string(shards_->size()) +
                  " LMDB shards it was created with");
  }
  return out;
}

void LocalEngine::Stop() {
  if (shards_) shards_->Stop();
}

}  // namespace fencepost::storage
