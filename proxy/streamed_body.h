#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "http/body_source.h"
#include "http/coro.h"

namespace fencepost::proxy {

// The largest body the server streams (a 5 GiB object, with the chunk
// signatures of an aws-chunked body of 8 KiB chunks).
inline constexpr std::uint64_t kMaxStreamedBody =
    (std::uint64_t{5} << 30) + (std::uint64_t{64} << 20);

// The body of a request whose header alone was read, read from the
// connection as its reader asks (http::BodySource): a Content-Length body,
// each read under `read_timeout`. `Expect: 100-continue` is answered at the
// first read, so a request refused on its header is never sent its body.
// The connection can serve another request only once the body was read to
// its end (finished()).
//
// Thread safety: the connection's coroutine only.
template <class Stream>
class StreamedBody final : public http::BodySource {
 public:
  using HeaderParser =
      boost::beast::http::request_parser<boost::beast::http::string_body>;

  // `header_parser` has read the header only; `stream` and `buffer` (which
  // may hold the body's first bytes) outlive this.
  StreamedBody(Stream& stream, boost::beast::flat_buffer& buffer,
               HeaderParser&& header_parser,
               std::chrono::steady_clock::duration read_timeout)
      : stream_(stream),
        buffer_(buffer),
        parser_(std::move(header_parser)),
        read_timeout_(read_timeout) {
    const auto& header = parser_.get();
    continue_ = header.version() >= 11 &&
                boost::beast::iequals(header[boost::beast::http::field::expect],
                                      "100-continue");
    length_ = parser_.content_length().value_or(0);
    parser_.body_limit(kMaxStreamedBody);
  }

  std::uint64_t length() const override { return length_; }
  bool finished() const { return finished_; }

  // Reads what its handler left of the body and drops it, so that the
  // connection can serve its next request: only when at most `limit`
  // bytes are left and the client is not waiting for 100 Continue (it
  // was refused on its header: it may never send the body). Whether the
  // body was read to its end.
  Awaitable<bool> Drain(std::uint64_t limit) {
    if (finished_ || parser_.is_done()) co_return true;
    if (failed_ || continue_ || length_ - read_ > limit) co_return false;
    std::string sink;
    while (!finished_ && !failed_) {
      sink.clear();
      co_await Next(&sink, 64 * 1024);
    }
    co_return finished_;
  }
  std::string why() const override { return why_; }

  Awaitable<Piece> Next(std::string* out, std::size_t max) override {
    namespace asio = boost::asio;
    namespace bhttp = boost::beast::http;
    Piece piece;
    if (failed_) {
      piece.failed = true;
      co_return piece;
    }
    if (finished_ || parser_.is_done()) {
      finished_ = true;
      piece.end = true;
      co_return piece;
    }
    boost::beast::error_code ec;
    auto token = asio::redirect_error(kUseAwaitable, ec);
    auto& lowest = boost::beast::get_lowest_layer(stream_);
    if (continue_) {
      continue_ = false;
      static constexpr std::string_view kContinue =
          "HTTP/1.1 100 Continue\r\n\r\n";
      lowest.expires_after(read_timeout_);
      co_await asio::async_write(stream_, asio::buffer(kContinue), token);
      if (ec) co_return Fail("the client left: " + ec.message());
    }
    const std::size_t old = out->size();
    out->resize(old + max);
    parser_.get().body().data = out->data() + old;
    parser_.get().body().size = max;
    lowest.expires_after(read_timeout_);
    co_await bhttp::async_read_some(stream_, buffer_, parser_, token);
    piece.size = max - parser_.get().body().size;
    read_ += piece.size;
    out->resize(old + piece.size);
    if (ec && ec != bhttp::error::need_buffer) {
      co_return Fail("the body did not arrive whole: " + ec.message());
    }
    if (parser_.is_done()) {
      finished_ = true;
      piece.end = true;
    }
    co_return piece;
  }

 private:
  Piece Fail(std::string why) {
    failed_ = true;
    why_ = std::move(why);
    Piece piece;
    piece.failed = true;
    return piece;
  }

  Stream& stream_;
  boost::beast::flat_buffer& buffer_;
  boost::beast::http::request_parser<boost::beast::http::buffer_body> parser_;
  std::chrono::steady_clock::duration read_timeout_;
  std::uint64_t length_ = 0;
  std::uint64_t read_ = 0;  // bytes of the body handed out
  bool continue_ = false;
  bool finished_ = false;
  bool failed_ = false;
  std::string why_;
};

}  // namespace fencepost::proxy
