#pragma once

#include <cstdint>
#include <string>

namespace fencepost::fence {

// What makes an LMDB environment whose commits are not synced by LMDB
// (MDB_NOSYNC) as safe as one whose commits are. LMDB's synced commit
// writes the new pages, syncs them, then writes the meta page that names
// the new tree and syncs it: a crash leaves the new meta page only if its
// tree is on the disk. The applier instead writes a checkpoint's pages back
// at its own pace after the commit and syncs the file once; until that
// sync, the kernel may write the new meta page before the pages it names.
//
// So the applier records each checkpoint it has synced here, in
// DIR/checkpoint (the LMDB transaction id; 8 bytes big-endian and a
// CRC-32C), after its sync and before anything relies on it (the log's
// segments are reused only behind it). At open, before LMDB reads the
// file, a meta page whose transaction id is above the one recorded may
// name pages that never reached the disk: it is overwritten with the other
// meta page, the last synced checkpoint, whose pages a later transaction
// never overwrites (LMDB reuses only pages freed two transactions back).
// LMDB then opens that checkpoint, and recovery replays the log from it.
//
// This reads LMDB's on-disk meta pages (format 0.9: the page header, then
// MDB_meta with its magic at byte 16, the page size at 40 and the
// transaction id at 144), and refuses a file it does not recognise.
class CheckpointFile {
 public:
  // Before LMDB opens DIR/data.mdb: rolls a meta page above the recorded
  // checkpoint back (and syncs it). With no DIR/checkpoint (a new
  // directory, or one written by a release whose commits LMDB synced)
  // there is nothing to roll back. Returns the meta page's transaction id
  // rolled back, or 0. Throws std::runtime_error naming the file when it
  // cannot be read or written, or is not LMDB's.
  static std::uint64_t RollBack(const std::string& dir);

  // Opens (creating it when missing, durably) DIR/checkpoint, recording
  // `synced` when it is created. Throws std::runtime_error naming the
  // file.
  CheckpointFile(const std::string& dir, std::uint64_t synced);
  ~CheckpointFile();
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  // Records that every LMDB transaction up to `txnid` is synced, durably.
  // Returns 0 or the errno.
  int Record(std::uint64_t txnid);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace fencepost::fence
