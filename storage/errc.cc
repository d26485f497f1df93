#include "storage/errc.h"

#include <string>

namespace fencepost::storage {
namespace {

class StorageCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "fencepost.storage"; }
  std::string message(int ev) const override {
    switch (static_cast<Errc>(ev)) {
      case Errc::kOk:
        return "ok";
      case Errc::kCollision:
        return "the key collides with a file or directory of the other kind";
      case Errc::kSymlink:
        return "a symlink on the key's path is never followed";
      case Errc::kSegmentTooLong:
        return "a path segment is longer than 255 bytes";
      case Errc::kReservedName:
        return "names starting with .fencepost-tmp. are fencepost's temp files";
      case Errc::kNoSpace:
        return "the file system is full";
      case Errc::kIo:
        return "file system failure";
      case Errc::kUpstreamFailed:
        return "the upstream refused or failed before the write was sent";
      case Errc::kOutcomeUnknown:
        return "the upstream did not answer after the write was sent: it may "
               "or may not have applied it";
      case Errc::kFenceHeld:
        return "the fence is held closed after an upstream write's outcome "
               "became unknown; retry after Retry-After seconds";
      case Errc::kStoreUnavailable:
        return "the fence store (etcd) did not answer: it may be down or "
               "without quorum; the write may or may not have been applied";
      case Errc::kValueTooLarge:
        return "the value is larger than the etcd backend stores (512 KiB)";
      case Errc::kScopeMismatch:
        return "the lease was granted under another fence than this "
               "replica's --fence-scope settings give it: every replica must "
               "run with the same --fence-scope flags";
      case Errc::kBatchTooLarge:
        return "the batch holds more than one etcd transaction takes: at "
               "most 64 fences, 63 keys and 1 MiB";
      case Errc::kStoreRefused:
        return "the S3 store refused the request";
      case Errc::kObjectKeyTooLong:
        return "the object key (the backend's prefix, '/', the key) is "
               "longer than the 1024 bytes S3 takes";
      case Errc::kOvertaken:
        return "the fence moved past the write's token while its body was "
               "arriving; nothing was written";
      case Errc::kBodyFailed:
        return "the request's body did not arrive whole or failed its "
               "check; nothing was written";
    }
    return "unknown storage error";
  }
};

}  // namespace

const std::error_category& Category() {
  static const StorageCategory category;
  return category;
}

}  // namespace fencepost::storage
