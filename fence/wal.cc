#include "fence/wal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "fence/big_endian.h"

namespace fencepost::fence {
namespace {

// Length and CRC before each payload.
constexpr std::size_t kFrame = 8;
// The payload's fixed fields: seq, flags, fence token, updated_at, fence
// length, op, value token, key length, body length.
constexpr std::size_t kFixedPayload = 8 + 1 + 8 + 8 + 2 + 1 + 8 + 2 + 4;
// The Content-Type with its length, at most.
constexpr std::size_t kMaxContentTypeField = 1 + 255;
static_assert(kMaxValueBytes + kFixedPayload + kMaxContentTypeField +
                  2 * kMaxNameBytes ==
              kMaxRecordPayload);

enum Flags : std::uint8_t {
  kFenceSet = 1,
  kValueToken = 2,
  kBatchContinues = 4,
  kContentType = 8,
};

const std::array<std::uint32_t, 256>& CrcTable() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

std::uint32_t Crc32cTable(std::string_view data) {
  const auto& table = CrcTable();
  std::uint32_t c = 0xFFFFFFFFu;
  for (const char ch : data) {
    c = table[(c ^ static_cast<unsigned char>(ch)) & 0xFF] ^ (c >> 8);
  }
  return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__)
// The same with SSE 4.2's crc32 instruction, 8 bytes at a time: recovery
// checks every record of a 16 MiB segment before the ports open.
__attribute__((target("sse4.2"))) std::uint32_t Crc32cSse42(
    std::string_view data) {
  std::uint64_t c = 0xFFFFFFFFu;
  const char* p = data.data();
  std::size_t n = data.size();
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; ++p, --n) {
    c32 = __builtin_ia32_crc32qi(c32, static_cast<unsigned char>(*p));
  }
  return c32 ^ 0xFFFFFFFFu;
}
#endif

}  // namespace

std::uint32_t Crc32c(std::string_view data) {
#if defined(__x86_64__)
  static const bool sse42 = __builtin_cpu_supports("sse4.2");
  if (sse42) return Crc32cSse42(data);
#endif
  return Crc32cTable(data);
}

namespace {

void Put(std::string* out, std::uint64_t v, int bytes) {
  char buf[8];
  StoreBigEndian(buf, v, bytes);
  out->append(buf, bytes);
}

// Reads fields off a payload; any read past its end marks it bad.
struct Reader {
  std::string_view rest;
  bool bad = false;
  std::uint64_t Int(int bytes) {
    if (rest.size() < static_cast<std::size_t>(bytes)) {
      bad = true;
      return 0;
    }
    const std::uint64_t v = LoadBigEndian(rest.data(), bytes);
    rest.remove_prefix(bytes);
    return v;
  }
  std::string Bytes(std::size_t n) {
    if (rest.size() < n) {
      bad = true;
      return {};
    }
    std::string v(rest.substr(0, n));
    rest.remove_prefix(n);
    return v;
  }
};

std::optional<WalRecord> DecodePayload(std::string_view payload) {
  Reader in{payload};
  WalRecord r;
  r.seq = in.Int(8);
  const auto flags = static_cast<std::uint8_t>(in.Int(1));
  const Token fence_token = in.Int(8);
  r.updated_at_ns = static_cast<std::int64_t>(in.Int(8));
  r.fence = in.Bytes(in.Int(2));
  r.op = static_cast<WalRecord::Op>(in.Int(1));
  const Token value_token = in.Int(8);
  r.key = in.Bytes(in.Int(2));
  r.body = in.Bytes(in.Int(4));
  if (flags & kContentType) r.content_type = in.Bytes(in.Int(1));
  if (in.bad || !in.rest.empty() || r.op > WalRecord::Op::kLease) {
    return std::nullopt;
  }
  if (flags & kFenceSet) r.fence_token = fence_token;
  if (flags & kValueToken) r.value_token = value_token;
  r.batch_continues = flags & kBatchContinues;
  return r;
}

std::runtime_error Failure(const std::string& what, const std::string& path,
                           int error) {
  return std::runtime_error("write-ahead log " + path + ": " + what + ": " +
                            std::strerror(error));
}

// Writes all of `data` at `offset`; 0 or the errno.
int WriteAll(int fd, const char* data, std::size_t size, std::uint64_t offset) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return 0;
}

}  // namespace

