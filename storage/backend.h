#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "fence/committer.h"
#include "fence/token.h"

namespace fencepost::storage {

using HttpRequest =
    boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse =
    boost::beast::http::response<boost::beast::http::string_body>;

enum class WriteKind { kPut, kDelete, kPost, kPatch };

struct ReadRequest {
  std::string key;
  std::string fence;  // the fence that guards `key`
  bool head = false;
  const HttpRequest* original = nullptr;  // for backends that forward it
};

// A write routed through a fence. `fence` is the fence that guards `key`
// (the key itself, or its scope).
struct WriteRequest {
  WriteKind kind = WriteKind::kPut;
  std::string key;
  std::string fence;
  std::optional<fence::Token> token;  // nullopt only in observe mode
  bool observe = false;
  std::string body;
  const HttpRequest* original = nullptr;  // for backends that forward it
};

struct WriteResult {
  fence::WriteOutcome outcome;
  bool created = false;  // the write made a value that did not exist before
  // A forwarding backend's answer, hop-by-hop fields removed and the length
  // set, to relay as it is (plus Fencing-Token).
  std::optional<HttpResponse> upstream;
  int retry_after = 0;  // seconds, with Errc::kFenceHeld
};

struct ReadResult {
  bool found = false;
  std::string body;
  std::optional<fence::Token> token;  // the token of the write that stored it
  std::size_t size = 0;               // the value's size, also for HEAD
  std::error_code error;
  std::optional<HttpResponse> upstream;  // a forwarding backend's answer
};

// Where values live. Implementations check and advance the fence (through
// the Committer) and store the value so that no lower-token write can land
// after a higher one was acknowledged.
//
// Errors: results carry std::error_code values; fence::Errc::kMapFull when
// the LMDB map is full, fence::Errc::kStorage for other storage failures.
class Backend {
 public:
  virtual ~Backend() = default;
  // The `backend` label of fencepost_backend_errors_total.
  virtual std::string_view name() const = 0;
  // Whether POST and PATCH are accepted as fenced writes.
  virtual bool supports_post_patch() const = 0;
  // Whether values live in LMDB with their fences, so a batch of writes
  // can be applied atomically through the committer (POST /).
  virtual bool supports_batches() const { return false; }
  // Coroutines: the caller keeps `request` alive until the returned
  // awaitable completes.
  virtual boost::asio::awaitable<ReadResult> Read(
      const ReadRequest& request) = 0;
  virtual boost::asio::awaitable<WriteResult> Write(WriteRequest& request) = 0;
  // Whether the backend answers (for /readyz).
  virtual boost::asio::awaitable<bool> Ready() = 0;
};

}  // namespace fencepost::storage
