#pragma once

#include <string>
#include <vector>

#include "proxy/http_types.h"

namespace fencepost::proxy {

// Bearer-token auth for writes and admin mutations (--auth-token-file).
// Disabled (everything allowed) when made without tokens.
//
// Thread safety: const after construction.
class BearerAuth {
 public:
  BearerAuth() = default;
  explicit BearerAuth(std::vector<std::string> tokens)
      : tokens_(std::move(tokens)) {}

  // One token per line; blank lines and lines starting with '#' are skipped.
  // Throws std::runtime_error when the file cannot be read or holds none.
  static BearerAuth FromFile(const std::string& path);

  bool enabled() const { return !tokens_.empty(); }
  // Whether `request` carries `Authorization: Bearer <one of the tokens>`,
  // compared in constant time for tokens of the same length.
  bool Allows(const Request& request) const;

 private:
  std::vector<std::string> tokens_;
};

}  // namespace fencepost::proxy
