#pragma once

#include <boost/asio/thread_pool.hpp>
#include <cstddef>
#include <string>

#include "storage/backend.h"
#include "storage/fences.h"
#include "storage/fs_tree.h"
#include "storage/value_gate.h"

namespace fencepost::storage {

// --backend fs:DIR: values are files under DIR (see FsTree), fences stay in
// LMDB. Writes go through the gate of values kept elsewhere (ValueGate: the
// fence's turn, the fence durable first, then the file written on a small
// thread pool), so writes to one fence land in the order their fence
// commits accepted them. With fences shared by replicas (on storage they
// share), the fence's turn among replicas is taken with the fence commit and
// ended once the file is written. A file write's outcome is always known, so
// no fence is ever held closed.
//
// A refused write changes nothing: FsTree::Check runs before the fence
// commit. A file-system failure after it (disk full, say) leaves the fence
// advanced, which is safe, and never a half-written file. A conditional
// write's precondition is decided over the file read in the key's turn and
// again once the turn among replicas is taken.
//
// Errors, besides Backend's LMDB ones: storage::Errc::kSymlink,
// kSegmentTooLong and kReservedName (the key cannot be a file; nothing
// changed), kCollision (a file and a directory of the key's path disagree;
// nothing changed), and, from a write whose fence was already advanced,
// kNoSpace and kIo (the file is unchanged). Read returns the same path
// errors, and kIo. The constructor throws std::runtime_error when DIR cannot
// be opened.
//
// Thread safety: Read, Write and Ready on the server's io thread.
class FsBackend : public Backend, private ValueStore {
 public:
  // `threads` file-system workers: writes to distinct fences sync in
  // parallel.
  // `exclusive`: lock DIR against other processes (see FsTree); off for
  // replicas whose fences, and turns, are shared.
  FsBackend(const std::string& dir, Fences& fences, std::size_t threads = 2,
            bool exclusive = true);
  ~FsBackend() override;

  std::string_view name() const override { return "fs"; }
  bool supports_post_patch() const override { return false; }
  Awaitable<ReadResult> Read(const ReadRequest& request) override;
  Awaitable<WriteResult> Write(WriteRequest request) override;
  Awaitable<bool> Ready() override;

 private:
  // ValueStore: the file-system requests of a write, on pool_.
  Awaitable<Current> Prepare(const WriteRequest& request,
                             bool read_value) override;
  Awaitable<Current> Reread(const WriteRequest& request) override;
  Awaitable<Stored> Store(const WriteRequest& request,
                          const fence::ValueNow* seen) override;

  FsTree tree_;
  Fences& fences_;
  boost::asio::thread_pool pool_;
  ValueGate gate_;
};

}  // namespace fencepost::storage
