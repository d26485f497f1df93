#pragma once

#include <cstdint>
#include <vector>

#include "fence/applier.h"
#include "fence/env.h"
#include "fence/lease.h"
#include "fence/wal.h"

namespace fencepost::fence {

// What a committer's start recovered from its log.
struct Recovered {
  // Records LMDB lacks, published to the overlay, for the applier.
  std::vector<WalRecord> unapplied;
  std::uint64_t replayed = 0;  // records LMDB lacked (applied or not)
  std::uint64_t next_seq = 1;  // the number the next record gets
};

// Puts back what LMDB lacks of `wal`'s records (those above the applier's
// applied_seq; docs/durability.md): the records of the segment the writer
// overwrites first are applied at once through `applier` (all of them when
// they might not fit the map or the disk, so a start fails here rather than
// the applier once the ports are open); the others, durable in the log,
// are published to the overlay and returned for the applier, so a restart
// does not wait for LMDB. Throws std::runtime_error when the log has a gap
// or LMDB cannot take or tell what it needs.
Recovered Replay(Env& env, const Wal& wal, Applier& applier);

// Fills `env`'s lease table from LMDB and then `logged` (the records
// Replay returned, newest last): every lease held counts as renewed at
// `steady_now()`, unless the wall clock says it ran out before the restart.
// Throws std::runtime_error when a record cannot be read.
void LoadLeases(Env& env, const std::vector<WalRecord>& logged,
                const SteadyNow& steady_now);

}  // namespace fencepost::fence
