#pragma once

// tests/reliability/powercut_fs.py, the FUSE file system that loses unsynced
// writes on a power cut, as the tests mount it: its journal of the writes
// and syncs it was asked for, and its control file's injected sync failures
// and delays. What it sees of a file does not depend on how the program
// issued the call (a syscall or an io_uring operation), so the tests that
// use it observe the disk, not the system calls.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/upstreams.h"

namespace fencepost::testing {

// Why powercut_fs.py cannot run here (no /dev/fuse, no fusepy), or "".
std::string PowercutFsUnsupported();

// One line of the journal (see the top of powercut_fs.py).
struct FsEvent {
  enum class Kind { kWrite, kFsyncBegin, kFsyncEnd };
  std::int64_t ns = 0;  // CLOCK_REALTIME, as strace --timestamps=unix,ns
  Kind kind = Kind::kWrite;
  std::string path;          // from the mount's root: "/data/shard-0/wal-0"
  std::uint64_t offset = 0;  // kWrite
  std::uint64_t length = 0;  // kWrite
  std::string result;        // kFsyncEnd: "0", or an errno's name ("EIO")
};

struct PowercutFsOptions {
  // "" (an honest disk), "1" (--ignore-sync: every sync does nothing) or
  // "log" (--ignore-log-syncs: the log's group syncs do nothing).
  std::string lying;
  bool journal = false;  // keep the journal (Journal reads it)
};

// powercut_fs.py serving dir/root on dir/mnt (both made here), its output
// in dir/powercut_fs.log, its journal in dir/journal, its control file
// dir/control. Waits (at most 15 s) for the mount; throws if it does not
// come. Unmounted (lazily, whatever a process still holds), then stopped,
// on destruction.
// Whether `path` (from the mount's root) is a write-ahead log segment:
// ".../wal-N".
bool IsLogSegment(const std::string& path);

// The log's segment switches in journal[from, to) that came too early: a
// write to one segment of a directory, after the previous write of that
// directory's log went to the other, must begin after a successful sync of
// the segment left, one begun after that segment's last write (recovery
// reads each segment's run from its start: a durable run in the new segment
// after undurable records in the old one reads as a gap). One line per such
// switch. `switches`, if given, counts every switch seen. A power cut or a
// restart begins a new range: a life's last writes may be dropped unsynced.
std::vector<std::string> SwitchesAheadOfTheirSync(
    const std::vector<FsEvent>& journal, std::size_t from, std::size_t to,
    int* switches = nullptr);

class PowercutFs {
 public:
  explicit PowercutFs(const std::string& dir,
                      const PowercutFsOptions& options = {});
  ~PowercutFs();
  PowercutFs(const PowercutFs&) = delete;
  PowercutFs& operator=(const PowercutFs&) = delete;

  // The mount point, a canonical path.
  const std::string& mountpoint() const { return mountpoint_; }

  // The power cut: the kernel writes the mount's dirty pages back (syncfs,
  // which syncs nothing here), then SIGUSR1 drops every unsynced write.
  // Returns how many were, once the file system has logged it.
  std::uint64_t Cut();
  // The file system's output so far.
  std::string Log() const;

  // Replaces the control file's rules (powercut_fs.py's `fail` and `delay`
  // lines); the file system reads them at its next fsync and counts the
  // calls from there. "" removes every rule.
  void Control(const std::string& rules);
  // From the `from`-th fsync/fdatasync on of files whose path from the
  // mount's root matches `glob` ("*/shard-0/wal-0"), fail with `error`
  // ("EIO", "ENOSPC") and sync nothing.
  void FailSyncs(const std::string& glob, int from, const std::string& error);

  // The journal's events so far, in time order.
  std::vector<FsEvent> Journal() const;

 private:
  std::string dir_;
  std::string mountpoint_;
  std::unique_ptr<ChildProcess> fs_;
};

}  // namespace fencepost::testing
