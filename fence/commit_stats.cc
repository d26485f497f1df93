#include "fence/commit_stats.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace fencepost::fence {

Buckets::Buckets(std::span<const double> bounds) : bounds_(bounds) {
  if (bounds.size() > kMaxBounds) {
    throw std::logic_error("a histogram with too many buckets");
  }
}

void Buckets::Observe(double value) {
  // A value equal to a bound belongs to that bound's bucket ("le").
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  ++counts_[static_cast<std::size_t>(at - bounds_.begin())];
  sum_ += value;
}

Buckets& Buckets::operator+=(const Buckets& other) {
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    counts_[i] += other.counts_[i];
  }
  sum_ += other.sum_;
  return *this;
}

std::uint64_t Buckets::count() const {
  return std::accumulate(counts_.begin(), counts_.end(), std::uint64_t{0});
}

CommitStats& CommitStats::operator+=(const CommitStats& other) {
  group_writes += other.group_writes;
  sync_seconds += other.sync_seconds;
  group_wait_seconds += other.group_wait_seconds;
  return *this;
}

}  // namespace fencepost::fence
