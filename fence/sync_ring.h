#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct io_uring;

namespace fencepost::fence {

// Data syncs of the write-ahead log submitted without blocking the thread
// that submits them: io_uring's IORING_OP_FSYNC with IORING_FSYNC_DATASYNC
// (an fdatasync the kernel runs on its own workers). Their completions wake
// an eventfd, which the owner watches from its event loop, and are then
// reaped without blocking.
//
// Where io_uring cannot be set up (a kernel without it, or a sandbox that
// forbids it, as Docker's default seccomp profile does), Submit runs each
// fdatasync itself before it returns, as a single-threaded server would,
// and its completions are reaped the same way: slower, never less durable.
//
// Thread safety: one thread at a time (the committer's driver).
class SyncRing {
 public:
  // Throws std::runtime_error when no eventfd can be had.
  explicit SyncRing(unsigned entries);
  ~SyncRing();
  SyncRing(const SyncRing&) = delete;
  SyncRing& operator=(const SyncRing&) = delete;

  // Readable (an eventfd's counter) when a completion may be waiting; its
  // owner reads it down before reaping, so no completion is missed.
  int event_fd() const { return event_fd_; }

  // Queues an fdatasync of `fd` tagged `tag`; Submit sends the queued ones.
  // Returns false when the submission queue is full.
  bool PrepareDataSync(int fd, std::uint64_t tag);
  // Returns 0 or the errno.
  int Submit();
  // Calls `done(tag, result)` (0, or a negative errno) for each completion
  // waiting; with `wait`, first waits for at least one. Returns 0 or the
  // errno of a failed wait.
  int Reap(bool wait, const std::function<void(std::uint64_t, int)>& done);

  // Why the syncs run in Submit instead of through io_uring; empty when
  // they go through io_uring.
  const std::string& fallback() const { return fallback_; }

 private:
  std::unique_ptr<io_uring> ring_;
  int event_fd_ = -1;
  std::string fallback_;
  unsigned entries_ = 0;
  // Without io_uring: the syncs queued, as (fd, tag), and those done, as
  // (tag, result).
  std::vector<std::pair<int, std::uint64_t>> queued_;
  std::vector<std::pair<std::uint64_t, int>> completed_;
};

}  // namespace fencepost::fence
