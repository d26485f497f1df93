// libFuzzer target: a whole request through Beast's parser, fencepost's
// framing checks and the request handler, with no sockets (the way Beast
// fuzzes its own parser). The first byte picks the port. Every answer must
// carry a length (or be a 204/304), and a refused write must change nothing.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <stdlib.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <filesystem>
#include <string>

#include "fence/shards.h"
#include "metrics/metrics.h"
#include "proxy/config.h"
#include "proxy/framing.h"
#include "proxy/service.h"
#include "storage/lmdb_backend.h"
#include "storage/local_fences.h"

namespace {

namespace beast_http = boost::beast::http;
using namespace fencepost;

struct World {
  World() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "fencepost-fuzz.XXXXXX")
            .string();
    dir = mkdtemp(pattern.data());
    fence::Shards::Options options;
    options.dir = dir;
    options.max_map_size = 256u << 20;
    options.count = 2;
    shards = std::make_unique<fence::Shards>(options);
    fences = std::make_unique<storage::LocalFences>(*shards);
    backend = std::make_unique<storage::LmdbBackend>(*shards, *fences);
    config.fence_scopes = {"scoped/"};
    service =
        std::make_unique<proxy::Service>(config, *fences, *backend, metrics);
  }
  std::string dir;
  proxy::Config config;
  metrics::Metrics metrics{"lmdb"};
  std::unique_ptr<fence::Shards> shards;
  std::unique_ptr<storage::LocalFences> fences;
  std::unique_ptr<storage::LmdbBackend> backend;
  std::unique_ptr<proxy::Service> service;
};

// Answers `request` as a session would.
proxy::Response Answer(World& world, metrics::Port port,
                       const proxy::Request& request) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, world.service->Handle(port, request),
                                      boost::asio::use_future);
  io.run();
  return future.get();
}

// What a write to `target` on `port` could have changed, as readers see it:
// a GET of the same target on the same port (on the data port: the value
// and its fence in Fencing-Token; on the admin port: the fence document),
// and the list of every fence with its token and time (a batch's keys are
// in its body).
std::string Observe(World& world, metrics::Port port,
                    boost::beast::string_view target) {
  std::string seen;
  const auto add = [&](metrics::Port where, boost::beast::string_view what) {
    proxy::Request get{beast_http::verb::get,
                       boost::beast::string_view(what.data(), what.size()), 11};
    get.set(beast_http::field::host, "fuzz");
    const proxy::Response answer = Answer(world, where, get);
    seen += std::to_string(answer.result_int()) + " ";
    if (auto it = answer.find("Fencing-Token"); it != answer.end()) {
      seen += std::string(it->value());
    }
    seen += " " + answer.body() + "\n";
  };
  add(port, target);
  add(metrics::Port::kAdmin, "/v1/fences");
  return seen;
}

bool IsWrite(beast_http::verb method) {
  return method == beast_http::verb::put ||
         method == beast_http::verb::delete_ ||
         method == beast_http::verb::post || method == beast_http::verb::patch;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  static World* world = new World();
  if (size < 1) return 0;
  const auto port = data[0] & 1 ? metrics::Port::kAdmin : metrics::Port::kData;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  beast_http::request_parser<beast_http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (ec || !parser.is_done()) return 0;
  if (proxy::HasObsFold(bytes)) return 0;
  const proxy::Request& request = parser.get();
  if (proxy::FramingError(request) || proxy::HostError(request)) return 0;

  const bool write = IsWrite(request.method());
  const std::string before =
      write ? Observe(*world, port, request.target()) : "";
  const proxy::Response response = Answer(*world, port, request);
  const unsigned status = response.result_int();
  if (status < 200 || status > 599) abort();
  if (status != 204 && status != 304 &&
      response.count(beast_http::field::content_length) != 1) {
    abort();
  }
  // A refused write changes nothing: neither the value nor any fence.
  if (write && status >= 400 &&
      Observe(*world, port, request.target()) != before) {
    abort();
  }
  return 0;
}
