#include "proxy/data_dir_lock.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

namespace fencepost::proxy {

namespace {

using std::chrono::milliseconds;

constexpr std::string_view kStopped = "stopped";
constexpr std::string_view kHold = " hold-ms=";
// A hold longer than this is no mark of ours: read as unknown.
constexpr milliseconds kMostHold = std::chrono::hours(24);

// " hold-ms=N" (N whole milliseconds up to kMostHold); nullopt otherwise.
std::optional<milliseconds> ParseHold(std::string_view text) {
  if (text.rfind(kHold, 0) != 0) return std::nullopt;
  text.remove_prefix(kHold.size());
  std::uint64_t ms = 0;
  const char* end = text.data() + text.size();
  if (text.empty() || text.size() > 12 ||
      text.find_first_not_of("0123456789") != std::string_view::npos ||
      std::from_chars(text.data(), end, ms).ptr != end ||
      ms > static_cast<std::uint64_t>(kMostHold.count())) {
    return std::nullopt;
  }
  return milliseconds(ms);
}

// The pid a mark begins with, for a message: its digits, or "unknown" (the
// file is read as it is found, and nothing else of it is ever echoed).
std::string PidOf(const std::string& mark) {
  const std::string pid = mark.substr(0, mark.find(' '));
  const bool digits = !pid.empty() && pid.size() <= 10 &&
                      pid.find_first_not_of("0123456789") == std::string::npos;
  return digits ? pid : "unknown";
}

// What the last process left, from its mark: the hold and why.
std::pair<milliseconds, std::string> Inherited(const std::string& mark,
                                               const std::string& dir,
                                               milliseconds bound) {
  if (mark.empty()) {
    // New, or a mark lost before it was first written (an empty file in a
    // directory that holds fences): the last process's bound is unknown.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().filename() != "fencepost.lock") {
        return {bound, "the lock file is empty"};
      }
    }
    return {milliseconds(0), ""};
  }
  if (mark.rfind(kStopped, 0) == 0) {
    const std::string_view rest =
        std::string_view(mark).substr(kStopped.size());
    if (rest.empty()) return {milliseconds(0), ""};
    if (const auto held = ParseHold(rest)) {
      return {*held,
              "the last process stopped with a write whose outcome "
              "is unknown"};
    }
    return {bound, "the lock file holds a mark this version does not read"};
  }
  // "PID" or "PID hold-ms=D": the process died while it ran.
  const std::size_t space = mark.find(' ');
  const auto held = space == std::string::npos
                        ? std::nullopt
                        : ParseHold(std::string_view(mark).substr(space));
  return {std::max(bound, held.value_or(milliseconds(0))),
          "the last process (pid " + PidOf(mark) + ") did not stop cleanly"};
}

}  // namespace

DataDirLock::DataDirLock(const std::string& dir, milliseconds bound) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    // The cause (a parent not writable, a file in the way): opening the
    // lock file below would only say "No such file or directory".
    error_ = "data directory " + dir +
             " is not usable: cannot create it: " + ec.message();
    return;
  }
  const std::string path = dir + "/fencepost.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error_ = "data directory " + dir + " is not usable: cannot open " + path +
             ": " + std::strerror(errno);
    return;
  }
  char previous[128] = {};
  const ssize_t n = ::pread(fd_, previous, sizeof previous - 1, 0);
  std::string mark(previous, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!mark.empty() && mark.back() == '\n') mark.pop_back();
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    error_ = error != EWOULDBLOCK
                 ? "cannot lock " + path + ": " + std::strerror(error)
                 : "data directory " + dir +
                       " is in use by another fencepost (pid " + PidOf(mark) +
                       ")";
    return;
  }
  std::tie(inherited_, why_) = Inherited(mark, dir, bound);
  taken_ = std::chrono::steady_clock::now();
  hold_left_ = inherited_;  // handed on as it is if this start fails
  std::string running = std::to_string(::getpid());
  if (const milliseconds most = std::max(bound, inherited_); most.count() > 0) {
    running += std::string(kHold) + std::to_string(most.count());
  }
  if (!Write(running + "\n")) {
    // Without its mark a crash of this process would leave the last one's
    // ("stopped"): the next start would not hold what this one sent.
    error_ = "cannot write " + path + ": " + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
  }
}

DataDirLock::~DataDirLock() {
  if (fd_ < 0) return;
  const milliseconds since = std::chrono::duration_cast<milliseconds>(
      std::chrono::steady_clock::now() - taken_);
  const milliseconds left =
      std::max(hold_left_, std::max(milliseconds(0), inherited_ - since));
  std::string mark(kStopped);
  if (left.count() > 0)
    mark += std::string(kHold) + std::to_string(left.count());
  if (!Write(mark + "\n")) {
    spdlog::warn("cannot mark the data directory stopped: {}",
                 std::strerror(errno));
  }
  ::close(fd_);
}

DataDirLock::DataDirLock(DataDirLock&& other) noexcept {
  *this = std::move(other);
}

DataDirLock& DataDirLock::operator=(DataDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    error_ = std::move(other.error_);
    why_ = std::move(other.why_);
    inherited_ = other.inherited_;
    taken_ = other.taken_;
    hold_left_ = other.hold_left_;
  }
  return *this;
}

milliseconds DataDirLock::InheritedHold() const {
  if (fd_ < 0) return milliseconds(0);
  const auto since = std::chrono::steady_clock::now() - taken_;
  return std::max(milliseconds(0),
                  inherited_ - std::chrono::duration_cast<milliseconds>(since));
}

bool DataDirLock::Write(const std::string& mark) const {
  return ::pwrite(fd_, mark.data(), mark.size(), 0) ==
             static_cast<ssize_t>(mark.size()) &&
         ::ftruncate(fd_, static_cast<off_t>(mark.size())) == 0 &&
         ::fsync(fd_) == 0;
}

}  // namespace fencepost::proxy
