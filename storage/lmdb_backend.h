#pragma once

#include "storage/backend.h"
#include "storage/fences.h"

namespace fencepost::fence {
class Shards;
}

namespace fencepost::storage {

// The embedded backend: values live in the LMDB environment's values
// database and are written in the same transaction as their fence, so the
// check, the write and the advance are one atomic, durable step.
//
// Value record layout: flags (1 byte, bit 0: a token is present), token
// (8 bytes, big-endian), name length (2 bytes, big-endian, 0 unless the key
// is longer than 511 bytes), the name, then the body.
//
// A value lives in the environment of its fence (see fence::Shards).
//
// Errors: only the LMDB ones of Backend (fence::Errc::kMapFull, kStorage,
// and kOverloaded for Write); no storage::Errc. Ready is false when an
// environment cannot begin a read transaction.
//
// Thread safety: Read and Write may be called from any thread; Write
// resumes on the caller's executor.
class LmdbBackend : public Backend {
 public:
  // Values are read from `shards`; writes are committed through `fences`
  // (the LocalFences of the same shards), which tells their changes.
  LmdbBackend(fence::Shards& shards, Fences& fences)
      : shards_(shards), fences_(fences) {}

  std::string_view name() const override { return "lmdb"; }
  bool supports_post_patch() const override { return false; }
  bool supports_batches() const override { return true; }
  Awaitable<ReadResult> Read(const ReadRequest& request) override;
  Awaitable<WriteResult> Write(WriteRequest request) override;
  // Over every environment, logged values first (see Read).
  Awaitable<KeyPage> ListKeys(std::string prefix, std::string after,
                              std::size_t limit) override;
  Awaitable<bool> Ready() override;

 private:
  fence::Shards& shards_;
  Fences& fences_;
};

}  // namespace fencepost::storage
