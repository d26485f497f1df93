#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fence/fence_record.h"
#include "fence/lease.h"
#include "fence/write.h"

namespace fencepost::storage {

// A change a store made durable: the one kind of event that leaves the
// engines, for watchers, the lease metrics and the log.
struct Change {
  enum class Kind {
    kFenceRaised,    // `fence` was raised (a write, a bump, a grant, an op)
    kLeaseGranted,   // `lease` as granted, live until its deadline
    kLeaseRenewed,   // `lease` as renewed
    kLeaseReleased,  // `lease` as released
    kLeaseExpired,   // `lease` ran out without a release (noticed once)
  };
  Kind kind = Kind::kFenceRaised;
  fence::FenceRecord fence;  // kFenceRaised
  std::string lease_name;    // the lease kinds
  fence::LeaseEntry lease;   // the lease kinds: as it stands after the change
  std::int64_t now_ns = 0;   // the store's monotonic clock when it was made
  // Told by the store's feed of every replica's changes (etcd's watch),
  // not by this process's own commit.
  bool from_feed = false;
  // kFenceRaised by this process: the write's fence::FencedWrite::cause.
  std::string cause;
};

// "granted", "renewed", "released" or "expired" for a lease change (the
// `change` of a watcher's lease event); "" for a fence raise.
std::string_view ChangeName(Change::Kind kind);

// The one channel changes leave a store by (Fences::TellChanges), in the
// order they became durable, on the thread that serves watchers (the io
// thread, which drives the committers and etcd's client too).
using ChangeSink = std::function<void(Change)>;

// What ChangesOf needs of a write, kept while it commits (not its values):
// the fence of each of its writes (a batch's, op by op) and, for a lease
// operation, the operation.
struct WriteSubject {
  std::vector<std::string> fences;
  std::string cause;  // a single write's fence::FencedWrite::cause
  bool batch = false;
  std::optional<fence::LeaseOp> lease;
};
WriteSubject SubjectOf(const fence::FenceWrite& write);

// The changes a committed write made, as `outcome` tells them, in the
// order they were made: the expiry it noticed, the raise of each fence it
// raised (fence::RaisesFence; a batch's, op by op), then a lease's grant,
// renewal or release. `now_ns` is the store's monotonic clock.
std::vector<Change> ChangesOf(const WriteSubject& write,
                              const fence::WriteOutcome& outcome,
                              std::int64_t now_ns);

// A lease that ran out without a release, as a change.
Change LeaseExpired(std::string name, const fence::LeaseRecord& lease,
                    std::int64_t now_ns);
// A lease change the store's feed told (`what`: a ChangeName), from_feed
// set: a grant or renewal is live from `now_ns` for its TTL.
Change FedLeaseChange(std::string name, const fence::LeaseRecord& lease,
                      std::string_view what, std::int64_t now_ns);

}  // namespace fencepost::storage
