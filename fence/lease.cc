#include "fence/lease.h"

#include "fence/big_endian.h"

namespace fencepost::fence {
namespace {

// version (1), token, ttl, acquired, renewed, transitions (8 each), then the
// holder.
constexpr std::size_t kHeader = 1 + 5 * 8;
constexpr char kVersion = 1;

}  // namespace

std::string EncodeLease(const LeaseRecord& lease) {
  std::string out(kHeader, '\0');
  out[0] = kVersion;
  StoreBigEndian(out.data() + 1, lease.token, 8);
  StoreBigEndian(out.data() + 9, lease.ttl_ms, 8);
  StoreBigEndian(out.data() + 17,
                 static_cast<std::uint64_t>(lease.acquired_at_ns), 8);
  StoreBigEndian(out.data() + 25,
                 static_cast<std::uint64_t>(lease.renewed_at_ns), 8);
  StoreBigEndian(out.data() + 33, lease.transitions, 8);
  out += lease.holder;
  return out;
}

bool DecodeLease(std::string_view bytes, LeaseRecord* lease) {
  if (bytes.size() < kHeader || bytes[0] != kVersion) return false;
  const char* p = bytes.data();
  lease->token = LoadBigEndian(p + 1, 8);
  lease->ttl_ms = LoadBigEndian(p + 9, 8);
  lease->acquired_at_ns = static_cast<std::int64_t>(LoadBigEndian(p + 17, 8));
  lease->renewed_at_ns = static_cast<std::int64_t>(LoadBigEndian(p + 25, 8));
  lease->transitions = LoadBigEndian(p + 33, 8);
  lease->holder = std::string(bytes.substr(kHeader));
  return true;
}

std::int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::optional<LeaseTable::Entry> LeaseTable::Find(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void LeaseTable::Set(const std::string& name, Entry entry) {
  std::lock_guard lock(mu_);
  entries_[name] = std::move(entry);
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

std::size_t LeaseTable::NoticeExpired(std::int64_t now_ns) {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (auto& [name, entry] : entries_) {
    if (!entry.record.holder.empty() && !entry.expiry_noticed &&
        now_ns >= entry.deadline_ns) {
      entry.expiry_noticed = true;
      ++n;
    }
  }
  return n;
}

bool LeaseTable::NoticeExpired(std::string_view name, std::int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return false;
  Entry& entry = it->second;
  if (entry.record.holder.empty() || entry.expiry_noticed ||
      now_ns < entry.deadline_ns) {
    return false;
  }
  entry.expiry_noticed = true;
  return true;
}

std::size_t LeaseTable::Live(std::int64_t now_ns) const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [name, entry] : entries_) n += IsLive(entry, now_ns);
  return n;
}

}  // namespace fencepost::fence
