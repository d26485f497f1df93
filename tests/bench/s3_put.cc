// The load generator of the S3 benchmark (tests/bench/s3.sh): CLIENTS
// threads, each one keep-alive connection, PUT objects of SIZE bytes in a
// loop for SECONDS, each client over KEYS keys of its own. wrk cannot do
// the direct and door phases: every PutObject needs its own SigV4 signature.
//
//   s3_put direct URL BUCKET [options]   signed PutObject straight to the
//                                        store (path-style; credentials
//                                        from AWS_ACCESS_KEY_ID and
//                                        AWS_SECRET_ACCESS_KEY)
//   s3_put door URL BUCKET [options]     the same signed PutObject (the
//                                        token in x-amz-meta-fencing-token)
//                                        to fencepost's S3 front door, with
//                                        a key of --s3-client-credentials
//                                        in those two variables
//   s3_put fenced URL [options]          plain PUT with Fencing-Token to
//                                        fencepost's data port
//   options: --clients N (32) --seconds S (10) --warmup S (1) --size B
//            (4096) --keys K (64) --prefix P (bench) --region R (us-east-1)
//            --token T (1)
//
// All modes send the same object: the same body, Content-Type and
// x-amz-meta-fencing-token (fencepost adds it itself on the data port), so
// the store does the same work and the difference is fencepost's; direct
// and door send the same bytes but for the key that signs them. Latency is
// the client's, from building the request (signing included) to the last
// byte of the answer. Requests of the warm-up are not counted. Prints one
// line:
//   mode=direct clients=32 seconds=10.00 ok=N failed=N ops_per_s=N
//   p50_ms=X p99_ms=X max_ms=X client_cpu_us_per_req=N all_ok=N
//   all_failed=N
// (mode= direct, door or fenced; all_*: the warm-up's requests too, what
// the servers counted) and, on stderr, the first failures. Exit status 0
// even when requests failed: the script checks the counts.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sigv4/credentials.h"
#include "sigv4/crypto.h"
#include "sigv4/signer.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
namespace sigv4 = fencepost::sigv4;

// direct and door send the same signed PutObject, to the store or to the
// front door; fenced a plain PUT to the data port.
enum class Mode { kDirect, kDoor, kFenced };

struct Options {
  Mode mode = Mode::kFenced;
  bool Signed() const { return mode != Mode::kFenced; }
  std::string host;
  std::string port;
  std::string bucket;
  int clients = 32;
  double seconds = 10;
  double warmup = 1;
  std::size_t size = 4096;
  int keys = 64;
  std::string prefix = "bench";
  std::string region = "us-east-1";
  std::string token = "1";
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "s3_put: %s\nusage: s3_put direct|door URL BUCKET [options] "
               "| s3_put fenced URL [options]\n",
               why);
  std::exit(2);
}

// "http://HOST:PORT[/]" into host and port.
void ParseUrl(std::string_view url, Options& options) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) Usage("the URL must be http://HOST:PORT");
  url.remove_prefix(kScheme.size());
  if (url.ends_with('/')) url.remove_suffix(1);
  const auto colon = url.rfind(':');
  if (colon == std::string_view::npos) Usage("the URL needs a port");
  options.host = std::string(url.substr(0, colon));
  options.port = std::string(url.substr(colon + 1));
}

Options Parse(int argc, char** argv) {
  Options options;
  if (argc < 3) Usage("missing arguments");
  const std::string_view mode = argv[1];
  if (mode == "direct") {
    options.mode = Mode::kDirect;
  } else if (mode == "door") {
    options.mode = Mode::kDoor;
  } else if (mode != "fenced") {
    Usage("unknown mode");
  }
  ParseUrl(argv[2], options);
  int i = 3;
  if (options.Signed()) {
    if (argc < 4) Usage("direct and door need a bucket");
    options.bucket = argv[i++];
  }
  for (; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--clients") {
      options.clients = std::atoi(value);
    } else if (flag == "--seconds") {
      options.seconds = std::atof(value);
    } else if (flag == "--warmup") {
      options.warmup = std::atof(value);
    } else if (flag == "--size") {
      options.size = std::strtoull(value, nullptr, 10);
    } else if (flag == "--keys") {
      options.keys = std::atoi(value);
    } else if (flag == "--prefix") {
      options.prefix = value;
    } else if (flag == "--region") {
      options.region = value;
    } else if (flag == "--token") {
      options.token = value;
    } else {
      Usage("unknown option");
    }
  }
  if (i != argc) Usage("an option lacks its value");
  if (options.clients < 1 || options.seconds <= 0 || options.keys < 1) {
    Usage("clients, seconds and keys must be positive");
  }
  return options;
}

