#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fence/token.h"

namespace fencepost::proxy {

// One refused write, for the incident review: what a zombie tried (a stale
// token), or a write whose precondition did not hold.
struct Rejection {
  std::int64_t time_ns = 0;  // Unix time
  std::string key;
  std::string fence;
  fence::Token presented = 0;
  fence::Token current = 0;
  std::string client;  // address:port
  std::size_t body_length = 0;
  std::string body_sha256;  // lower-case hex
  // "stale_token", or "precondition_failed" with the value's entity tag as
  // ETag spells it (nullopt: no value).
  std::string reason = "stale_token";
  std::optional<std::string> current_etag;
};

// The most recent rejected writes in a bounded in-memory ring
// (GET /v1/rejections).
//
// Thread safety: all methods may be called from any thread.
class Journal {
 public:
  explicit Journal(std::size_t capacity = 1000) : capacity_(capacity) {}

  void Add(Rejection rejection);
  // Up to `limit` entries, newest first.
  std::vector<Rejection> Recent(std::size_t limit) const;

 private:
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::deque<Rejection> entries_;
};

}  // namespace fencepost::proxy
