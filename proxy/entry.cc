// The fencepost binary's entry: the client commands, or `serve`.

#include "proxy/entry.h"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "proxy/assembly.h"
#include "proxy/config.h"
#include "proxy/logging.h"

namespace {

namespace asio = boost::asio;
using namespace fencepost;

constexpr int kUsageExit = 2;

// The line that says the server is up, and where.
void LogStarted(const proxy::Config& config, proxy::Assembly& assembly) {
  auto to_string = [](const asio::ip::tcp::endpoint& e) {
    proxy::ListenAddress a{e.address().to_string(), e.port()};
    return a.ToString();
  };
  const bool shared = config.etcd.has_value();
  const char* mode =
      config.mode == proxy::Mode::kEnforce ? "enforce" : "observe";
  if (config.s3_listen) {
    proxy::LogEvent(spdlog::level::info, "s3_started",
                    "fencepost's S3 front door listening",
                    {{"s3", to_string(assembly.s3())},
                     {"bucket", config.backend_spec.bucket}});
  }
  proxy::LogEvent(spdlog::level::info, "started", "fencepost listening",
                  {{"version", FENCEPOST_VERSION},
                   {"data", to_string(assembly.data())},
                   {"admin", to_string(assembly.admin())},
                   {"backend", config.backend},
                   {"fence_store", config.fence_store},
                   {"data_dir", shared ? "-" : config.data_dir},
                   {"mode", mode}});
}

int Serve(const proxy::Config& config, const proxy::TestSwitches& test) {
  proxy::Assembly::Failure failure;
  const std::unique_ptr<proxy::Assembly> assembly =
      proxy::Assembly::Build(config, test, &failure);
  if (!assembly) {
    std::cerr << "fencepost: " << failure.message << "\n";
    return failure.exit_status;
  }
  asio::io_context& io = assembly->io();
  proxy::Service& service = assembly->service();

  // Once a second: report the rejections the log rate limit held back.
  asio::steady_timer flush_timer(io);
  std::function<void()> arm_flush = [&] {
    flush_timer.expires_after(std::chrono::seconds(1));
    flush_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      service.FlushLogSummaries();
      arm_flush();
    });
  };
  arm_flush();

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("received signal {}; draining", signal);
    service.StartDraining();
    assembly->server().Shutdown();
    flush_timer.cancel();
    if (assembly->etcd() != nullptr) assembly->etcd()->Shutdown();
    assembly->StopWatching();
  });

  LogStarted(config, *assembly);
  io.run();
  assembly->Stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

namespace fencepost::proxy {

int Main(int argc, char** argv, const TestSwitches& test) {
  if (cli::IsClientCommand(argc, argv)) {
    return cli::RunClientCommand(argc, argv);
  }
  proxy::Invocation invocation;
  try {
    invocation = proxy::ParseInvocation(
        std::vector<std::string>(argv + 1, argv + argc),
        [](const std::string& name) -> std::optional<std::string> {
          const char* value = std::getenv(name.c_str());
          if (value == nullptr) return std::nullopt;
          return std::string(value);
        });
  } catch (const proxy::ConfigError& e) {
    std::cerr << "fencepost: " << e.what()
              << "\nRun 'fencepost --help' for usage.\n";
    return kUsageExit;
  }
  switch (invocation.command) {
    case proxy::Command::kHelp:
      std::cout << proxy::Usage();
      return 0;
    case proxy::Command::kVersion:
      std::cout << "fencepost " << FENCEPOST_VERSION << "\n";
      return 0;
    case proxy::Command::kServe:
      break;
  }
  proxy::SetUpLogging(invocation.config.log_format,
                      invocation.config.log_level);
  return Serve(invocation.config, test);
}

}  // namespace fencepost::proxy
