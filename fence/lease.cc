#include "fence/lease.h"

#include <algorithm>

#include "fence/big_endian.h"
#include "fence/lease_table.h"

namespace fencepost::fence {
namespace {

// version (1), flags (1: bit 0 released), token, ttl, acquired, renewed,
// transitions (8 each), the holder's length (2), the holder, then the fence.
constexpr std::size_t kHeader = 2 + 5 * 8 + 2;
constexpr char kVersion = 1;

}  // namespace

std::string EncodeLease(const LeaseRecord& lease) {
  std::string out(kHeader, '\0');
  out[0] = kVersion;
  out[1] = lease.released ? 1 : 0;
  StoreBigEndian(out.data() + 2, lease.token, 8);
  StoreBigEndian(out.data() + 10, lease.ttl_ms, 8);
  StoreBigEndian(out.data() + 18,
                 static_cast<std::uint64_t>(lease.acquired_at_ns), 8);
  StoreBigEndian(out.data() + 26,
                 static_cast<std::uint64_t>(lease.renewed_at_ns), 8);
  StoreBigEndian(out.data() + 34, lease.transitions, 8);
  StoreBigEndian(out.data() + 42, lease.holder.size(), 2);
  out += lease.holder;
  out += lease.fence;
  return out;
}

bool DecodeLease(std::string_view bytes, LeaseRecord* lease) {
  if (bytes.size() < kHeader || bytes[0] != kVersion) return false;
  const char* p = bytes.data();
  const std::size_t holder_size = LoadBigEndian(p + 42, 2);
  if (bytes.size() < kHeader + holder_size) return false;
  lease->released = p[1] & 1;
  lease->token = LoadBigEndian(p + 2, 8);
  lease->ttl_ms = LoadBigEndian(p + 10, 8);
  lease->acquired_at_ns = static_cast<std::int64_t>(LoadBigEndian(p + 18, 8));
  lease->renewed_at_ns = static_cast<std::int64_t>(LoadBigEndian(p + 26, 8));
  lease->transitions = LoadBigEndian(p + 34, 8);
  lease->holder = std::string(bytes.substr(kHeader, holder_size));
  lease->fence = std::string(bytes.substr(kHeader + holder_size));
  return true;
}

std::int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t WallNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<LeaseTable::Entry> LeaseTable::Find(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

namespace {

// Whether `entry` belongs in the deadline index: held, expiry not noticed.
bool Pending(const LeaseTable::Entry& entry) {
  return !entry.record.released && !entry.expiry_noticed;
}

}  // namespace

void LeaseTable::Index(const std::string& name, const Entry* before,
                       const Entry& after) {
  if (before != nullptr && Pending(*before)) {
    by_deadline_.erase({before->deadline_ns, name});
  }
  if (Pending(after)) by_deadline_.emplace(after.deadline_ns, name);
}

void LeaseTable::Set(const std::string& name, Entry entry) {
  std::lock_guard lock(mu_);
  auto [it, added] = entries_.try_emplace(name);
  Index(name, added ? nullptr : &it->second, entry);
  if (!added && it->second.record.fence != entry.record.fence) {
    auto old = by_fence_.find(it->second.record.fence);
    if (old != by_fence_.end()) {
      old->second.erase(name);
      if (old->second.empty()) by_fence_.erase(old);
    }
  }
  by_fence_[entry.record.fence].insert(name);
  it->second = std::move(entry);
}

std::optional<std::pair<std::string, LeaseTable::Entry>>
LeaseTable::LiveOnFence(std::string_view fence, std::string_view name,
                        std::int64_t now_ns) const {
  std::lock_guard lock(mu_);
  auto names = by_fence_.find(fence);
  if (names == by_fence_.end()) return std::nullopt;
  for (const std::string& other : names->second) {
    if (other == name) continue;
    const Entry& entry = entries_.find(other)->second;
    if (IsLive(entry, now_ns)) return std::make_pair(other, entry);
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, LeaseTable::Entry>> LeaseTable::List(
    std::string_view prefix, std::string_view after, std::size_t limit) const {
  std::vector<std::pair<std::string, Entry>> out;
  std::lock_guard lock(mu_);
  auto it = after.empty() || after < prefix ? entries_.lower_bound(prefix)
                                            : entries_.upper_bound(after);
  for (; it != entries_.end() && out.size() < limit; ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    out.emplace_back(it->first, it->second);
  }
  return out;
}

std::vector<std::pair<std::string, LeaseRecord>> LeaseTable::NoticeExpired(
    std::int64_t now_ns) {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, LeaseRecord>> noticed;
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now_ns) {
    auto node = by_deadline_.extract(by_deadline_.begin());
    Entry& entry = entries_.find(node.value().second)->second;
    entry.expiry_noticed = true;
    noticed.emplace_back(std::move(node.value().second), entry.record);
  }
  // In name order, as a walk of the records gave them.
  std::sort(noticed.begin(), noticed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return noticed;
}

std::optional<LeaseRecord> LeaseTable::NoticeExpired(std::string_view name,
                                                     std::int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  Entry& entry = it->second;
  if (entry.record.released || entry.expiry_noticed ||
      now_ns < entry.deadline_ns) {
    return std::nullopt;
  }
  by_deadline_.erase({entry.deadline_ns, it->first});
  entry.expiry_noticed = true;
  return entry.record;
}

std::size_t LeaseTable::Live(std::int64_t now_ns) const {
  std::lock_guard lock(mu_);
  std::size_t ran_out = 0;
  for (auto it = by_deadline_.begin();
       it != by_deadline_.end() && it->first <= now_ns; ++it) {
    ++ran_out;
  }
  return by_deadline_.size() - ran_out;
}

std::size_t LeaseTable::Held() const {
  std::lock_guard lock(mu_);
  return by_deadline_.size();
}

}  // namespace fencepost::fence
