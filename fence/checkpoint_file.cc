#include "fence/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "fence/big_endian.h"
#include "fence/wal.h"

namespace fencepost::fence {
namespace {

// LMDB 0.9's meta page: a 16-byte page header (its flags at 10), then
// MDB_meta.
constexpr std::size_t kFlagsAt = 10;
constexpr std::uint16_t kMetaFlag = 0x08;  // P_META
constexpr std::size_t kMetaAt = 16;
constexpr std::size_t kMetaBytes = 136;  // sizeof(MDB_meta) on 64 bits
constexpr std::size_t kMagicAt = 16;
constexpr std::size_t kVersionAt = 20;
constexpr std::uint32_t kVersion = 1;    // MDB_DATA_VERSION
constexpr std::size_t kPageSizeAt = 40;  // mm_dbs[FREE_DBI].md_pad
constexpr std::size_t kTxnidAt = 144;
constexpr std::uint32_t kMagic = 0xBEEFC0DE;
// The transaction id, whether its commit is in flight (1) or synced (0),
// and a CRC-32C of the two.
constexpr std::size_t kRecordBytes = 13;

std::runtime_error Failure(const std::string& what, const std::string& path,
                           int error) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(error));
}

// Host-order fields, as LMDB writes them.
template <typename T>
T Field(const char* page, std::size_t at) {
  T value;
  std::memcpy(&value, page + at, sizeof value);
  return value;
}

// All of `size` bytes at `at` through pread or pwrite (`io`).
template <typename Io, typename Data>
bool Whole(Io io, int fd, Data data, std::size_t size, off_t at) {
  while (size > 0) {
    const ssize_t n = io(fd, data, size, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
    at += n;
  }
  return true;
}

bool ReadAll(int fd, char* data, std::size_t size, off_t at) {
  return Whole(::pread, fd, data, size, at);
}

bool WriteAll(int fd, const char* data, std::size_t size, off_t at) {
  return Whole(::pwrite, fd, data, size, at);
}

// Whether `page` is an LMDB 0.9 meta page.
bool IsMeta(const char* page) {
  return (Field<std::uint16_t>(page, kFlagsAt) & kMetaFlag) != 0 &&
         Field<std::uint32_t>(page, kMagicAt) == kMagic &&
         Field<std::uint32_t>(page, kVersionAt) == kVersion;
}

// Throws unless no other process has the environment in `dir` open: LMDB
// holds a shared lock on the first byte of lock.mdb while it is open. A
// reader (mdb_copy, mdb_dump) left from before the crash would otherwise
// read pages the rolled-back commit's successors reuse.
void ExpectAlone(const std::string& dir) {
  const std::string path = dir + "/lock.mdb";
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return;
    throw Failure("cannot open", path, errno);
  }
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 1;
  const bool alone = ::fcntl(fd, F_SETLK, &lock) == 0;
  ::close(fd);  // drops the lock before LMDB takes its own
  if (!alone) {
    throw std::runtime_error(
        dir +
        ": LMDB's last commit was never synced and must be rolled back, "
        "but another process has the environment open (a backup with "
        "mdb_copy?): stop it, then start fencepost again");
  }
}

std::string Encode(std::uint64_t txnid, bool in_flight) {
  std::string record(kRecordBytes, '\0');
  StoreBigEndian(record.data(), txnid, 8);
  record[8] = in_flight ? 1 : 0;
  StoreBigEndian(record.data() + 9, Crc32c(std::string_view(record.data(), 9)),
                 4);
  return record;
}

struct Recorded {
  std::uint64_t txnid = 0;
  bool in_flight = false;
};

// What `path` records; false when there is no file.
bool ReadRecorded(const std::string& path, Recorded* recorded) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw Failure("cannot open", path, errno);
  }
  char record[kRecordBytes];
  const bool read = ReadAll(fd, record, sizeof record, 0);
  ::close(fd);
  if (!read || record[8] > 1 ||
      LoadBigEndian(record + 9, 4) != Crc32c(std::string_view(record, 9))) {
    throw std::runtime_error(path +
                             " is torn or corrupt: the last synced LMDB "
                             "checkpoint is unknown; refusing to start");
  }
  recorded->txnid = LoadBigEndian(record, 8);
  recorded->in_flight = record[8] == 1;
  return true;
}

}  // namespace

