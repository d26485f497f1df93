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
// So the applier records, in DIR/checkpoint (8 bytes of LMDB transaction
// id, one of state, a CRC-32C), each checkpoint's commit as in flight
// before it commits, and as synced after its sync, before anything relies
// on it (the log's segments are reused only behind it). At open, before
// LMDB reads the file, a meta page of the commit recorded in flight may
// name pages that never reached the disk: it is overwritten with the other
// meta page, the checkpoint before, whose pages the commit never
// overwrote (LMDB reuses only pages freed two transactions back). LMDB
// then opens that checkpoint, and recovery replays the log from it. A
// commit after a checkpoint recorded as synced is not fencepost's
// (LMDB's own tools sync theirs) and stands.
//
// This reads LMDB's on-disk meta pages (format 0.9: the page header, its
// flags at byte 10, then MDB_meta with its magic at 16, version at 20,
// page size at 40 and transaction id at 144), and refuses a file it does
// not recognise.
class CheckpointFile {
 public:
  // Before LMDB opens DIR/data.mdb: rolls the meta page of a commit
  // recorded in flight back (and syncs it). With no DIR/checkpoint (a new
  // directory, or one written by a release whose commits LMDB synced)
  // there is nothing to roll back. Returns the meta page's transaction id
  // rolled back, or 0. Throws std::runtime_error naming the file when it
  // cannot be read or written, is not LMDB's, its meta pages do not follow
  // the commit in flight, or another process has the environment open.
  static std::uint64_t RollBack(const std::string& dir);

  // Opens (creating it when missing, durably) DIR/checkpoint and records
  // `synced` in it. Throws std::runtime_error naming the file.
  CheckpointFile(const std::string& dir, std::uint64_t synced);
  ~CheckpointFile();
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  // Records, durably, that LMDB transaction `txnid` is about to be
  // committed without a sync (Begin), or that it and every one before it
  // are synced (Record). Returns 0 or the errno.
  int Begin(std::uint64_t txnid);
  int Record(std::uint64_t txnid);

 private:
  int Write(std::uint64_t txnid, bool in_flight);
  std::string path_;
  int fd_ = -1;
};

}  // namespace fencepost::fence
