#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <cstdint>
#include <optional>
#include <string>

#include "http/coro.h"
#include "proxy/http_types.h"
#include "proxy/s3_auth.h"
#include "sigv4/body_check.h"

namespace fencepost::proxy {

// A body the S3 front door streams to the store, read from the client's
// connection (`raw`) through its SigV4 payload check (sigv4::BodyCheck):
// the pieces are the body's data (an aws-chunked body decoded), and the
// last piece comes only once the whole body passed, so a store that is
// given it through HttpPool::StreamTrip never completes a body that failed.
// `length` is the data's (the decoded length of an aws-chunked body).
//
// Thread safety: one reader, on the server's io thread.
class CheckedBody final : public BodySource {
 public:
  CheckedBody(BodySource& raw, sigv4::BodyExpect expect, std::uint64_t length)
      : raw_(raw), check_(std::move(expect)), length_(length) {}

  std::uint64_t length() const override { return length_; }
  Awaitable<Piece> Next(std::string* out, std::size_t max) override;
  std::string why() const override;

  // Why the body failed its check, in S3's terms; nullopt when it did not
  // fail, or failed to arrive (the client left: raw's why()).
  std::optional<S3Auth::Refusal> refusal() const;

 private:
  Piece Fail();

  BodySource& raw_;
  sigv4::BodyCheck check_;
  std::uint64_t length_;
  std::string received_;   // the raw piece being checked
  std::error_code error_;  // the check's
  bool failed_ = false;
};

}  // namespace fencepost::proxy