void EncodeRecord(const WalRecord& r, std::string* out) {
  const std::size_t at = out->size();
  out->append(kFrame, '\0');
  Put(out, r.seq, 8);
  Put(out,
      (r.fence_token ? kFenceSet : 0) | (r.value_token ? kValueToken : 0) |
          (r.batch_continues ? kBatchContinues : 0) |
          (r.content_type.empty() ? 0 : kContentType),
      1);
  Put(out, r.fence_token.value_or(0), 8);
  Put(out, static_cast<std::uint64_t>(r.updated_at_ns), 8);
  Put(out, r.fence.size(), 2);
  *out += r.fence;
  Put(out, static_cast<std::uint8_t>(r.op), 1);
  Put(out, r.value_token.value_or(0), 8);
  Put(out, r.key.size(), 2);
  *out += r.key;
  Put(out, r.body.size(), 4);
  *out += r.body;
  if (!r.content_type.empty()) {
    Put(out, r.content_type.size(), 1);
    *out += r.content_type;
  }
  const std::string_view payload = std::string_view(*out).substr(at + kFrame);
  StoreBigEndian(out->data() + at, payload.size(), 4);
  StoreBigEndian(out->data() + at + 4, Crc32c(payload), 4);
}

namespace {

enum class Step { kRecord, kNeedMore, kEnd };

// A run of records being read: the ones above `keep_after` are kept; the
// others (already in LMDB) are only checked.
struct Run {
  std::uint64_t keep_after = 0;
  std::vector<WalRecord> records;
  std::uint64_t last_seq = 0;  // of the last record read, kept or not
  bool started = false;
};

// Decodes the record at bytes[*at] into `run`: kRecord (and *at moves past
// it), kNeedMore when its frame runs past the bytes there are, or kEnd.
Step DecodeNext(std::string_view bytes, std::size_t* at, Run* run) {
  const std::string_view rest = bytes.substr(*at);
  if (rest.size() < kFrame) return Step::kNeedMore;
  const std::size_t length = LoadBigEndian(rest.data(), 4);
  const auto crc =
      static_cast<std::uint32_t>(LoadBigEndian(rest.data() + 4, 4));
  if (length == 0 || length > kMaxRecordPayload) return Step::kEnd;
  if (rest.size() - kFrame < length) return Step::kNeedMore;
  const std::string_view payload = rest.substr(kFrame, length);
  if (Crc32c(payload) != crc || payload.size() < 8) return Step::kEnd;
  const std::uint64_t seq = LoadBigEndian(payload.data(), 8);
  if (run->started && seq != run->last_seq + 1) return Step::kEnd;
  if (seq > run->keep_after) {
    std::optional<WalRecord> record = DecodePayload(payload);
    if (!record) return Step::kEnd;
    run->records.push_back(std::move(*record));
  }
  run->last_seq = seq;
  run->started = true;
  *at += kFrame + length;
  return Step::kRecord;
}

// Drops a batch whose last record is missing from the end of `run`: its
// group was torn, so none of it was acknowledged.
void DropCutBatch(std::vector<WalRecord>* run) {
  while (!run->empty() && run->back().batch_continues) run->pop_back();
}

// Reads the run of the segment file `fd` (`size` bytes) from offset
// `from` into `run`, as far as it goes. Returns the offset just past its
// last record; *kept_from is the offset of its first kept record (or
// `size`).
std::uint64_t ReadRun(int fd, const std::string& path, std::uint64_t size,
                      std::uint64_t from, Run* run, std::uint64_t* kept_from) {
  std::string bytes;
  std::size_t at = 0;
  std::uint64_t base = from;  // the file offset of bytes[0]
  std::uint64_t read = from;
  *kept_from = size;
  while (true) {
    const std::size_t kept = run->records.size();
    const std::uint64_t offset = base + at;
    const Step step = DecodeNext(bytes, &at, run);
    if (step == Step::kRecord) {
      if (kept == 0 && run->records.size() == 1) *kept_from = offset;
      continue;
    }
    if (step == Step::kEnd || read >= size) break;
    bytes.erase(0, at);
    base += at;
    at = 0;
    const std::size_t chunk = 1u << 20;
    const std::size_t old_size = bytes.size();
    bytes.resize(old_size + chunk);
    const ssize_t n =
        ::pread(fd, bytes.data() + old_size, chunk, static_cast<off_t>(read));
    if (n < 0 && errno == EINTR) {
      bytes.resize(old_size);
      continue;
    }
    if (n < 0) throw Failure("cannot read", path, errno);
    bytes.resize(old_size + static_cast<std::size_t>(n));
    if (n == 0) break;
    read += static_cast<std::uint64_t>(n);
  }
  return base + at;
}

}  // namespace

