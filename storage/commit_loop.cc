#include "storage/commit_loop.h"

#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <stdexcept>
#include <utility>

namespace fencepost::storage {
namespace {

namespace asio = boost::asio;

// Calls `ready` each time the descriptor turns readable; keeps itself alive
// through its pending wait, so it lasts as long as the io_context runs.
//
// A watch is not work of its own: io_context::run returns once everything
// else is done (the server drained), whether or not a watch is pending. A
// write waiting for its sync keeps the loop running through its own work
// guard (AsyncSubmit), so its completion is still watched for.
class Watch : public std::enable_shared_from_this<Watch> {
 public:
  Watch(asio::io_context& io, int fd, std::function<void()> ready)
      : io_(io), descriptor_(io, fd), ready_(std::move(ready)) {}

  // Call from a handler running on the loop (never while the count of
  // outstanding work could reach zero before the wait is counted).
  void Arm() {
    descriptor_.async_wait(
        asio::posix::stream_descriptor::wait_read,
        [self = shared_from_this()](const boost::system::error_code& ec) {
          // The loop counts this completion off; count it back first.
          self->io_.get_executor().on_work_started();
          if (ec) return;
          self->ready_();
          self->Arm();
        });
    io_.get_executor().on_work_finished();
  }

 private:
  asio::io_context& io_;
  asio::posix::stream_descriptor descriptor_;
  std::function<void()> ready_;
};

}  // namespace

fence::Committer::Options::Loop CommitLoopOn(asio::io_context& io) {
  fence::Committer::Options::Loop loop;
  loop.post = [&io](std::function<void()> fn) {
    asio::post(io, std::move(fn));
  };
  loop.watch = [&io](int fd, std::function<void()> ready) {
    // Its own descriptor: the committer closes its own when it stops.
    const int own = ::dup(fd);
    if (own < 0) throw std::runtime_error("cannot watch the committer's fds");
    // Armed from a posted handler, which holds the loop's work meanwhile.
    auto watch = std::make_shared<Watch>(io, own, std::move(ready));
    asio::post(io, [watch] { watch->Arm(); });
  };
  return loop;
}

}  // namespace fencepost::storage
