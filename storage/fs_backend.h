#pragma once

#include <boost/asio/thread_pool.hpp>
#include <cstddef>
#include <string>

#include "storage/backend.h"
#include "storage/fence_locks.h"
#include "storage/fences.h"
#include "storage/fs_tree.h"

namespace fencepost::storage {

// --backend fs:DIR: values are files under DIR (see FsTree), fences stay in
// LMDB. A write holds its fence's turn (FenceLocks), makes the fence durable
// first, then writes the file on a small thread pool, so writes to one fence
// land in the order their fence commits accepted them. With fences shared
// by replicas (on storage they share), the fence's turn among replicas is
// taken with the fence commit and ended once the file is written.
//
// A refused write changes nothing: FsTree::Check runs before the fence
// commit. A file-system failure after it (disk full, say) leaves the fence
// advanced, which is safe, and never a half-written file.
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
class FsBackend : public Backend {
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
  bool TellRaises(FenceRaised raised) override;

 private:
  FsTree tree_;
  Fences& fences_;
  FenceRaised raised_;
  FenceLocks locks_;
  boost::asio::thread_pool pool_;
};

}  // namespace fencepost::storage
