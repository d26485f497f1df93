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

// LMDB 0.9's meta page: a 16-byte page header, then MDB_meta.
constexpr std::size_t kMetaAt = 16;
constexpr std::size_t kMetaBytes = 152;  // sizeof(MDB_meta) on 64 bits
constexpr std::size_t kMagicAt = 16;
constexpr std::size_t kPageSizeAt = 40;  // mm_dbs[FREE_DBI].md_pad
constexpr std::size_t kTxnidAt = 144;
constexpr std::uint32_t kMagic = 0xBEEFC0DE;
constexpr std::size_t kRecordBytes = 12;  // txnid, CRC-32C

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

std::string Encode(std::uint64_t txnid) {
  std::string record(kRecordBytes, '\0');
  StoreBigEndian(record.data(), txnid, 8);
  StoreBigEndian(record.data() + 8, Crc32c(std::string_view(record.data(), 8)),
                 4);
  return record;
}

// The checkpoint recorded in `path`; false when there is no file.
bool ReadRecorded(const std::string& path, std::uint64_t* txnid) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw Failure("cannot open", path, errno);
  }
  char record[kRecordBytes];
  const bool read = ReadAll(fd, record, sizeof record, 0);
  ::close(fd);
  if (!read ||
      LoadBigEndian(record + 8, 4) != Crc32c(std::string_view(record, 8))) {
    throw std::runtime_error(path +
                             " is torn or corrupt: the last synced LMDB "
                             "checkpoint is unknown; refusing to start");
  }
  *txnid = LoadBigEndian(record, 8);
  return true;
}

}  // namespace

std::uint64_t CheckpointFile::RollBack(const std::string& dir) {
  std::uint64_t recorded = 0;
  if (!ReadRecorded(dir + "/checkpoint", &recorded)) return 0;
  const std::string path = dir + "/data.mdb";
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Failure("cannot open", path, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  char first[kMetaAt + kMetaBytes];
  if (!ReadAll(fd, first, sizeof first, 0) ||
      Field<std::uint32_t>(first, kMagicAt) != kMagic) {
    throw std::runtime_error(path + " is not an LMDB 0.9 file");
  }
  const auto page_size = Field<std::uint32_t>(first, kPageSizeAt);
  char second[kMetaAt + kMetaBytes];
  if (page_size < sizeof first ||
      !ReadAll(fd, second, sizeof second, static_cast<off_t>(page_size)) ||
      Field<std::uint32_t>(second, kMagicAt) != kMagic) {
    throw std::runtime_error(path + " is not an LMDB 0.9 file");
  }
  char* metas[2] = {first, second};
  const std::uint64_t txnids[2] = {Field<std::uint64_t>(first, kTxnidAt),
                                   Field<std::uint64_t>(second, kTxnidAt)};
  const int newer = txnids[1] > txnids[0] ? 1 : 0;
  if (txnids[newer] <= recorded) return 0;
  if (txnids[1 - newer] > recorded) {
    throw std::runtime_error(path + ": both meta pages are above checkpoint " +
                             std::to_string(recorded) +
                             " recorded as synced; refusing to start");
  }
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
  if (fd_ >= 0) return;
  if (errno != ENOENT) throw Failure("cannot open", path_, errno);
  // Written whole under another name, synced, renamed into place and the
  // directory synced: it exists only with a record in it.
  const std::string temp = path_ + ".tmp";
  const int fd =
      ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Failure("cannot create", temp, errno);
  const std::string record = Encode(synced);
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

int CheckpointFile::Record(std::uint64_t txnid) {
  // 12 bytes at the start of one sector: written whole or not at all.
  const std::string record = Encode(txnid);
  if (!WriteAll(fd_, record.data(), record.size(), 0)) {
    return errno != 0 ? errno : EIO;
  }
  return ::fdatasync(fd_) != 0 ? errno : 0;
}

}  // namespace fencepost::fence
