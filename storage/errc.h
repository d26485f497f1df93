#pragma once

#include <system_error>

namespace fencepost::storage {

// Errors of the fs:, http:// and etcd backends and of the etcd fence store
// (LMDB's are fence::Errc).
enum class Errc {
  kOk = 0,
  kCollision = 1,       // a key and a file or directory of the other kind (409)
  kSymlink = 2,         // a symlink on the key's path, never followed (400)
  kSegmentTooLong = 3,  // a path segment over 255 bytes (400)
  kReservedName = 4,    // the name fencepost gives its temp files (400)
  kNoSpace = 5,         // the file system is full (507)
  kIo = 6,              // any other file system failure (500)
  kUpstreamFailed = 7,  // refused or failed before the write was sent (502)
  kOutcomeUnknown = 8,  // timed out or reset after it was sent (504)
  kFenceHeld = 9,       // the fence waits out an unknown outcome (503)
  // --fence-store etcd://: no answer from etcd (down, or without quorum);
  // the write may or may not have been applied (503).
  kStoreUnavailable = 10,
  kValueTooLarge = 11,  // more than etcd takes in one value (413)
  // A lease in etcd granted under another fence than this replica's
  // --fence-scope settings give it (500).
  kScopeMismatch = 12,
  kBatchTooLarge = 13,  // more than one etcd transaction holds (413)
  // s3://: the store answered an error of its own (StoreError, relayed with
  // its status); nothing was written.
  kStoreRefused = 14,
  kObjectKeyTooLong = 15,  // s3://: PREFIX/key over 1024 bytes (400)
  // A streamed body did not arrive whole, or failed its check: the store
  // never had it whole, nothing was written (400).
  kBodyFailed = 16,
  // The fence moved past a streamed write's token before its body was
  // whole (a bump, a grant, another replica's write): its last byte was
  // never sent, nothing was written (409).
  kOvertaken = 17,
};

const std::error_category& Category();

}  // namespace fencepost::storage

template <>
struct std::is_error_code_enum<fencepost::storage::Errc> : std::true_type {};

namespace fencepost::storage {
inline std::error_code make_error_code(Errc e) {
  return {static_cast<int>(e), Category()};
}
}  // namespace fencepost::storage
