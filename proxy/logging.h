#pragma once

#include <spdlog/common.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "proxy/config.h"

namespace fencepost::proxy {

// Sets spdlog's default logger: stderr, UTC timestamps, one line per event,
// as plain text or as JSON objects ({"time", "level", "msg", then the
// event's fields}).
void SetUpLogging(LogFormat format, const std::string& level);

// The name of `level` as --log-level and PUT /v1/log-level spell it (warn,
// not spdlog's "warning"); every log line's level is written this way.
std::string_view LevelName(spdlog::level::level_enum level);

// The one rule for a level's name, of --log-level and PUT /v1/log-level
// alike: exactly one of the names LevelName writes (kLevelNames); nullopt
// for anything else, spdlog's own "warning" and "err" included.
std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view name);
inline constexpr std::string_view kLevelNames =
    "trace, debug, info, warn, error, critical or off";

// One field of a structured event. Numbers are written bare in JSON.
struct LogField {
  std::string_view name;
  std::string value;
  bool number = false;
};

// Logs `message` with a stable `event` name and fields (key, fence,
// presented_token, current_token, client, ...): top-level JSON members in
// JSON format, " name=value" pairs in text format.
void LogEvent(spdlog::level::level_enum level, std::string_view event,
              std::string_view message, std::initializer_list<LogField> fields);

// One line of the access log (--access-log): a request and its answer.
struct AccessRecord {
  std::string_view port;    // "data" or "admin"
  std::string_view client;  // address:port
  std::string_view method;  // "-" when the request line was not read
  std::string_view target;  // as received (escaped when logged); "-" as above
  unsigned status = 0;
  std::uint64_t bytes = 0;  // of the response body sent
  double seconds = 0;       // from the request's first byte to the answer sent
};

// Writes `record` as one "access" event at info level, whatever --log-level
// is (the access log has its own switch), in the format SetUpLogging chose.
void LogAccess(const AccessRecord& record);

// Rate-limits the rejection log per fence, so a zombie leader hammering the
// proxy cannot flood the logs: the first `burst` rejections of a fence in
// each second are logged; the rest are counted and reported as one
// "stale_writes_suppressed" event ("N more rejected") when the second is
// over (by the next rejection or by Flush, called once a second).
//
// Thread safety: all methods may be called from any thread.
class RejectionLogLimiter {
 public:
  explicit RejectionLogLimiter(int burst = 5) : burst_(burst) {}
  // Whether this rejection of `fence` should be logged in full.
  bool Admit(const std::string& fence);
  // Reports the suppressed counts of windows that are over.
  void Flush();

 private:
  struct Window {
    std::chrono::steady_clock::time_point start;
    int logged = 0;
    std::uint64_t suppressed = 0;
  };
  void Report(const std::string& fence, Window& window);

  const int burst_;
  std::mutex mu_;
  std::unordered_map<std::string, Window> windows_;
};

// Lets one line of each kind through per interval, and counts the rest:
// the count since the last line let through of its kind comes with the
// next one. At most 256 kinds are kept; past them every kind is let
// through.
//
// Thread safety: all methods may be called from any thread.
class OncePerInterval {
 public:
  explicit OncePerInterval(std::chrono::steady_clock::duration interval)
      : interval_(interval) {}
  // Whether a line of `kind` may be written now; if so, `*repeated` is how
  // many were held back since the last one.
  bool Admit(const std::string& kind, std::uint64_t* repeated);

 private:
  struct Last {
    std::chrono::steady_clock::time_point at;
    std::uint64_t held = 0;
  };
  const std::chrono::steady_clock::duration interval_;
  std::mutex mu_;
  std::unordered_map<std::string, Last> kinds_;
};

}  // namespace fencepost::proxy
