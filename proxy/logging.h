#pragma once

#include "proxy/config.h"

namespace fencepost::proxy {

// Sets spdlog's default logger: stderr, UTC timestamps, one line per event,
// as plain text or as JSON objects ({"time", "level", "msg"}).
void SetUpLogging(LogFormat format, const std::string& level);

}  // namespace fencepost::proxy
