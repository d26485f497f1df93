#pragma once

#include <chrono>
#include <string>

namespace fencepost::proxy {

// The data directory's lock: DIR/fencepost.lock, held exclusively (flock)
// for the life of the process. The fs: and http:// backends order the
// writes of a fence within one process, so two processes never share a
// data directory.
//
// The file also tells the next start what it must wait out before a write
// reaches a store kept elsewhere (http://, s3://), because writes the last
// process sent may still land there:
//   "PID hold-ms=D"      while a process runs: if it dies, a write it sent
//                        may land for up to D (its --upstream-timeout plus
//                        --upstream-settle, or what it inherited, if more);
//   "stopped"            after a clean stop with nothing held;
//   "stopped hold-ms=R"  after a clean stop with a hold of R still to run.
// An empty file in a directory that holds anything else, or a mark this
// version does not read, counts as a process that died with an unknown
// bound. Holds are durations, not times: a clock that jumps between two
// processes changes nothing, and the time the directory lay unused is not
// credited. Every mark is written over the last one, cut to length and
// synced: a power cut leaves the old mark, the new one, or a mix that does
// not read as "stopped" (the longest hold), never an empty file.
//
// Thread safety: not thread-safe; one per process, used at start and exit.
class DataDirLock {
 public:
  // An unlocked one (fences in etcd: no data directory).
  DataDirLock() = default;
  // Takes the lock of `dir` (made if missing) and marks it running.
  // `bound`: how long a write this process sends elsewhere may land after
  // it (0 when it sends none). On failure error() says why.
  DataDirLock(const std::string& dir, std::chrono::milliseconds bound);
  // Marks the directory stopped, handing on the longest hold still to run
  // (SetHoldLeft's, or what was inherited and has not run out).
  ~DataDirLock();
  DataDirLock(DataDirLock&& other) noexcept;
  DataDirLock& operator=(DataDirLock&& other) noexcept;
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

  const std::string& error() const { return error_; }
  // How long from now every fence of a store kept elsewhere is held: what
  // the last process left (0: nothing).
  std::chrono::milliseconds InheritedHold() const;
  // Why there is an inherited hold ("" when there is none).
  const std::string& why() const { return why_; }
  // At a clean stop: the longest hold of this process still to run.
  void SetHoldLeft(std::chrono::milliseconds left) { hold_left_ = left; }

 private:
  // Writes `mark` over the file's content; false (errno set) on failure.
  bool Write(const std::string& mark) const;

  int fd_ = -1;
  std::string error_;
  std::string why_;
  std::chrono::milliseconds inherited_{0};
  std::chrono::steady_clock::time_point taken_{};
  std::chrono::milliseconds hold_left_{0};
};

}  // namespace fencepost::proxy
