#pragma once

#include "storage/backend.h"
#include "storage/etcd_fences.h"

namespace fencepost::storage {

// --backend etcd (with --fence-store etcd://): values live in etcd next to
// their fences, and each write is one etcd transaction with its fence (see
// EtcdFences), atomic across every replica as the lmdb backend is in one
// process. Reads are linearizable.
//
// Errors: EtcdFences's (Errc::kStoreUnavailable, kValueTooLarge,
// fence::Errc::kOverloaded, kStorage).
//
// Thread safety: every call on the server's io thread.
class EtcdBackend : public Backend {
 public:
  explicit EtcdBackend(EtcdFences& fences) : fences_(fences) {}

  std::string_view name() const override { return "etcd"; }
  bool supports_post_patch() const override { return false; }
  bool supports_batches() const override { return true; }
  Awaitable<ReadResult> Read(const ReadRequest& request) override;
  Awaitable<WriteResult> Write(WriteRequest request) override;
  Awaitable<KeyPage> ListKeys(std::string prefix, std::string after,
                              std::size_t limit) override;
  Awaitable<bool> Ready() override;

 private:
  EtcdFences& fences_;
};

}  // namespace fencepost::storage
