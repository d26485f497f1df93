#include "fence/sync_ring.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fencepost::fence {

SyncRing::SyncRing(unsigned entries)
    : ring_(std::make_unique<io_uring>()), entries_(entries) {
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) {
    throw std::runtime_error(
        std::string("cannot make an eventfd for the log's syncs: ") +
        std::strerror(errno));
  }
  int rc = io_uring_queue_init(entries, ring_.get(), 0);
  if (rc == 0) {
    rc = io_uring_register_eventfd(ring_.get(), event_fd_);
    if (rc < 0) io_uring_queue_exit(ring_.get());
  }
  if (rc < 0) {
    ring_.reset();
    fallback_ = std::strerror(-rc);
  }
}

SyncRing::~SyncRing() {
  if (ring_) io_uring_queue_exit(ring_.get());
  ::close(event_fd_);
}

bool SyncRing::PrepareDataSync(int fd, std::uint64_t tag) {
  if (!ring_) {
    if (queued_.size() >= entries_) return false;
    queued_.emplace_back(fd, tag);
    return true;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) return false;
  io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
  io_uring_sqe_set_data64(sqe, tag);
  return true;
}

int SyncRing::Submit() {
  if (!ring_) {
    for (const auto& [fd, tag] : queued_) {
      int rc;
      do {
        rc = ::fdatasync(fd);
      } while (rc != 0 && errno == EINTR);
      completed_.emplace_back(tag, rc == 0 ? 0 : -errno);
    }
    queued_.clear();
    if (!completed_.empty()) {
      const std::uint64_t one = 1;
      // Wakes the owner's watch as a completion from io_uring would; a
      // full counter (it never is) is as good as a write.
      [[maybe_unused]] const ssize_t n = ::write(event_fd_, &one, sizeof one);
    }
    return 0;
  }
  while (true) {
    const int rc = io_uring_submit(ring_.get());
    if (rc >= 0) return 0;
    if (rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) return -rc;
  }
}

int SyncRing::Reap(bool wait,
                   const std::function<void(std::uint64_t, int)>& done) {
  if (!ring_) {  // every submitted sync is done already
    std::vector<std::pair<std::uint64_t, int>> now;
    now.swap(completed_);
    for (const auto& [tag, result] : now) done(tag, result);
    return 0;
  }
  io_uring_cqe* cqe = nullptr;
  if (wait) {
    int rc;
    do {
      rc = io_uring_wait_cqe(ring_.get(), &cqe);
    } while (rc == -EINTR);
    if (rc < 0) return -rc;
  }
  while (io_uring_peek_cqe(ring_.get(), &cqe) == 0) {
    const std::uint64_t tag = io_uring_cqe_get_data64(cqe);
    const int result = cqe->res;
    io_uring_cqe_seen(ring_.get(), cqe);
    done(tag, result);
  }
  return 0;
}

}  // namespace fencepost::fence
