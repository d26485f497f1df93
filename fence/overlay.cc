#include "fence/overlay.h"

namespace fencepost::fence {

void Overlay::Publish(const std::vector<WalRecord>& records,
                      const std::vector<bool>& created) {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const WalRecord& r = records[i];
    if (r.fence_token) {
      auto [it, added] = fences_.try_emplace(r.fence);
      // A fence created by an earlier record not yet applied stays created
      // until that record is.
      const std::uint64_t created_seq =
          created[i] ? r.seq : (added ? 0 : it->second.created_seq);
      it->second = {*r.fence_token, r.updated_at_ns, r.seq, created_seq};
    }
    if (r.op == WalRecord::Op::kPut || r.op == WalRecord::Op::kDelete) {
      Value& v = values_.try_emplace(r.key).first->second;
      v.present = r.op == WalRecord::Op::kPut;
      v.body.assign(r.body);  // reuses the buffer of the value it replaces
      v.token = r.value_token;
      v.seq = r.seq;
      v.content_type.assign(r.content_type);
    }
  }
}

void Overlay::Retire(std::span<const WalRecord> records) {
  std::lock_guard lock(mu_);
  for (const WalRecord& r : records) {
    if (r.fence_token) {
      auto it = fences_.find(r.fence);
      if (it != fences_.end() && it->second.seq == r.seq) {
        fences_.erase(it);
      } else if (it != fences_.end() && it->second.created_seq == r.seq) {
        it->second.created_seq = 0;  // LMDB has the fence now
      }
    }
    if (r.op == WalRecord::Op::kPut || r.op == WalRecord::Op::kDelete) {
      auto it = values_.find(r.key);
      if (it != values_.end() && it->second.seq == r.seq) values_.erase(it);
    }
  }
}

const Overlay::Fence* Overlay::FindFence(std::string_view fence) const {
  auto it = fences_.find(fence);
  return it == fences_.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, bool>> Overlay::ValuesUnder(
    std::string_view prefix) const {
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& [key, value] : values_) {
    if (key.starts_with(prefix)) out.emplace_back(key, value.present);
  }
  return out;
}

const Overlay::Value* Overlay::FindValue(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, Overlay::Fence>> Overlay::FencesAfter(
    std::string_view prefix, std::string_view after) const {
  std::vector<std::pair<std::string, Fence>> out;
  for (auto it = fences_.upper_bound(after); it != fences_.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) {
      if (it->first > prefix) break;
      continue;
    }
    out.emplace_back(it->first, it->second);
  }
  return out;
}

std::uint64_t Overlay::created_count() const {
  std::uint64_t n = 0;
  for (const auto& [name, fence] : fences_) n += fence.created_seq != 0;
  return n;
}

}  // namespace fencepost::fence
