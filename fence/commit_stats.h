#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace fencepost::fence {

// Observations counted in fixed buckets, as a Prometheus histogram counts
// them: counts()[i] holds those at or below bounds()[i] and above the bound
// before it; the last count, those above every bound. Observing never
// allocates. `bounds` (ascending, at most kMaxBounds) must outlive it.
//
// Thread safety: none; its owner guards it.
class Buckets {
 public:
  static constexpr std::size_t kMaxBounds = 16;

  explicit Buckets(std::span<const double> bounds);

  void Observe(double value);
  // Adds `other`'s counts and sum; it must have the same bounds.
  Buckets& operator+=(const Buckets& other);

  std::span<const double> bounds() const { return bounds_; }
  std::span<const std::uint64_t> counts() const {
    return {counts_.data(), bounds_.size() + 1};
  }
  // Observations in all.
  std::uint64_t count() const;
  double sum() const { return sum_; }

 private:
  std::span<const double> bounds_;
  std::array<std::uint64_t, kMaxBounds + 1> counts_{};
  double sum_ = 0;
};

// Writes per group: 1, 2, 4, ... 512 (Options::max_batch_writes).
inline constexpr double kGroupWritesBounds[] = {1,  2,  4,   8,   16,
                                                32, 64, 128, 256, 512};
// Durations, in seconds: 50 µs to 1 s, each bound about twice the one
// before.
inline constexpr double kCommitSecondsBounds[] = {
    0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005,
    0.01,    0.02,   0.05,   0.1,    0.2,   0.5,   1};

// What a committer tells of its groups and its log's syncs, counted since
// it started (Committer::stats), or summed over committers.
struct CommitStats {
  // Each group: its writes (a batch counts as one). Groups that log
  // nothing (every write refused, or kept elsewhere at its fence's own
  // token) count too: their number is this count minus sync_seconds'.
  Buckets group_writes{kGroupWritesBounds};
  // Each log sync (one per group that logged records): from its
  // submission to the driver's reaping of its completion.
  Buckets sync_seconds{kCommitSecondsBounds};
  // Each group: from its decision to its answer (the log written, the
  // syncs it waits for, and those of the groups before it).
  Buckets group_wait_seconds{kCommitSecondsBounds};

  CommitStats& operator+=(const CommitStats& other);
};

}  // namespace fencepost::fence
