#include "http/json.h"

#include <cstdio>
#include <ctime>

namespace fencepost::http {

std::string FormatRfc3339(std::int64_t unix_ns) {
  const std::time_t seconds = unix_ns / 1000000000;
  const long micros = static_cast<long>((unix_ns % 1000000000) / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, micros);
  return buf;
}

}  // namespace fencepost::http