std::vector<WalRecord> DecodeRun(std::string_view bytes) {
  Run run;
  std::size_t at = 0;
  while (DecodeNext(bytes, &at, &run) == Step::kRecord) {
  }
  DropCutBatch(&run.records);
  return std::move(run.records);
}

Wal::Wal(const Options& options) : options_(options) {
  Open(0);
  Open(1);
  // Each segment's run, then both in sequence order. The segment written
  // last holds the highest numbers; the writer starts on the other one,
  // which recovery has just applied.
  Run runs[2];
  bool any_run = false;
  for (int i = 0; i < 2; ++i) {
    Segment& s = segments_[i];
    runs[i].keep_after = options_.applied_seq;
    std::uint64_t kept_from = 0;
    const std::uint64_t end =
        ReadRun(s.fd, s.path, s.size, 0, &runs[i], &kept_from);
    any_run = any_run || runs[i].started;
    if (!runs[i].records.empty()) {
      // Recovery serves these records before LMDB has them, so they must
      // be on the disk, not only in the page cache where a killed process
      // left its last groups: sync them, then read them again from the
      // disk itself. After a failed writeback (the last process stopped on
      // an EIO) the cache may hold pages the disk never got, and the sync
      // reports that error only once: dropping the cached pages first makes
      // the second read see what the disk has.
      if (::fdatasync(s.fd) != 0) throw Failure("cannot sync", s.path, errno);
      const std::uint64_t page = 4096;
      const std::uint64_t from = kept_from / page * page;
      const std::uint64_t to = (end + page - 1) / page * page;
      if (int e = ::posix_fadvise(s.fd, static_cast<off_t>(from),
                                  static_cast<off_t>(to - from),
                                  POSIX_FADV_DONTNEED);
          e != 0) {
        throw Failure("cannot drop the cached pages of", s.path, e);
      }
      Run again;
      again.keep_after = options_.applied_seq;
      again.started = true;
      again.last_seq = runs[i].records.front().seq - 1;
      std::uint64_t ignored = 0;
      ReadRun(s.fd, s.path, s.size, kept_from, &again, &ignored);
      runs[i].records = std::move(again.records);
      if (!runs[i].records.empty()) runs[i].last_seq = again.last_seq;
    }
    std::vector<WalRecord>& kept = runs[i].records;
    DropCutBatch(&kept);
    // A cut batch is always above applied_seq (only whole, synced groups
    // are applied), so when nothing is kept the run's end stands.
    if (!kept.empty()) {
      s.last_seq = kept.back().seq;
    } else if (runs[i].started) {
      s.last_seq = std::min(runs[i].last_seq, options_.applied_seq);
    }
    last_seq_ = std::max(last_seq_, s.last_seq);
  }
  // The log holds every record up to applied_seq until a clean stop marks
  // it applied (empty runs): a log that stops short of it has lost a record
  // LMDB has, and with it perhaps the acknowledged ones after it.
  if (any_run && last_seq_ < options_.applied_seq) {
    throw std::runtime_error(
        "write-ahead log in " + options_.dir + ": it ends at record " +
        std::to_string(last_seq_) + ", before record " +
        std::to_string(options_.applied_seq) +
        " that LMDB has applied: a record is corrupt; refusing to start");
  }
  const int older = segments_[0].last_seq <= segments_[1].last_seq ? 0 : 1;
  for (int i : {older, 1 - older}) {
    for (WalRecord& r : runs[i].records) recovered_.push_back(std::move(r));
  }
  current_ = older;
  offset_ = 0;
}

Wal::~Wal() {
  for (Segment& s : segments_) {
    if (s.fd >= 0) ::close(s.fd);
  }
}

