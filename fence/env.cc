#include "fence/env.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "fence/big_endian.h"

namespace fencepost::fence {
namespace {

std::runtime_error LmdbFailure(const std::string& what, int rc) {
  return std::runtime_error(what + ": " + mdb_strerror(rc));
}

constexpr std::string_view kFormatKey = "format";

// Checks the environment's format in `meta` and records kFormat when it is
// older: a new environment, one of format 2, or one written before formats
// were recorded (format 1). This release reads the records of both as they
// are, and a release that would not read the records written from now on
// refuses the environment. Returns the format found (1 for none); 0 with
// *rc set on an LMDB error.
std::uint64_t CheckFormat(MDB_txn* txn, MDB_dbi meta, MDB_dbi fences, int* rc) {
  MDB_val key{kFormatKey.size(), const_cast<char*>(kFormatKey.data())};
  MDB_val data;
  std::uint64_t found = 0;
  bool recorded = false;
  *rc = mdb_get(txn, meta, &key, &data);
  if (*rc == 0 && data.mv_size == 8) {
    found = LoadBigEndian(static_cast<const char*>(data.mv_data), 8);
    recorded = true;
  } else if (*rc == MDB_NOTFOUND) {
    MDB_stat stat;
    if ((*rc = mdb_stat(txn, fences, &stat)) != 0) return 0;
    found = stat.ms_entries > 0 ? 1 : Env::kFormat;
  } else {
    if (*rc == 0) *rc = MDB_CORRUPTED;
    return 0;
  }
  *rc = 0;
  if (recorded && found >= Env::kFormat) return found;
  char version[8];
  StoreBigEndian(version, Env::kFormat, 8);
  data = {8, version};
  if ((*rc = mdb_put(txn, meta, &key, &data, 0)) != 0) return 0;
  return found;
}

// Below this much free space the file system of a data directory counts as
// full: LMDB's short write there reports EIO, not ENOSPC.
constexpr std::uint64_t kFullBelowBytes = 4u << 20;

// Free bytes for unprivileged writers on the file system of `dir`, or the
// largest value when that cannot be told.
std::uint64_t FreeBytes(const std::string& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

}  // namespace

std::string Env::Explain(int rc) const {
  const std::uint64_t free = FreeBytes(dir_);
  if ((rc == EIO || rc == ENOSPC) && free < kFullBelowBytes) {
    return std::string("no space left on device (ENOSPC") +
           (rc == EIO ? ", reported as EIO by a short write" : "") +
           "): the file system of " + dir_ + " has " + std::to_string(free) +
           " bytes free; the acknowledged writes are kept in its write-ahead "
           "log: free space there, then start fencepost again";
  }
  return mdb_strerror(rc);
}

bool Env::DiskHolds(std::uint64_t bytes) const {
  return FreeBytes(dir_) >= bytes + kFullBelowBytes;
}

Env::Env(const Options& options)
    : dir_(options.dir), max_map_size_(options.max_map_size) {
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec || !std::filesystem::is_directory(options.dir)) {
    throw std::runtime_error(
        "data directory " + options.dir +
        " is not usable: " + (ec ? ec.message() : "not a directory"));
  }
  // Before LMDB reads the file: a commit whose sync never finished is
  // not opened.
  rolled_back_ = CheckpointFile::RollBack(options.dir);
  if (int rc = mdb_env_create(&env_); rc != 0) {
    throw LmdbFailure("mdb_env_create", rc);
  }
  try {
    map_size_ = std::min(options.initial_map_size, max_map_size_);
    if (int rc = mdb_env_set_mapsize(env_, map_size_); rc != 0) {
      throw LmdbFailure("mdb_env_set_mapsize", rc);
    }
    if (int rc = mdb_env_set_maxdbs(env_, 8); rc != 0) {
      throw LmdbFailure("mdb_env_set_maxdbs", rc);
    }
    // Default flags on purpose: every commit is synced before it returns.
    if (int rc = mdb_env_open(env_, options.dir.c_str(), 0, 0644); rc != 0) {
      throw LmdbFailure("cannot open LMDB environment in " + options.dir, rc);
    }
    MDB_envinfo info;
    mdb_env_info(env_, &info);
    map_size_ = info.me_mapsize;

    MDB_txn* txn = nullptr;
    if (int rc = mdb_txn_begin(env_, nullptr, 0, &txn); rc != 0) {
      throw LmdbFailure("mdb_txn_begin", rc);
    }
    int rc = mdb_dbi_open(txn, "fences", MDB_CREATE, &fences_);
    if (rc == 0) rc = mdb_dbi_open(txn, "values", MDB_CREATE, &values_);
    if (rc == 0) rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &meta_);
    if (rc == 0) rc = mdb_dbi_open(txn, "leases", MDB_CREATE, &leases_);
    if (rc == 0) format_found_ = CheckFormat(txn, meta_, fences_, &rc);
    if (rc == 0 && format_found_ > kFormat) {
      mdb_txn_abort(txn);
      throw std::runtime_error(
          "the LMDB environment in " + options.dir +
          " was written by a newer release of fencepost (data format " +
          std::to_string(format_found_) + "; this release reads formats 1 to " +
          std::to_string(kFormat) +
          "): serve it with that release or a later one");
    }
    if (rc == 0) {
      rc = mdb_txn_commit(txn);
    } else {
      mdb_txn_abort(txn);
    }
    if (rc != 0) throw LmdbFailure("cannot open the fence databases", rc);
    // That commit was synced: it is the checkpoint from which the
    // applier's commits, which LMDB does not sync, go on.
    mdb_env_info(env_, &info);
    checkpoint_ =
        std::make_unique<CheckpointFile>(options.dir, info.me_last_txnid);
    if (int e = mdb_env_set_flags(env_, MDB_NOSYNC, 1); e != 0) {
      throw LmdbFailure("mdb_env_set_flags", e);
    }
  } catch (...) {
    mdb_env_close(env_);
    throw;
  }
}

