#include "fence/errc.h"

#include <lmdb.h>

#include <string>

namespace fencepost::fence {
namespace {

class FenceCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "fencepost.fence"; }
  std::string message(int ev) const override {
    switch (static_cast<Errc>(ev)) {
      case Errc::kOk:
        return "ok";
      case Errc::kMapFull:
        return "the LMDB map is full (see --max-map-size)";
      case Errc::kStorage:
        return "LMDB storage failure";
      case Errc::kOverloaded:
        return "too many writes are waiting to commit; retry later";
      case Errc::kTokensExhausted:
        return "the fence is at 18446744073709551615, the largest token: no "
               "higher token is left to grant; use a lease whose name is "
               "under another fence (outside its scope)";
    }
    return "unknown fence error";
  }
};

}  // namespace

const std::error_category& Category() {
  static const FenceCategory category;
  return category;
}

std::error_code MakeError(Errc e) { return {static_cast<int>(e), Category()}; }

std::error_code FromLmdb(int rc) {
  if (rc == MDB_SUCCESS) return {};
  if (rc == MDB_MAP_FULL) return MakeError(Errc::kMapFull);
  return MakeError(Errc::kStorage);
}

}  // namespace fencepost::fence
