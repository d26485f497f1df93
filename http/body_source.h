#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <cstddef>
#include <cstdint>
#include <string>

#include "http/coro.h"

namespace fencepost::http {

// A request body read as it arrives, never held whole: the server hands one
// to a store that takes values in pieces (the s3:// backend), and a door
// may put a check in front of it (the S3 front door's SigV4 payload check).
//
// length() is known before any byte is read (Content-Length, or the decoded
// length of an aws-chunked body), and the pieces add up to it. The last
// piece comes only once the whole body arrived and passed every check, so
// a store that withholds the last byte until then never completes a body
// that failed.
//
// Thread safety: one reader, on the server's io thread.
class BodySource {
 public:
  struct Piece {
    std::size_t size = 0;  // bytes appended to the caller's string
    bool end = false;      // the body is whole and checked
    // The body cannot be had: the client left or stalled, it did not add
    // up, or it failed its check. Nothing more comes.
    bool failed = false;
  };

  virtual ~BodySource() = default;
  virtual std::uint64_t length() const = 0;
  // Appends at most `max` (> 0) bytes of the body to `*out`. A piece may be
  // empty and neither end nor failed (a check's bytes, say): read on.
  virtual Awaitable<Piece> Next(std::string* out, std::size_t max) = 0;
  // Why the body failed, for the log and the client ("" otherwise).
  virtual std::string why() const = 0;
};

}  // namespace fencepost::http