Env::~Env() { mdb_env_close(env_); }

std::uint64_t Env::used_bytes() const {
  std::shared_lock lock(resize_mutex_);
  return used_bytes_in_txn();
}

std::uint64_t Env::used_bytes_in_txn() const {
  MDB_envinfo info;
  MDB_stat stat;
  if (mdb_env_info(env_, &info) != 0 || mdb_env_stat(env_, &stat) != 0) {
    return 0;
  }
  return (static_cast<std::uint64_t>(info.me_last_pgno) + 1) * stat.ms_psize;
}

int Env::fd() const {
  mdb_filehandle_t fd = -1;
  mdb_env_get_fd(env_, &fd);
  return fd;
}

int Env::SyncCheckpoint(std::uint64_t txnid, bool sync) {
  if (int rc = sync ? mdb_env_sync(env_, 1) : 0; rc != 0) return rc;
  return checkpoint_->Record(txnid);
}

unsigned Env::flags() const {
  unsigned flags = 0;
  mdb_env_get_flags(env_, &flags);
  return flags;
}

bool Env::Grow() {
  if (map_size_ >= max_map_size_) return false;
  const std::uint64_t next = std::min(max_map_size_, map_size_.load() * 2);
  std::unique_lock lock(resize_mutex_);
  if (mdb_env_set_mapsize(env_, next) != 0) return false;
  map_size_ = next;
  return true;
}

Env::ReadTxn::ReadTxn(const Env& env) : lock_(env.resize_mutex_) {
  rc_ = mdb_txn_begin(env.env_, nullptr, MDB_RDONLY, &txn_);
  if (rc_ != 0) txn_ = nullptr;
}

Env::ReadTxn::~ReadTxn() {
  if (txn_ != nullptr) mdb_txn_abort(txn_);
}

}  // namespace fencepost::fence
