#include "proxy/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "proxy/json.h"

namespace fencepost::proxy {
namespace {

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

}  // namespace

void SetUpLogging(LogFormat format, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt("fencepost");
  auto formatter = std::make_unique<spdlog::pattern_formatter>(
      spdlog::pattern_time_type::utc);
  if (format == LogFormat::kJson) {
    formatter->add_flag<JsonMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":%*})");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %l %v");
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace fencepost::proxy
