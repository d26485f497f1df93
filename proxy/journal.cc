#include "proxy/journal.h"

namespace fencepost::proxy {

void Journal::Add(Rejection rejection) {
  std::lock_guard lock(mu_);
  entries_.push_back(std::move(rejection));
  while (entries_.size() > capacity_) entries_.pop_front();
}

std::vector<Rejection> Journal::Recent(std::size_t limit) const {
  std::lock_guard lock(mu_);
  std::vector<Rejection> out;
  for (auto it = entries_.rbegin(); it != entries_.rend() && out.size() < limit;
       ++it) {
    out.push_back(*it);
  }
  return out;
}

}  // namespace fencepost::proxy
