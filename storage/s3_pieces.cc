#include <algorithm>
#include <string>

#include "storage/s3_backend.h"

// The s3:// backend's reads of large objects: piece by piece.
namespace fencepost::storage {

namespace bhttp = boost::beast::http;
using Sent = HttpPool::Sent;

namespace {

constexpr HttpPool::Resend kRead = HttpPool::Resend::kIfUnanswered;

}  // namespace

std::uint64_t S3Backend::ObjectSize(std::string_view content_range) {
  const std::size_t slash = content_range.rfind('/');
  if (slash == std::string_view::npos) return 0;
  const std::string_view digits = content_range.substr(slash + 1);
  if (digits.empty() || digits.size() > 19 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return 0;
  }
  return std::stoull(std::string(digits));
}

class S3Backend::Pieces final : public fencepost::http::BodySource {
 public:
  Pieces(S3Backend& backend, std::string object, std::string etag,
         std::uint64_t total, std::string first)
      : backend_(backend),
        object_(std::move(object)),
        etag_(std::move(etag)),
        total_(total),
        next_(first.size()),
        held_(std::move(first)) {}

  std::uint64_t length() const override { return total_; }
  std::string why() const override { return why_; }

  Awaitable<Piece> Next(std::string* out, std::size_t max) override {
    Piece piece;
    if (held_.empty() && next_ < total_) {
      const std::uint64_t last = std::min(next_ + kReadPiece, total_) - 1;
      http::Request get =
          S3Request(backend_.options_.location, bhttp::verb::get, object_, "");
      get.set(bhttp::field::range,
              "bytes=" + std::to_string(next_) + "-" + std::to_string(last));
      get.set(bhttp::field::if_match, etag_);
      HttpPool::Exchange exchange =
          co_await backend_.Send(std::move(get), kRead);
      if (exchange.sent != Sent::kAnswered ||
          exchange.response.result_int() != 206 ||
          exchange.response.body().size() != last - next_ + 1) {
        why_ = exchange.sent != Sent::kAnswered
                   ? "the store did not answer: " + exchange.error
                   : "the object changed or the store refused its next "
                     "piece (" +
                         std::to_string(exchange.response.result_int()) + ")";
        piece.failed = true;
        co_return piece;
      }
      held_ = std::move(exchange.response.body());
      next_ = last + 1;
    }
    piece.size = std::min<std::size_t>(max, held_.size());
    out->append(held_, 0, piece.size);
    held_.erase(0, piece.size);
    piece.end = held_.empty() && next_ == total_;
    co_return piece;
  }

 private:
  S3Backend& backend_;
  std::string object_;
  std::string etag_;  // as the store sent it
  std::uint64_t total_;
  std::uint64_t next_;  // the first byte not yet read from the store
  std::string held_;    // read, not yet handed out
  std::string why_;
};

std::unique_ptr<fencepost::http::BodySource> S3Backend::PiecesAfter(
    std::string object, std::string etag, std::uint64_t total,
    std::string first) {
  return std::make_unique<Pieces>(*this, std::move(object), std::move(etag),
                                  total, std::move(first));
}

}  // namespace fencepost::storage
