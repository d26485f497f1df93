#include "fence/sync_ring.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fencepost::fence {

SyncRing::SyncRing(unsigned entries) : ring_(std::make_unique<io_uring>()) {
  if (int rc = io_uring_queue_init(entries, ring_.get(), 0); rc < 0) {
    ring_.reset();
    throw std::runtime_error(
        std::string("cannot set up io_uring for the write-ahead log's "
                    "syncs: ") +
        std::strerror(-rc));
  }
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int rc = event_fd_ < 0 ? -errno : 0;
  if (rc == 0) rc = io_uring_register_eventfd(ring_.get(), event_fd_);
  if (rc < 0) {
    if (event_fd_ >= 0) ::close(event_fd_);
    io_uring_queue_exit(ring_.get());
    throw std::runtime_error(
        std::string("cannot watch io_uring's completions: ") +
        std::strerror(-rc));
  }
}

SyncRing::~SyncRing() {
  if (!ring_) return;
  io_uring_queue_exit(ring_.get());
  ::close(event_fd_);
}

bool SyncRing::PrepareDataSync(int fd, std::uint64_t tag) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) return false;
  io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
  io_uring_sqe_set_data64(sqe, tag);
  return true;
}

int SyncRing::Submit() {
  while (true) {
    const int rc = io_uring_submit(ring_.get());
    if (rc >= 0) return 0;
    if (rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) return -rc;
  }
}

int SyncRing::Reap(bool wait,
                   const std::function<void(std::uint64_t, int)>& done) {
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
