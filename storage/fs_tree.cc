#include "storage/fs_tree.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <vector>

#include "fence/value_fields.h"
#include "storage/errc.h"

namespace fencepost::storage {
namespace {

constexpr std::string_view kTempPrefix = ".fencepost-tmp.";
constexpr const char* kTokenXattr = "user.fencepost.token";
constexpr const char* kTagXattr = "user.fencepost.etag";
constexpr const char* kTypeXattr = "user.fencepost.content-type";
constexpr const char* kFormatXattr = "user.fencepost.format";
constexpr int kFormat = 2;
constexpr std::size_t kMaxSegment = 255;

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(-1); }
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    Reset(other.fd_);
    other.fd_ = -1;
    return *this;
  }
  int get() const { return fd_; }
  void Reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

std::error_code FromErrno(int e) {
  switch (e) {
    case ELOOP:
      return Errc::kSymlink;
    case ENAMETOOLONG:
      return Errc::kSegmentTooLong;
    case ENOTDIR:
    case EISDIR:
      return Errc::kCollision;
    case ENOSPC:
    case EDQUOT:
      return Errc::kNoSpace;
    default:
      // Kept as the errno, so the log can say what failed.
      return {e, std::generic_category()};
  }
}

// The key's segments; the last one names the file.
std::error_code Split(std::string_view key, std::vector<std::string>* out) {
  out->clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = key.find('/', start);
    const std::string_view segment = key.substr(
        start, slash == std::string_view::npos ? slash : slash - start);
    if (segment.size() > kMaxSegment) return Errc::kSegmentTooLong;
    out->emplace_back(segment);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (out->back().compare(0, kTempPrefix.size(), kTempPrefix) == 0) {
    return Errc::kReservedName;
  }
  return {};
}

