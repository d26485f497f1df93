#include "proxy/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "codec/utf8.h"
#include "proxy/http_types.h"

namespace fencepost::proxy {
namespace {

// The fields of the event being logged on this thread, rendered for the
// current format; the logger is synchronous, so the formatter runs inside
// LogEvent on the same thread.
thread_local std::string event_fields;
bool json_format = false;
// The access log's logger: the default logger's sink and format, but not
// registered, so spdlog::set_level (--log-level, PUT /v1/log-level) leaves
// it at info.
std::shared_ptr<spdlog::logger> access_logger;

// %k in a pattern: the level, spelled as --log-level spells it.
class LevelFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string_view name = LevelName(msg.level);
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelFlag>();
  }
};

// %* in a pattern: the message as a JSON string literal.
class JsonMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string quoted;
    AppendJsonString(&quoted, {msg.payload.data(), msg.payload.size()});
    dest.append(quoted.data(), quoted.data() + quoted.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessage>();
  }
};

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7F; }

// The length of a UTF-8 sequence at the start of `s` that a terminal or a
// log viewer reads as a control or a line break: C1 controls (U+0080 to
// U+009F) and U+2028, U+2029; 0 for anything else.
std::size_t UnicodeControl(std::string_view s) {
  const auto b = [&s](std::size_t i) {
    return i < s.size() ? static_cast<unsigned char>(s[i]) : 0;
  };
  if (b(0) == 0xC2 && b(1) >= 0x80 && b(1) <= 0x9F) return 2;
  if (b(0) == 0xE2 && b(1) == 0x80 && (b(2) == 0xA8 || b(2) == 0xA9)) {
    return 3;
  }
  return 0;
}

// Appends `s` to `dest` (a std::string or spdlog's buffer) with every
// control character (C0, DEL, C1, U+2028, U+2029), the backslash and (when
// `quote` is set) '"' written as escapes, so a logged value (a key decoded
// from %0A, say) cannot start a forged line.
template <class Out>
void AppendEscaped(Out& dest, std::string_view s, bool quote) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto append = [&dest](std::string_view text) {
    for (const char c : text) dest.push_back(c);
  };
  // Bytes that are not UTF-8 (a raw request target, say) are escaped too,
  // so a lone 0x9B cannot act as a terminal's CSI.
  const bool utf8 = codec::IsValidUtf8(s);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const auto c = static_cast<unsigned char>(ch);
    if (!utf8 && c >= 0x80) {
      append("\\x");
      dest.push_back(kHex[c >> 4]);
      dest.push_back(kHex[c & 15]);
      continue;
    }
    if (const std::size_t n = UnicodeControl(s.substr(i)); n > 0) {
      append(n == 2 ? "\\u00" : "\\u202");
      const auto last = static_cast<unsigned char>(s[i + n - 1]);
      if (n == 2) dest.push_back(kHex[last >> 4]);
      dest.push_back(kHex[n == 2 ? last & 15 : last - 0xA0]);
      i += n - 1;
      continue;
    }
    if (!IsControl(c) && c != '\\' && !(quote && c == '"')) {
      dest.push_back(ch);
      continue;
    }
    dest.push_back('\\');
    switch (c) {
      case '\n':
        dest.push_back('n');
        break;
      case '\r':
        dest.push_back('r');
        break;
      case '\t':
        dest.push_back('t');
        break;
      case '\\':
      case '"':
        dest.push_back(ch);
        break;
      default:
        dest.push_back('x');
        dest.push_back(kHex[c >> 4]);
        dest.push_back(kHex[c & 15]);
    }
  }
}

// %~ in a pattern: the message with control characters escaped (text).
class EscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    AppendEscaped(dest, {msg.payload.data(), msg.payload.size()}, false);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>();
  }
};

// A text-format field value: bare when it is a plain word, else quoted,
// with escapes.
void AppendTextValue(std::string* out, std::string_view value) {
  bool plain = !value.empty();
  for (std::size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (IsControl(static_cast<unsigned char>(c)) || c == ' ' || c == '"' ||
        c == '=' || c == '\\' || static_cast<unsigned char>(c) >= 0x80) {
      plain = false;
    }
  }
  if (plain) {
    *out += value;
    return;
  }
  out->push_back('"');
  AppendEscaped(*out, value, true);
  out->push_back('"');
}

// %& in a pattern: the current event's fields.
class EventFields : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    dest.append(event_fields.data(), event_fields.data() + event_fields.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EventFields>();
  }
};

}  // namespace

