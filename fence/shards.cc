#include "fence/shards.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "fence/long_keys.h"

namespace fencepost::fence {
namespace {

namespace fs = std::filesystem;

std::runtime_error Unusable(const std::string& dir, const std::string& why) {
  return std::runtime_error("data directory " + dir + " is not usable: " + why);
}

void SyncPath(const fs::path& path, const std::string& dir) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw Unusable(dir, "cannot sync " + path.string() + ": " + why);
  }
  ::close(fd);
}

// Writes DIR/NAME durably and atomically: a crash leaves the old file or
// the new one.
void ReplaceFile(const std::string& dir, const std::string& name,
                 std::string_view content) {
  const fs::path file = fs::path(dir) / name;
  const fs::path temp = fs::path(dir) / (name + ".tmp");
  {
    std::ofstream out(temp, std::ios::trunc | std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out.flush()) throw Unusable(dir, "cannot write " + temp.string());
  }
  SyncPath(temp, dir);
  std::error_code ec;
  fs::rename(temp, file, ec);
  if (ec) throw Unusable(dir, "cannot create " + file.string());
  SyncPath(dir, dir);
}

// Reads DIR/shards, or writes it (durably, atomically) for a new directory.
std::size_t ShardCount(const std::string& dir, std::size_t wanted) {
  const fs::path file = fs::path(dir) / "shards";
  std::error_code ec;
  if (fs::exists(file, ec)) {
    std::ifstream in(file);
    std::size_t count = 0;
    if (!(in >> count) || count < 1 || count > Shards::kMaxCount) {
      throw Unusable(dir, file.string() + " does not hold a shard count");
    }
    return count;
  }
  if (fs::exists(fs::path(dir) / "data.mdb", ec)) {
    throw Unusable(dir,
                   "it holds a single LMDB environment of fencepost 0.1; "
                   "start with an empty directory");
  }
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw Unusable(dir, ec ? ec.message() : "not a directory");
  }
  ReplaceFile(dir, "shards", std::to_string(wanted) + "\n");
  return wanted;
}

}  // namespace

Shards::Shards(const Options& options)
    : dir_(options.dir), steady_now_(options.committer.steady_now) {
  if (options.count < 1 || options.count > kMaxCount) {
    throw std::runtime_error("the shard count must be 1 to " +
                             std::to_string(kMaxCount));
  }
  const std::size_t count = ShardCount(options.dir, options.count);
  const std::uint64_t cap = options.max_map_size / count;
  for (std::size_t i = 0; i < count; ++i) {
    envs_.push_back(std::make_unique<Env>(Env::Options{
        (fs::path(options.dir) / ("shard-" + std::to_string(i))).string(),
        cap}));
  }
  // The log's segments are zero-filled when a shard is created: their size
  // shrinks with the shard count so a new directory stays small.
  Committer::Options committer = options.committer;
  committer.segment_bytes =
      std::max<std::size_t>(2u << 20, committer.segment_bytes / count);
  for (auto& env : envs_) {
    committers_.push_back(std::make_unique<Committer>(*env, committer));
  }
}

Shards::~Shards() { Stop(); }

ScopeRecord Shards::RecordedScopes() const {
  const fs::path file = fs::path(dir_) / "scopes";
  std::error_code ec;
  const bool exists = fs::exists(file, ec);
  if (ec) throw Unusable(dir_, "cannot look for " + file.string());
  if (!exists) return {};
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  if (!in.is_open() || in.bad()) {
    throw Unusable(dir_, "cannot read " + file.string());
  }
  std::optional<ScopeRecord> record = DecodeScopeRecord(bytes);
  if (!record) {
    throw Unusable(dir_, file.string() + " does not hold a scope record");
  }
  return *record;
}

void Shards::RecordScopes(const ScopeRecord& record) const {
  ReplaceFile(dir_, "scopes", EncodeScopeRecord(record));
}

std::size_t Shards::IndexOf(std::string_view fence) const {
  return ShardOf(fence, envs_.size());
}

bool Shards::Readable() const {
  for (const auto& env : envs_) {
    Env::ReadTxn txn(*env);
    if (txn.get() == nullptr) return false;
  }
  return true;
}

std::vector<const Env*> Shards::envs() const {
  std::vector<const Env*> out;
  for (const auto& env : envs_) out.push_back(env.get());
  return out;
}

void Shards::Stop() {
  for (auto& committer : committers_) committer->Stop();
}

}  // namespace fencepost::fence