// Opens directory `name` under `parent` without following a symlink.
int OpenDir(int parent, const std::string& name) {
  return ::openat(parent, name.c_str(),
                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Walks to the directory that holds the key's file. With `create`, missing
// directories are made (and synced into their parents); without it, a
// missing one sets *missing. A file where a directory should be is a
// collision.
std::error_code OpenParent(int root, const std::vector<std::string>& segments,
                           bool create, Fd* out, bool* missing) {
  *missing = false;
  Fd dir(::dup(root));
  if (dir.get() < 0) return FromErrno(errno);
  for (std::size_t i = 0; i + 1 < segments.size(); ++i) {
    int next = OpenDir(dir.get(), segments[i]);
    if (next < 0 && errno == ENOENT && create) {
      if (::mkdirat(dir.get(), segments[i].c_str(), 0755) == 0) {
        if (::fsync(dir.get()) != 0) return FromErrno(errno);
      } else if (errno != EEXIST) {
        return FromErrno(errno);
      }
      next = OpenDir(dir.get(), segments[i]);
    }
    if (next < 0) {
      const int e = errno;
      if (e == ENOENT) {
        *missing = true;
        return {};
      }
      // O_DIRECTORY fails first with ENOTDIR on a symlink: tell a link (never
      // followed) from a file where a directory should be (a collision).
      struct stat st;
      if ((e == ENOTDIR || e == ELOOP) &&
          ::fstatat(dir.get(), segments[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) ==
              0) {
        return S_ISLNK(st.st_mode) ? Errc::kSymlink : Errc::kCollision;
      }
      return FromErrno(e);
    }
    dir.Reset(next);
  }
  *out = std::move(dir);
  return {};
}

std::string TempName() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name(kTempPrefix);
  std::uint64_t r = rng();
  for (int i = 0; i < 16; ++i, r >>= 4) name.push_back(kHex[r & 15]);
  return name;
}

// An attribute of the open file `fd`, of at most 255 bytes; empty when it
// has none.
std::string Attribute(int fd, const char* name) {
  char text[256];
  const ssize_t n = ::fgetxattr(fd, name, text, sizeof text);
  return n > 0 ? std::string(text, static_cast<std::size_t>(n)) : "";
}

// Sets an attribute of the open file `fd`; 0 (also where the file system
// keeps no user attributes) or the errno.
int SetAttribute(int fd, const char* name, std::string_view value) {
  if (::fsetxattr(fd, name, value.data(), value.size(), 0) == 0) return 0;
  return errno == ENOTSUP ? 0 : errno;
}

// The entity tag of the open file `fd` (see FsTree).
unsigned long long Nanoseconds(const struct timespec& t) {
  return static_cast<unsigned long long>(t.tv_sec) * 1000000000ull +
         static_cast<unsigned long long>(t.tv_nsec);
}

// What the contents of the file `st` describes are known by: its inode,
// size and modification time. A write in place by another program changes
// them (the time at the clock's tick); setting an attribute does not.
std::string Identity(const struct stat& st) {
  char text[64];
  const int n = std::snprintf(text, sizeof text, "%llx-%llx-%llx",
                              static_cast<unsigned long long>(st.st_ino),
                              static_cast<unsigned long long>(st.st_size),
                              Nanoseconds(st.st_mtim));
  return std::string(text, static_cast<std::size_t>(n));
}

// The entity tag of the open file `fd`, which fstat described as `st`: the
// tag fencepost stored with its write ("TAG IDENTITY") and the file's change
// time, while the file is still the one written; else (another program
// wrote it, or set the attribute to anything) one made from everything
// fstat says of it.
//
// The change time is in the tag, not in the stored identity, because no
// program can set it: a rewrite in place that restores the modification
// time (touch -d) still moves it. It cannot be stored beside the tag, since
// storing anything in the file's attributes moves it too, as does the
// rename of fencepost's own write; nothing else fencepost does to a file it
// wrote does, so the tag stays while the file does.
std::string TagOfFile(int fd, const struct stat& st) {
  const std::string stored = Attribute(fd, kTagXattr);
  const std::size_t space = stored.find(' ');
  if (space != std::string::npos && stored.substr(space + 1) == Identity(st)) {
    std::string tag = stored.substr(0, space);
    if (fence::ValidTag(tag)) {
      char changed[24];
      const int n = std::snprintf(changed, sizeof changed, "-%llx",
                                  Nanoseconds(st.st_ctim));
      return tag + std::string(changed, static_cast<std::size_t>(n));
    }
  }
  char text[128];
  const int n = std::snprintf(text, sizeof text, "s%llx-%s-%llx",
                              static_cast<unsigned long long>(st.st_dev),
                              Identity(st).c_str(), Nanoseconds(st.st_ctim));
  return std::string(text, static_cast<std::size_t>(n));
}

// A new random tag: 16 hex digits from the kernel's random source.
std::string NewTag() {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, 0) != sizeof bits) {
    thread_local std::mt19937_64 fallback{std::random_device{}()};
    bits = fallback();
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(bits));
  return text;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// The file of `key`'s value under `root`, opened for reading, with its
// fstat: `*file` stays closed (and no error) when there is no value (no
// file, a directory, or a file where a directory is on the way).
std::error_code OpenValue(int root, std::string_view key, Fd* file,
                          struct stat* st) {
  std::vector<std::string> segments;
  if (auto error = Split(key, &segments)) return error;
  Fd parent;
  bool missing = false;
  auto error = OpenParent(root, segments, false, &parent, &missing);
  if (error == Errc::kCollision) return {};  // a file where a directory is
  if (error || missing) return error;
  Fd opened(::openat(parent.get(), segments.back().c_str(),
                     O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (opened.get() < 0) {
    return errno == ENOENT ? std::error_code{} : FromErrno(errno);
  }
  if (::fstat(opened.get(), st) != 0) return FromErrno(errno);
  if (S_ISREG(st->st_mode)) *file = std::move(opened);  // else a directory
  return {};
}

}  // namespace

FsTree::FsTree(const std::string& dir, bool exclusive) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) {
    throw std::runtime_error("fs: backend directory " + dir +
                             " is not usable: " + std::strerror(errno));
  }
  if (const int error = ProbeWrite(); error != 0) {
    ::close(dir_fd_);
    throw std::runtime_error("fs: backend directory " + dir +
                             " is not writable: " + std::strerror(error));
  }
  try {
    CheckFormat(dir);
  } catch (...) {
    ::close(dir_fd_);
    throw;
  }
  // One process per directory, whatever its data directory: writes to a
  // fence are ordered within a process only (unless replicas share turns).
  // The lock is on the directory itself, so nothing is added to it.
  if (exclusive && ::flock(dir_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(dir_fd_);
    throw std::runtime_error(
        "fs: backend directory " + dir +
        (error == EWOULDBLOCK
             ? " is in use by another fencepost"
             : " cannot be locked: " + std::string(std::strerror(error))));
  }
}

FsTree::~FsTree() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

void FsTree::CheckFormat(const std::string& dir) const {
  const std::string found = Attribute(dir_fd_, kFormatXattr);
  if (found.empty()) {
    if (const int e =
            SetAttribute(dir_fd_, kFormatXattr, std::to_string(kFormat));
        e != 0) {
      throw std::runtime_error(
          "fs: backend directory " + dir +
          ": cannot record its format: " + std::strerror(e));
    }
    return;
  }
  if (found != std::to_string(kFormat)) {
    // Another program may have set it to anything: digits only in the log.
    const bool digits =
        found.size() <= 8 &&
        found.find_first_not_of("0123456789") == std::string::npos;
    throw std::runtime_error(
        "fs: backend directory " + dir +
        " was written by another release of fencepost (format " +
        (digits ? found : std::string("unknown")) +
        "; this release reads formats 1 and " + std::to_string(kFormat) +
        "): serve it with that release or a later one");
  }
}

int FsTree::ProbeWrite() const {
  // A reserved name, so no key can be this file.
  const std::string name =
      std::string(kTempPrefix) + "probe-" + std::to_string(::getpid());
  const int fd =
      ::openat(dir_fd_, name.c_str(),
               O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return errno;
  ::close(fd);
  if (::unlinkat(dir_fd_, name.c_str(), 0) != 0) return errno;
  return 0;
}

bool FsTree::Usable() const {
  struct stat st;
  return ::fstat(dir_fd_, &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink > 0 &&
         ProbeWrite() == 0;
}

std::error_code FsTree::Check(std::string_view key, bool remove) const {
  std::vector<std::string> segments;
  if (auto error = Split(key, &segments)) return error;
  Fd parent;
  bool missing = false;
  auto error = OpenParent(dir_fd_, segments, false, &parent, &missing);
  if (error == Errc::kCollision && remove) return {};
  if (error || missing) return error;
  struct stat st;
  if (::fstatat(parent.get(), segments.back().c_str(), &st,
                AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? std::error_code{} : FromErrno(errno);
  }
  if (S_ISLNK(st.st_mode)) return Errc::kSymlink;
  if (!S_ISREG(st.st_mode) && !remove) return Errc::kCollision;
  return {};
}

std::error_code FsTree::Read(std::string_view key, bool head,
                             FsValue* value) const {
  *value = FsValue{};
  Fd file;
  struct stat st;
  if (auto error = OpenValue(dir_fd_, key, &file, &st)) return error;
  if (file.get() < 0) return {};
  value->found = true;
  value->size = static_cast<std::size_t>(st.st_size);
  if (!head) {
    value->body.resize(value->size);
    std::size_t done = 0;
    while (done < value->size) {
      const ssize_t n = ::pread(file.get(), value->body.data() + done,
                                value->size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FromErrno(errno);
      if (n == 0) break;  // truncated by someone else meanwhile
      done += static_cast<std::size_t>(n);
    }
    value->body.resize(done);
    value->size = done;
  }
  if (const std::string token = Attribute(file.get(), kTokenXattr);
      !token.empty()) {
    value->token = fence::ParseToken(token);
  }
  value->etag = TagOfFile(file.get(), st);
  value->content_type = Attribute(file.get(), kTypeXattr);
  if (!fence::ValidContentType(value->content_type)) {
    value->content_type.clear();  // set by another program: not sent on
  }
  return {};
}

std::error_code FsTree::Current(std::string_view key,
                                fence::ValueNow* now) const {
  *now = fence::ValueNow{};
  Fd file;
  struct stat st;
  if (auto error = OpenValue(dir_fd_, key, &file, &st)) return error;
  if (file.get() < 0) return {};
  now->exists = true;
  now->tag = TagOfFile(file.get(), st);
  return {};
}

std::error_code FsTree::Write(std::string_view key, std::string_view body,
                              std::optional<fence::Token> token,
                              std::string_view content_type, bool* created,
                              std::string* etag) const {
  std::vector<std::string> segments;
  if (auto error = Split(key, &segments)) return error;
  Fd parent;
  bool missing = false;
  if (auto error = OpenParent(dir_fd_, segments, true, &parent, &missing)) {
    return error;
  }
  const std::string& leaf = segments.back();
  struct stat st;
  if (::fstatat(parent.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return Errc::kSymlink;
    if (!S_ISREG(st.st_mode)) return Errc::kCollision;
    *created = false;
  } else if (errno == ENOENT) {
    *created = true;
  } else {
    return FromErrno(errno);
  }

  std::string temp;
  Fd file;
  for (int attempt = 0; attempt < 8 && file.get() < 0; ++attempt) {
    temp = TempName();
    file.Reset(::openat(parent.get(), temp.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0644));
    if (file.get() < 0 && errno != EEXIST) return FromErrno(errno);
  }
  if (file.get() < 0) return FromErrno(errno);
  auto fail = [&](int e) {
    file.Reset(-1);
    ::unlinkat(parent.get(), temp.c_str(), 0);
    return FromErrno(e);
  };
  if (!WriteAll(file.get(), body)) return fail(errno);
  if (::fstat(file.get(), &st) != 0) return fail(errno);
  int e =
      token ? SetAttribute(file.get(), kTokenXattr, std::to_string(*token)) : 0;
  if (e == 0)
    e = SetAttribute(file.get(), kTagXattr, NewTag() + " " + Identity(st));
  if (e == 0 && !content_type.empty()) {
    e = SetAttribute(file.get(), kTypeXattr, content_type);
  }
  if (e != 0) return fail(e);
  if (::fsync(file.get()) != 0) return fail(errno);
  if (::renameat(parent.get(), temp.c_str(), parent.get(), leaf.c_str()) != 0) {
    return fail(errno);
  }
  // After the rename, which may move the change time (see TagOfFile). Where
  // the file system keeps no attributes, the tag is the stat one.
  if (::fstat(file.get(), &st) != 0) return FromErrno(errno);
  *etag = TagOfFile(file.get(), st);
  file.Reset(-1);
  if (::fsync(parent.get()) != 0) return FromErrno(errno);
  return {};
}

std::error_code FsTree::Remove(std::string_view key) const {
  std::vector<std::string> segments;
  if (auto error = Split(key, &segments)) return error;
  Fd parent;
  bool missing = false;
  auto error = OpenParent(dir_fd_, segments, false, &parent, &missing);
  if (error == Errc::kCollision) return {};
  if (error || missing) return error;
  const std::string& leaf = segments.back();
  struct stat st;
  if (::fstatat(parent.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? std::error_code{} : FromErrno(errno);
  }
  if (S_ISLNK(st.st_mode)) return Errc::kSymlink;
  if (!S_ISREG(st.st_mode)) return {};  // a directory: no value to remove
  if (::unlinkat(parent.get(), leaf.c_str(), 0) != 0 && errno != ENOENT) {
    return FromErrno(errno);
  }
  if (::fsync(parent.get()) != 0) return FromErrno(errno);
  return {};
}

}  // namespace fencepost::storage
