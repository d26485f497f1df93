#include "fence/shards.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>

#include "fence/long_keys.h"
#include "fence/values.h"

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

// DIR/shards in the form this release writes: a first line no release
// before data format 3 can read as a count (they read the file with
// `in >> count` and refuse to start on anything else), then the count.
// Those releases do not know that a value record may keep its key's fence
// (fence/values.h): served by one of them, a directory of format 3 would
// show fences below the tokens they reached (docs/operations.md,
// "Rolling back").
constexpr std::string_view kShardsHeader = "fencepost-shards format=3\n";

std::string ShardsFile(std::size_t count) {
  return std::string(kShardsHeader) + std::to_string(count) + "\n";
}

// The count in the text of DIR/shards, in this release's form or the bare
// count of the releases before it; 0 when the text holds neither.
std::size_t ParseShardsFile(std::string_view text) {
  const bool ours = text.substr(0, kShardsHeader.size()) == kShardsHeader;
  if (ours) text.remove_prefix(kShardsHeader.size());
  if (text.empty() || text.back() != '\n') return 0;
  text.remove_suffix(1);
  std::size_t count = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec != std::errc() || end != text.data() + text.size()) return 0;
  return count;
}

// Reads DIR/shards, or writes it (durably, atomically) for a new directory.
// A count in the bare form of the releases before format 3 is rewritten in
// this release's form before any environment is opened (and so upgraded).
std::size_t ShardCount(const std::string& dir, std::size_t wanted) {
  const fs::path file = fs::path(dir) / "shards";
  std::error_code ec;
  if (fs::exists(file, ec)) {
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    const std::size_t count = ParseShardsFile(text);
    if (count < 1 || count > Shards::kMaxCount) {
      if (text.rfind("fencepost-shards ", 0) == 0) {
        throw Unusable(dir, file.string() +
                                " was written by a newer release of "
                                "fencepost: start that release, or restore "
                                "a backup made by this one");
      }
      throw Unusable(dir, file.string() + " does not hold a shard count");
    }
    if (text != ShardsFile(count))
      ReplaceFile(dir, "shards", ShardsFile(count));
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
  ReplaceFile(dir, "shards", ShardsFile(wanted));
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
  // shrinks with the shard count so a new directory stays small. So does
  // each shard's share of the memory unapplied records may hold.
  Committer::Options committer = options.committer;
  committer.segment_bytes =
      std::max<std::size_t>(2u << 20, committer.segment_bytes / count);
  committer.max_unapplied_bytes =
      std::max<std::size_t>(64u << 10, committer.max_unapplied_bytes / count);
  committer.lease_limit = nullptr;
  if (options.max_leases > 0) {
    lease_limit_ = std::make_unique<LeaseLimit>(options.max_leases);
    for (auto& env : envs_) lease_limit_->Watch(&env->lease_table());
    committer.lease_limit = lease_limit_.get();
  }
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

namespace {

// The keys under `prefix` that hold a value in `env`, logged or applied.
std::vector<std::string> ValuesUnder(const Env& env, std::string_view prefix) {
  std::map<std::string, bool, std::less<>> logged;
  std::vector<std::string> keys;
  auto lock = env.overlay().Lock();
  for (auto& [key, present] : env.overlay().ValuesUnder(prefix)) {
    logged.emplace(std::move(key), present);
  }
  Env::ReadTxn txn(env);
  lock.unlock();
  if (txn.get() == nullptr) {
    throw std::runtime_error("cannot read " + env.dir() + ": " +
                             mdb_strerror(txn.error()));
  }
  const int rc =
      ForEachValueUnder(txn.get(), env.values(), prefix,
                        [&](std::string_view name, const StoredValue&) {
                          if (!logged.contains(name)) keys.emplace_back(name);
                        });
  if (rc != 0) {
    throw std::runtime_error("cannot read the values of " + env.dir() + ": " +
                             mdb_strerror(rc));
  }
  for (auto& [name, present] : logged) {
    if (present) keys.push_back(name);
  }
  return keys;
}

// Prefixes served by one of `a` and `b` and not the other, except those
// under another of them (whose keys the wider one covers).
std::vector<std::string> ChangedPrefixes(const Scopes& a, const Scopes& b) {
  std::vector<std::string> changed;
  for (const auto& [from, to] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    for (const std::string& prefix : from->prefixes()) {
      if (!to->IsScope(prefix)) changed.push_back(prefix);
    }
  }
  std::erase_if(changed, [&](const std::string& prefix) {
    return std::any_of(changed.begin(), changed.end(), [&](const auto& wider) {
      return wider.size() < prefix.size() && prefix.starts_with(wider);
    });
  });
  return changed;
}

}  // namespace

std::string Shards::RefuseScopeChange(const Scopes& before,
                                      const Scopes& after) const {
  if (envs_.size() == 1) return {};
  std::vector<std::string> stranded;
  std::size_t count = 0;
  for (const std::string& prefix : ChangedPrefixes(before, after)) {
    for (std::size_t i = 0; i < envs_.size(); ++i) {
      for (const std::string& key : ValuesUnder(*envs_[i], prefix)) {
        if (IndexOf(after.FenceFor(key)) == i) continue;
        if (stranded.size() < 3) stranded.push_back(key);
        ++count;
      }
    }
  }
  if (count == 0) return {};
  std::string examples;
  for (const std::string& key : stranded) {
    examples += (examples.empty() ? "" : ", ") + key;
  }
  return "the --fence-scope flags differ from those the data directory " +
         dir_ + " was last served with, and " + std::to_string(count) +
         " stored value" + (count == 1 ? "" : "s") + " (" + examples +
         (count > stranded.size() ? ", ..." : "") +
         ") would then be guarded by a fence in another of its " +
         std::to_string(envs_.size()) + " shards than the one that holds " +
         (count == 1 ? "it" : "them") + ", where no read would find " +
         (count == 1 ? "it" : "them") + ". Serve with the scopes of " + dir_ +
         "/scopes, or delete those values first (a directory of one shard "
         "can change its scopes freely)";
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
