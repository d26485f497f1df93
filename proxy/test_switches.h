#pragma once

#include <cstddef>
#include <optional>

namespace fencepost::proxy {

// What only the test build of the server (fencepost_test_switches, never
// installed) can turn on, from its FENCEPOST_TEST_* variables
// (proxy/test_switches_main.cc). The shipped binary passes none: it has no
// switch that weakens a promise.
struct TestSwitches {
  // A commit queue bound small enough for a test to overload it.
  std::optional<std::size_t> max_queue_writes;
  // Answers before the log's sync: the broken promise the syscall-order
  // test must catch (its negative control).
  bool answer_before_sync = false;
  // One fs: worker, so a per-thread syscall fault hits a chosen write.
  bool one_fs_thread = false;
  // No hold after an unknown upstream outcome, to show what it prevents.
  bool disable_upstream_gate = false;
  // Each log segment's size, so a test goes round the segments with little
  // data (fence::Shards still keeps at least its floor).
  std::optional<std::size_t> segment_bytes;
  // The memory unapplied records may hold (a checkpoint starts at half),
  // so a test sees many checkpoints with little data.
  std::optional<std::size_t> max_unapplied_bytes;
  // Checkpoints committed without LMDB's syncs: the broken promise the
  // power-cut test must catch (its negative control).
  bool checkpoint_without_sync = false;
};

}  // namespace fencepost::proxy
