#include "storage/changes.h"

#include <variant>

#include "fence/rules.h"
#include "storage/fences.h"

namespace fencepost::storage {

namespace {

using Verdict = fence::WriteOutcome::Verdict;

void AddRaise(const std::string& fence, const fence::WriteOutcome& outcome,
              std::vector<Change>* out, const std::string& cause = {}) {
  if (!fence::RaisesFence(outcome) || !outcome.current) return;
  Change change;
  change.fence = {fence, *outcome.current, outcome.updated_at_ns};
  change.cause = cause;
  out->push_back(std::move(change));
}

void AddLease(const fence::LeaseOp& op, const fence::WriteOutcome& outcome,
              std::int64_t now_ns, std::vector<Change>* out) {
  if (!outcome.lease) return;
  const fence::LeaseOutcome& lease = *outcome.lease;
  if (lease.expired)
    out->push_back(LeaseExpired(op.name, *lease.expired, now_ns));
  if (outcome.verdict == Verdict::kFailed) return;
  using V = fence::LeaseOutcome::Verdict;
  if (lease.verdict == V::kGranted) AddRaise(op.fence, outcome, out);
  Change change;
  change.lease_name = op.name;
  change.lease.record = lease.lease;
  change.now_ns = now_ns;
  switch (lease.verdict) {
    case V::kGranted:
    case V::kRenewed:
      change.kind = lease.verdict == V::kGranted ? Change::Kind::kLeaseGranted
                                                 : Change::Kind::kLeaseRenewed;
      change.lease.deadline_ns = now_ns + lease.expires_in_ms * 1000000;
      break;
    case V::kReleased:
      change.kind = Change::Kind::kLeaseReleased;
      change.lease.record.released = true;
      break;
    case V::kDenied:
    case V::kNotHeld:
    case V::kTooManyLeases:
      return;
  }
  out->push_back(std::move(change));
}

}  // namespace

std::string_view ChangeName(Change::Kind kind) {
  switch (kind) {
    case Change::Kind::kLeaseGranted:
      return "granted";
    case Change::Kind::kLeaseRenewed:
      return "renewed";
    case Change::Kind::kLeaseReleased:
      return "released";
    case Change::Kind::kLeaseExpired:
      return "expired";
    case Change::Kind::kFenceRaised:
      break;
  }
  return "";
}

Change LeaseExpired(std::string name, const fence::LeaseRecord& lease,
                    std::int64_t now_ns) {
  Change change;
  change.kind = Change::Kind::kLeaseExpired;
  change.lease_name = std::move(name);
  change.lease.record = lease;
  change.now_ns = now_ns;
  return change;
}

Change FedLeaseChange(std::string name, const fence::LeaseRecord& lease,
                      std::string_view what, std::int64_t now_ns) {
  Change change = LeaseExpired(std::move(name), lease, now_ns);
  change.from_feed = true;
  if (what == "granted" || what == "renewed") {
    change.kind = what == "granted" ? Change::Kind::kLeaseGranted
                                    : Change::Kind::kLeaseRenewed;
    change.lease.deadline_ns =
        now_ns + static_cast<std::int64_t>(lease.ttl_ms) * 1000000;
  } else if (what == "released") {
    change.kind = Change::Kind::kLeaseReleased;
  }
  return change;
}

WriteSubject SubjectOf(const fence::FenceWrite& write) {
  WriteSubject subject;
  if (const auto* lease = std::get_if<fence::LeaseOp>(&write)) {
    subject.lease = *lease;
  } else if (const auto* batch = std::get_if<fence::Batch>(&write)) {
    subject.batch = true;
    for (const fence::FencedWrite& w : batch->writes) {
      subject.fences.push_back(w.fence);
    }
  } else {
    const auto& single = std::get<fence::FencedWrite>(write);
    subject.fences.push_back(single.fence);
    subject.cause = single.cause;
  }
  return subject;
}

std::vector<Change> ChangesOf(const WriteSubject& write,
                              const fence::WriteOutcome& outcome,
                              std::int64_t now_ns) {
  std::vector<Change> out;
  if (write.lease) {
    AddLease(*write.lease, outcome, now_ns, &out);
  } else if (write.batch) {
    if (outcome.verdict != Verdict::kAccepted &&
        outcome.verdict != Verdict::kObserved) {
      return out;
    }
    for (std::size_t i = 0; i < write.fences.size() && i < outcome.batch.size();
         ++i) {
      AddRaise(write.fences[i], outcome.batch[i], &out);
    }
  } else if (!write.fences.empty()) {
    AddRaise(write.fences.front(), outcome, &out, write.cause);
  }
  return out;
}

void Fences::TellChangesOf(const WriteSubject& write,
                           const fence::WriteOutcome& outcome) const {
  if (!changes_) return;
  for (Change& change : ChangesOf(write, outcome, SteadyNow())) {
    Tell(std::move(change));
  }
}

}  // namespace fencepost::storage