// What one client counted.
struct Tally {
  std::vector<float> latencies_ms;  // of the counted successes
  long failed = 0;                  // counted failures
  long warmup_ok = 0;               // the warm-up's, for the server's counts
  long warmup_failed = 0;
};

// Failures are printed, the first few only.
std::mutex print_mutex;
std::atomic<int> printed{0};
void Report(int client, std::string_view what) {
  if (printed.fetch_add(1) >= 5) return;
  std::lock_guard lock(print_mutex);
  std::fprintf(stderr, "s3_put: client %d: %.*s\n", client,
               static_cast<int>(what.size()), what.data());
}

class Client {
 public:
  Client(const Options& options, const sigv4::Credentials* credentials, int id)
      : options_(options),
        credentials_(credentials),
        id_(id),
        body_(options.size, 'v'),
        socket_(io_) {
    host_ = options.host + ":" + options.port;
  }

  bool Connect() {
    beast::error_code ec;
    socket_.close(ec);
    tcp::resolver resolver(io_);
    const auto endpoints = resolver.resolve(options_.host, options_.port, ec);
    if (!ec) asio::connect(socket_, endpoints, ec);
    if (ec) {
      Report(id_, "connect: " + ec.message());
      return false;
    }
    socket_.set_option(tcp::no_delay(true), ec);
    // A store that stops answering ends the request (a failure), not the run.
    timeval timeout{10, 0};
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout,
                 sizeof timeout);
    buffer_.clear();
    return true;
  }

  // Sends PUTs until `end`, counting those that start after `count_from`.
  Tally Run(Clock::time_point count_from, Clock::time_point end) {
    Tally tally;
    for (std::uint64_t n = 0;; ++n) {
      const Clock::time_point start = Clock::now();
      if (start >= end) break;
      const bool counted = start >= count_from;
      const bool ok = Put(n);
      const float ms =
          std::chrono::duration<float, std::milli>(Clock::now() - start)
              .count();
      if (!counted) {
        ++(ok ? tally.warmup_ok : tally.warmup_failed);
        continue;
      }
      if (ok) {
        tally.latencies_ms.push_back(ms);
      } else {
        ++tally.failed;
      }
    }
    return tally;
  }

 private:
  std::string Key(std::uint64_t n) const {
    return options_.prefix + "/c" + std::to_string(id_) + "/k" +
           std::to_string(n % static_cast<std::uint64_t>(options_.keys));
  }

  http::request<http::string_body> Build(std::uint64_t n) const {
    const std::string key = Key(n);
    const std::string path =
        options_.Signed() ? "/" + options_.bucket + "/" + key : "/" + key;
    http::request<http::string_body> request(http::verb::put, path, 11);
    request.set(http::field::host, host_);
    request.set(http::field::content_type, "application/octet-stream");
    request.body() = body_;
    request.content_length(body_.size());
    if (!options_.Signed()) {
      request.set("Fencing-Token", options_.token);
      return request;
    }
    request.set("x-amz-meta-fencing-token", options_.token);
    // Signed as fencepost signs its PutObject: every field, the payload's
    // SHA-256 computed for each request.
    sigv4::Request to_sign;
    to_sign.method = "PUT";
    to_sign.path = path;
    to_sign.path_style = sigv4::PathStyle::kS3;
    for (const auto& field : request) {
      to_sign.headers.push_back(
          {std::string(field.name_string()), std::string(field.value())});
    }
    to_sign.payload_hash = sigv4::HexSha256(request.body());
    sigv4::SigningParams params;
    params.region = options_.region;
    params.time = std::chrono::system_clock::now();
    const std::size_t given = to_sign.headers.size();
    sigv4::SignRequest(to_sign, *credentials_, params);
    for (std::size_t i = given; i < to_sign.headers.size(); ++i) {
      request.insert(to_sign.headers[i].name, to_sign.headers[i].value);
    }
    return request;
  }

  // One PUT; false when it failed (the connection is then made again).
  bool Put(std::uint64_t n) {
    if (!socket_.is_open() && !Connect()) return false;
    http::request<http::string_body> request = Build(n);
    beast::error_code ec;
    http::write(socket_, request, ec);
    http::response<http::string_body> response;
    if (!ec) http::read(socket_, buffer_, response, ec);
    if (ec) {
      Report(id_, "PUT: " + ec.message());
      socket_.close(ec);
      return false;
    }
    if (!response.keep_alive()) socket_.close(ec);
    if (response.result_int() / 100 == 2) return true;
    Report(id_, "PUT answered " + std::to_string(response.result_int()) + ": " +
                    response.body().substr(0, 300));
    return false;
  }

  const Options& options_;
  const sigv4::Credentials* credentials_;
  const int id_;
  const std::string body_;
  std::string host_;
  asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kDirect:
      return "direct";
    case Mode::kDoor:
      return "door";
    case Mode::kFenced:
      return "fenced";
  }
  return "?";
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double Percentile(const std::vector<float>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1,
                         static_cast<std::size_t>(p * sorted.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = Parse(argc, argv);
  std::optional<sigv4::Credentials> credentials;
  if (options.Signed()) {
    sigv4::LoadedCredentials loaded = sigv4::LoadCredentials({});
    if (!loaded.credentials) {
      std::fprintf(stderr, "s3_put: %s\n", loaded.message.c_str());
      return 2;
    }
    credentials = std::move(loaded.credentials);
  }
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < options.clients; ++i) {
    clients.push_back(std::make_unique<Client>(
        options, credentials ? &*credentials : nullptr, i));
  }
  // Every client connected before the clock starts.
  for (auto& client : clients) client->Connect();
  const Clock::time_point begin = Clock::now();
  const auto warmup = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.warmup));
  const auto span = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.seconds));
  const Clock::time_point count_from = begin + warmup;
  const Clock::time_point end = count_from + span;
  std::vector<Tally> tallies(clients.size());
  std::vector<std::thread> threads;
  double cpu_at_count = 0;
  std::thread cpu_marker([&] {
    std::this_thread::sleep_until(count_from);
    cpu_at_count = CpuSeconds();
  });
  for (std::size_t i = 0; i < clients.size(); ++i) {
    threads.emplace_back(
        [&, i] { tallies[i] = clients[i]->Run(count_from, end); });
  }
  for (auto& thread : threads) thread.join();
  cpu_marker.join();
  const double cpu = CpuSeconds() - cpu_at_count;
  // Requests that began before `end` finish after it: the rate is over the
  // time they took.
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - count_from).count();

  std::vector<float> all;
  long failed = 0;
  long warmup_ok = 0;
  long warmup_failed = 0;
  for (Tally& tally : tallies) {
    all.insert(all.end(), tally.latencies_ms.begin(), tally.latencies_ms.end());
    failed += tally.failed;
    warmup_ok += tally.warmup_ok;
    warmup_failed += tally.warmup_failed;
  }
  std::sort(all.begin(), all.end());
  const long ok = static_cast<long>(all.size());
  std::printf(
      "mode=%s clients=%d seconds=%.2f ok=%ld failed=%ld ops_per_s=%.0f "
      "p50_ms=%.2f p99_ms=%.2f max_ms=%.2f client_cpu_us_per_req=%.0f "
      "all_ok=%ld all_failed=%ld\n",
      ModeName(options.mode), options.clients, elapsed, ok, failed,
      ok / elapsed, Percentile(all, 0.50), Percentile(all, 0.99),
      all.empty() ? 0.0 : all.back(),
      ok + failed > 0 ? cpu * 1e6 / static_cast<double>(ok + failed) : 0.0,
      ok + warmup_ok, failed + warmup_failed);
  return 0;
}
