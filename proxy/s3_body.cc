#include "proxy/s3_body.h"

namespace fencepost::proxy {

BodySource::Piece CheckedBody::Fail() {
  failed_ = true;
  Piece piece;
  piece.failed = true;
  return piece;
}

Awaitable<BodySource::Piece> CheckedBody::Next(std::string* out,
                                               std::size_t max) {
  if (failed_) co_return Fail();
  received_.clear();
  const Piece got = co_await raw_.Next(&received_, max);
  if (got.failed) co_return Fail();
  const std::size_t before = out->size();
  error_ = check_.Feed(received_, out);
  if (!error_ && got.end) error_ = check_.Finish();
  if (error_) {
    out->resize(before);
    co_return Fail();
  }
  Piece piece;
  piece.size = out->size() - before;
  piece.end = got.end;
  co_return piece;
}

std::string CheckedBody::why() const {
  if (error_) return "its check failed: " + error_.message();
  return raw_.why();
}

std::optional<S3Auth::Refusal> CheckedBody::refusal() const {
  if (!error_) return std::nullopt;
  return S3Auth::BodyRefusal(error_);
}

}  // namespace fencepost::proxy