std::uint64_t CheckpointFile::RollBack(const std::string& dir) {
  // Only a commit recorded in flight may be torn: a commit made after a
  // synced checkpoint (by LMDB's own tools, synced) stands.
  Recorded recorded;
  if (!ReadRecorded(dir + "/checkpoint", &recorded) || !recorded.in_flight) {
    return 0;
  }
  const std::string path = dir + "/data.mdb";
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Failure("cannot open", path, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  char first[kMetaAt + kMetaBytes];
  if (!ReadAll(fd, first, sizeof first, 0) || !IsMeta(first)) {
    throw std::runtime_error(path + " is not an LMDB 0.9 file");
  }
  const auto page_size = Field<std::uint32_t>(first, kPageSizeAt);
  char second[kMetaAt + kMetaBytes];
  if (page_size < sizeof first ||
      !ReadAll(fd, second, sizeof second, static_cast<off_t>(page_size)) ||
      !IsMeta(second)) {
    throw std::runtime_error(path + " is not an LMDB 0.9 file");
  }
  char* metas[2] = {first, second};
  const std::uint64_t txnids[2] = {Field<std::uint64_t>(first, kTxnidAt),
                                   Field<std::uint64_t>(second, kTxnidAt)};
  const int newer = txnids[1] > txnids[0] ? 1 : 0;
  if (txnids[newer] < recorded.txnid) return 0;  // it never reached a meta
  if (txnids[newer] > recorded.txnid || txnids[1 - newer] >= recorded.txnid) {
    throw std::runtime_error(
        path + ": its meta pages (transactions " + std::to_string(txnids[0]) +
        " and " + std::to_string(txnids[1]) + ") do not follow checkpoint " +
        std::to_string(recorded.txnid) +
        " recorded in flight; refusing to start");
  }
  ExpectAlone(dir);
  // The older meta page is the synced checkpoint: it takes the newer's
  // place too, so LMDB opens it whichever it picks.
  if (!WriteAll(fd, metas[1 - newer] + kMetaAt, kMetaBytes,
                static_cast<off_t>(newer * page_size + kMetaAt)) ||
      ::fdatasync(fd) != 0) {
    throw Failure("cannot roll back the meta page of", path, errno);
  }
  return txnids[newer];
}

CheckpointFile::CheckpointFile(const std::string& dir, std::uint64_t synced)
    : path_(dir + "/checkpoint") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ >= 0) {
    if (int e = Record(synced); e != 0) {
      ::close(fd_);
      throw Failure("cannot write", path_, e);
    }
    return;
  }
  if (errno != ENOENT) throw Failure("cannot open", path_, errno);
  // Written whole under another name, synced, renamed into place and the
  // directory synced: it exists only with a record in it.
  const std::string temp = path_ + ".tmp";
  const int fd =
      ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Failure("cannot create", temp, errno);
  const std::string record = Encode(synced, false);
  if (!WriteAll(fd, record.data(), record.size(), 0) || ::fsync(fd) != 0 ||
      ::rename(temp.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    ::close(fd);
    throw Failure("cannot write", temp, e);
  }
  const int parent = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent < 0 || ::fsync(parent) != 0) {
    const int e = errno;
    if (parent >= 0) ::close(parent);
    ::close(fd);
    throw Failure("cannot sync the directory of", path_, e);
  }
  ::close(parent);
  fd_ = fd;
}

CheckpointFile::~CheckpointFile() {
  if (fd_ >= 0) ::close(fd_);
}

int CheckpointFile::Begin(std::uint64_t txnid) { return Write(txnid, true); }

int CheckpointFile::Record(std::uint64_t txnid) { return Write(txnid, false); }

int CheckpointFile::Write(std::uint64_t txnid, bool in_flight) {
  // 13 bytes at the start of one sector: written whole or not at all.
  const std::string record = Encode(txnid, in_flight);
  if (!WriteAll(fd_, record.data(), record.size(), 0)) {
    return errno != 0 ? errno : EIO;
  }
  return ::fdatasync(fd_) != 0 ? errno : 0;
}

}  // namespace fencepost::fence