void Wal::Open(int i) {
  Segment& s = segments_[i];
  s.path = options_.dir + "/wal-" + std::to_string(i);
  s.fd = ::open(s.path.c_str(), O_RDWR | O_CLOEXEC);
  if (s.fd >= 0) {
    struct stat st;
    if (::fstat(s.fd, &st) != 0) throw Failure("cannot stat", s.path, errno);
    s.size = static_cast<std::uint64_t>(st.st_size);
    return;
  }
  if (errno != ENOENT) throw Failure("cannot open", s.path, errno);
  // A new segment: written with zeros once (so later overwrites need no
  // allocation), synced, then renamed into place and the directory synced.
  const std::string temp = s.path + ".tmp";
  const int fd =
      ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Failure("cannot create", temp, errno);
  const std::string zeros(1u << 20, '\0');
  for (std::uint64_t at = 0; at < options_.segment_bytes; at += zeros.size()) {
    const std::size_t n =
        std::min<std::uint64_t>(zeros.size(), options_.segment_bytes - at);
    if (int e = WriteAll(fd, zeros.data(), n, at); e != 0) {
      ::close(fd);
      throw Failure("cannot preallocate", temp, e);
    }
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    throw Failure("cannot sync", temp, e);
  }
  if (::rename(temp.c_str(), s.path.c_str()) != 0) {
    const int e = errno;
    ::close(fd);
    throw Failure("cannot rename", temp, e);
  }
  const int dir = ::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir < 0 || ::fsync(dir) != 0) {
    const int e = errno;
    if (dir >= 0) ::close(dir);
    ::close(fd);
    throw Failure("cannot sync the directory of", s.path, e);
  }
  ::close(dir);
  s.fd = fd;
  s.size = options_.segment_bytes;
}

int Wal::MarkApplied() {
  // An empty frame at the start of each segment: the next open reads no
  // run, since every record is in LMDB.
  // The older segment first: a crash between the two leaves the newer
  // one's run reaching applied_seq, as recovery requires.
  static constexpr char kEmpty[kFrame] = {};
  const int older = segments_[0].last_seq <= segments_[1].last_seq ? 0 : 1;
  for (int i : {older, 1 - older}) {
    Segment& s = segments_[i];
    if (int e = WriteAll(s.fd, kEmpty, kFrame, 0); e != 0) return e;
    if (::fdatasync(s.fd) != 0) return errno;
  }
  for (Segment& s : segments_) s.last_seq = 0;
  offset_ = 0;
  return 0;
}

bool Wal::Switches(std::size_t bytes, std::uint64_t applied) const {
  return offset_ > 0 && offset_ + bytes > segments_[current_].size &&
         segments_[1 - current_].last_seq <= applied;
}

int Wal::Write(std::string_view bytes, std::uint64_t last_seq,
               std::uint64_t applied, int* segment) {
  if (Switches(bytes.size(), applied)) {
    current_ = 1 - current_;
    offset_ = 0;
  }
  Segment& s = segments_[current_];
  if (int e = WriteAll(s.fd, bytes.data(), bytes.size(), offset_); e != 0) {
    return e;
  }
  offset_ += bytes.size();
  s.size = std::max(s.size, offset_);
  s.last_seq = last_seq;
  last_seq_ = last_seq;
  *segment = current_;
  return 0;
}

Wal::SyncFiles::SyncFiles(const Wal& wal) {
  for (int i = 0; i < 2; ++i) {
    const std::string& path = wal.segments_[i].path;
    fds_[i] = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fds_[i] < 0) {
      const int e = errno;
      for (int j = 0; j < i; ++j) ::close(fds_[j]);
      throw Failure("cannot open for syncing", path, e);
    }
  }
}

Wal::SyncFiles::~SyncFiles() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

int Wal::SyncFiles::Sync(int segment) const {
  return ::fdatasync(fds_[segment]) != 0 ? errno : 0;
}

int Wal::Append(std::string_view bytes, std::uint64_t last_seq,
                std::uint64_t applied) {
  int segment = 0;
  if (int e = Write(bytes, last_seq, applied, &segment); e != 0) return e;
  return ::fdatasync(segments_[segment].fd) != 0 ? errno : 0;
}

}  // namespace fencepost::fence