void SetUpLogging(LogFormat format, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt("fencepost");
  auto formatter = std::make_unique<spdlog::pattern_formatter>(
      spdlog::pattern_time_type::utc);
  json_format = format == LogFormat::kJson;
  formatter->add_flag<JsonMessage>('*');
  formatter->add_flag<EventFields>('&');
  formatter->add_flag<EscapedMessage>('~');
  formatter->add_flag<LevelFlag>('k');
  if (json_format) {
    formatter->set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%k","msg":%*%&})");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %k %~%&");
  }
  access_logger = std::make_shared<spdlog::logger>("fencepost-access",
                                                   logger->sinks().front());
  access_logger->set_formatter(formatter->clone());
  access_logger->set_level(spdlog::level::info);
  access_logger->flush_on(spdlog::level::info);
  logger->set_formatter(std::move(formatter));
  logger->set_level(ParseLogLevel(level).value_or(spdlog::level::info));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

std::string_view LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

std::optional<spdlog::level::level_enum> ParseLogLevel(std::string_view name) {
  for (int i = 0; i < spdlog::level::n_levels; ++i) {
    const auto level = static_cast<spdlog::level::level_enum>(i);
    if (name == LevelName(level)) return level;
  }
  return std::nullopt;
}

namespace {

// The fields of an event, rendered for the current format.
std::string RenderFields(std::string_view event,
                         std::initializer_list<LogField> fields) {
  std::string rendered;
  auto add = [&rendered](std::string_view name, std::string_view value,
                         bool number) {
    if (json_format) {
      rendered += ',';
      AppendJsonString(&rendered, name);
      rendered += ':';
      if (number) {
        rendered += value;
      } else {
        AppendJsonString(&rendered, value);
      }
    } else {
      rendered += ' ';
      rendered += name;
      rendered += '=';
      AppendTextValue(&rendered, value);
    }
  };
  add("event", event, false);
  for (const LogField& field : fields)
    add(field.name, field.value, field.number);
  return rendered;
}

}  // namespace

void LogEvent(spdlog::level::level_enum level, std::string_view event,
              std::string_view message,
              std::initializer_list<LogField> fields) {
  if (!spdlog::should_log(level)) return;
  event_fields = RenderFields(event, fields);
  spdlog::log(level, "{}", message);
  event_fields.clear();
}

void LogAccess(const AccessRecord& r) {
  char duration[32];
  std::snprintf(duration, sizeof duration, "%.3f", r.seconds * 1000);
  event_fields =
      RenderFields("access", {{"port", std::string(r.port)},
                              {"client", std::string(r.client)},
                              {"method", std::string(r.method)},
                              {"target", std::string(r.target)},
                              {"status", std::to_string(r.status), true},
                              {"bytes", std::to_string(r.bytes), true},
                              {"duration_ms", duration, true}});
  spdlog::logger& logger =
      access_logger ? *access_logger : *spdlog::default_logger();
  logger.log(spdlog::level::info, "access");
  event_fields.clear();
}

bool RejectionLogLimiter::Admit(const std::string& fence) {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  auto [it, added] = windows_.try_emplace(fence);
  Window& window = it->second;
  if (added || now - window.start >= std::chrono::seconds(1)) {
    Report(fence, window);
    window = Window{now, 0, 0};
  }
  if (window.logged < burst_) {
    ++window.logged;
    return true;
  }
  ++window.suppressed;
  return false;
}

void RejectionLogLimiter::Flush() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (now - it->second.start < std::chrono::seconds(1)) {
      ++it;
      continue;
    }
    Report(it->first, it->second);
    it = windows_.erase(it);
  }
}

void RejectionLogLimiter::Report(const std::string& fence, Window& window) {
  if (window.suppressed == 0) return;
  LogEvent(spdlog::level::warn, "stale_writes_suppressed",
           std::to_string(window.suppressed) + " more rejected",
           {{"fence", fence, false},
            {"count", std::to_string(window.suppressed), true}});
  window.suppressed = 0;
}

bool OncePerInterval::Admit(const std::string& kind, std::uint64_t* repeated) {
  constexpr std::size_t kMaxKinds = 256;
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  auto found = kinds_.find(kind);
  if (found == kinds_.end()) {
    if (kinds_.size() < kMaxKinds) kinds_.emplace(kind, Last{now, 0});
    *repeated = 0;
    return true;
  }
  Last& last = found->second;
  if (now - last.at < interval_) {
    ++last.held;
    return false;
  }
  *repeated = last.held;
  last = Last{now, 0};
  return true;
}

}  // namespace fencepost::proxy
