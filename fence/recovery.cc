#include "fence/recovery.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fence/fence_store.h"
#include "fence/lease_table.h"
#include "fence/values.h"

namespace fencepost::fence {
namespace {

// The most records one transaction of the replay takes.
constexpr std::size_t kReplayBatch = 16384;

// The records above `applied_seq`, which must follow it without a gap.
std::vector<WalRecord> Missing(const Env& env, const Wal& wal,
                               std::uint64_t applied_seq) {
  std::vector<WalRecord> missing;
  for (const WalRecord& r : wal.recovered()) {
    if (r.seq <= applied_seq) continue;
    const std::uint64_t expected =
        missing.empty() ? applied_seq + 1 : missing.back().seq + 1;
    if (r.seq != expected) {
      throw std::runtime_error(
          "the write-ahead log in " + env.dir() + " has a gap: record " +
          std::to_string(expected) + " is missing; refusing to start");
    }
    missing.push_back(r);
  }
  return missing;
}

// For each record of `logged` that first raises its fence, whether the
// fence has no record in LMDB (the overlay's `created`).
std::vector<bool> FencesCreated(Env& env,
                                const std::vector<WalRecord>& logged) {
  std::vector<bool> created(logged.size(), false);
  Env::ReadTxn txn(env);
  if (txn.get() == nullptr) {
    throw std::runtime_error("cannot read the fences in " + env.dir() + ": " +
                             mdb_strerror(txn.error()));
  }
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < logged.size(); ++i) {
    if (!logged[i].fence_token || !seen.insert(logged[i].fence).second) {
      continue;
    }
    Slot slot;
    std::optional<FenceRecord> fence;
    if (int rc =
            ReadFence(txn.get(), env.fences(), logged[i].fence, &slot, &fence);
        rc != 0) {
      throw std::runtime_error("cannot read the fences in " + env.dir() + ": " +
                               mdb_strerror(rc));
    }
    created[i] = !fence.has_value();
  }
  return created;
}

}  // namespace

Recovered Replay(Env& env, const Wal& wal, Applier& applier) {
  const std::uint64_t applied_seq = applier.applied_seq();
  std::vector<WalRecord> missing = Missing(env, wal, applied_seq);
  // The writer starts over the segment written less recently: its records
  // go into LMDB now. That segment is usually applied already, since the
  // writer leaves a segment only for one whose records are all in LMDB;
  // only a crash soon after such a switch leaves some here.
  // So are all of them when they might not fit the map, or the disk: then
  // the start fails here, as it should, not the applier once the ports are
  // open.
  std::size_t bytes = 0;
  for (const WalRecord& r : missing) bytes += MapReservation(r);
  const bool fits = env.used_bytes() + bytes <= env.max_map_size() &&
                    env.DiskHolds(2 * bytes);
  const auto later =
      !fits ? missing.end()
            : std::find_if(missing.begin(), missing.end(),
                           [&wal](const WalRecord& r) {
                             return r.seq > wal.first_overwritten_seq();
                           });
  const std::size_t now = static_cast<std::size_t>(later - missing.begin());
  for (std::size_t at = 0; at < now; at += kReplayBatch) {
    const std::vector<WalRecord> chunk(
        missing.begin() + at,
        missing.begin() + std::min(now, at + kReplayBatch));
    if (int rc = applier.Apply(chunk); rc != 0) {
      throw std::runtime_error("cannot replay the write-ahead log into " +
                               env.dir() + ": " + env.Explain(rc));
    }
  }
  Recovered out;
  out.replayed = missing.size();
  missing.erase(missing.begin(), later);
  // The others, in the segment written last, are durable in the log (Wal
  // syncs its segments at open): they are served from the overlay at once,
  // as logged writes always are, and the applier writes them into LMDB in
  // the background, so a restart does not wait for LMDB's flush of their
  // scattered pages. The writer leaves the segment it starts on only once
  // the applier is past them (Wal::Switches), so a second crash finds them
  // in the log again.
  env.overlay().Publish(missing, FencesCreated(env, missing));
  out.next_seq = std::max(applied_seq, wal.last_seq()) + 1;
  out.unapplied = std::move(missing);
  return out;
}

void LoadLeases(Env& env, const std::vector<WalRecord>& logged,
                const SteadyNow& steady_now) {
  const std::int64_t now = steady_now();
  const std::int64_t wall_now = WallNowNs();
  bool corrupt = false;
  auto load = [&](std::string_view name, std::string_view body) {
    LeaseEntry entry;
    if (!DecodeLease(body, &entry.record)) {
      corrupt = true;
      return;
    }
    const std::int64_t ttl_ns =
        static_cast<std::int64_t>(entry.record.ttl_ms) * 1000000;
    if (entry.record.released) {
      // Free.
    } else if (entry.record.renewed_at_ns + ttl_ns <= wall_now) {
      // It ran out before the restart by the wall clock: not live. A
      // wrong wall clock can only free it early (safe: its token is
      // fenced by the next grant) or keep it one TTL longer.
      entry.expiry_noticed = true;
    } else {
      entry.deadline_ns = now + ttl_ns;  // renewed at start
    }
    env.lease_table().Set(std::string(name), std::move(entry));
  };
  Env::ReadTxn txn(env);
  int rc = txn.get() == nullptr ? txn.error() : 0;
  if (rc == 0) {
    rc = ForEachValue(txn.get(), env.leases(),
                      [&](std::string_view name, const StoredValue& value) {
                        load(name, value.body);
                      });
  }
  // Then the logged lease records LMDB lacks yet, newest last.
  for (const WalRecord& r : logged) {
    if (rc == 0 && r.op == WalRecord::Op::kLease) load(r.key, r.body);
  }
  if (rc != 0 || corrupt) {
    throw std::runtime_error("cannot read the leases in " + env.dir() +
                             (corrupt ? ": a record is corrupt"
                                      : std::string(": ") + mdb_strerror(rc)));
  }
}

}  // namespace fencepost::fence
