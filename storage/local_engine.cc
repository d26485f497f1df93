#include "storage/local_engine.h"

#include "fence/env.h"
#include "fence/shards.h"
#include "storage/commit_loop.h"
#include "storage/lmdb_backend.h"
#include "storage/local_fences.h"

namespace fencepost::storage {

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
  shards.committer.answer_before_sync = options.answer_before_sync;
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
