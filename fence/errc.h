#pragma once

#include <system_error>

namespace fencepost::fence {

// Errors the fence library returns. LMDB's own codes are folded into these so
// callers never see an MDB_* number.
enum class Errc {
  kOk = 0,
  kMapFull = 1,     // the LMDB map reached --max-map-size
  kStorage = 2,     // any other LMDB failure; the operation changed nothing
  kOverloaded = 3,  // the committer's queue is full; retry later (503)
  // A grant needs a token above the fence's, which is at the largest
  // uint64: no lease of that fence can be granted again.
  kTokensExhausted = 4,
};

const std::error_category& Category();
std::error_code MakeError(Errc e);
// Maps an LMDB return code (0, MDB_* or errno) to an Errc error.
std::error_code FromLmdb(int rc);

}  // namespace fencepost::fence

template <>
struct std::is_error_code_enum<fencepost::fence::Errc> : std::true_type {};

namespace fencepost::fence {
inline std::error_code make_error_code(Errc e) { return MakeError(e); }
}  // namespace fencepost::fence
