// The benchmark's one load generator (tests/bench/run.sh): one thread, a
// closed loop over N connections with one request in flight on each,
// speaking HTTP/1.1 (fencepost, the null server) or RESP (Redis, the
// EVALSHA of redis_cas.lua) from the same loop, with the same workload:
// 128-byte values over KEYS keys, one writer in ten a stale leader (token 1
// against keys seeded with token 2), the others a fresh token. Latencies
// go into a log-linear histogram (64 sub-buckets per power of two of
// nanoseconds: each figure is at most 1/64 above the true one).
//
//   load http HOST:PORT [options]          PUT /bench/K, Fencing-Token
//   load redis HOST:PORT --sha SHA [...]   EVALSHA SHA 1 bench:K DIE PAD
//   load http HOST:PORT --seed [...]       PUT /bench/1..KEYS at token 2,
//                                          each once, then exits
// options: --connections N (32) --seconds S (10) --warmup S (1)
//          --keys K (10000) --server-pid PID
//
// Prints one line of fields: requests and statuses in the measured window,
// rps, p50/p99/p999/max in ms, the client's and (with --server-pid) the
// server's CPU µs per request over the window, and all_* counts of every
// answer including the warm-up and the drain, which the servers' own
// counters must match. A fresh HTTP token is the time in µs, as a lease
// counter would give; Redis's script takes its own from TIME.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "load: %s\n", why.c_str());
  std::exit(2);
}

// Latencies in ns, log-linear: values below 64 ns exactly, above in 64
// buckets per power of two.
class Histogram {
 public:
  void Add(std::uint64_t ns) {
    ++counts_[Index(ns)];
    ++total_;
    if (ns > max_) max_ = ns;
  }
  // The upper edge of the bucket holding the q-quantile, in ms.
  double QuantileMs(double q) const {
    if (total_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_));
    if (rank >= total_) rank = total_ - 1;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen > rank) {
        return static_cast<double>(std::min(UpperEdge(i), max_)) / 1e6;
      }
    }
    return static_cast<double>(max_) / 1e6;
  }
  double MaxMs() const { return static_cast<double>(max_) / 1e6; }

 private:
  static constexpr int kSub = 64;
  static std::size_t Index(std::uint64_t ns) {
    if (ns < kSub) return ns;
    const int shift = 63 - __builtin_clzll(ns) - 6;
    return static_cast<std::size_t>((shift + 1) * kSub +
                                    static_cast<int>((ns >> shift) - kSub));
  }
  static std::uint64_t UpperEdge(std::size_t i) {
    if (i < kSub) return i;
    const std::size_t shift = i / kSub - 1;
    return ((i % kSub + kSub + 1) << shift) - 1;
  }
  std::array<std::uint64_t, 64 * kSub> counts_{};
  std::uint64_t total_ = 0;
  std::uint64_t max_ = 0;
};

struct Options {
  bool redis = false;
  bool seed = false;
  std::string host = "127.0.0.1";
  int port = 0;
  std::string sha;
  int connections = 32;
  double seconds = 10;
  double warmup = 1;
  long keys = 10000;
  long server_pid = 0;
};

Options Parse(int argc, char** argv) {
  if (argc < 3) {
    Die("usage: load http|redis HOST:PORT [--sha SHA] [--seed] "
        "[--connections N] [--seconds S] [--warmup S] [--keys K] "
        "[--server-pid PID]");
  }
  Options o;
  const std::string proto = argv[1];
  if (proto != "http" && proto != "redis") Die("protocol: http or redis");
  o.redis = proto == "redis";
  const std::string address = argv[2];
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) Die("address: HOST:PORT");
  o.host = address.substr(0, colon);
  o.port = std::atoi(address.c_str() + colon + 1);
  for (int i = 3; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--seed") {
      o.seed = true;
      continue;
    }
    if (i + 1 >= argc) Die(flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "--sha") {
      o.sha = value;
    } else if (flag == "--connections") {
      o.connections = std::atoi(value);
    } else if (flag == "--seconds") {
      o.seconds = std::atof(value);
    } else if (flag == "--warmup") {
      o.warmup = std::atof(value);
    } else if (flag == "--keys") {
      o.keys = std::atol(value);
    } else if (flag == "--server-pid") {
      o.server_pid = std::atol(value);
    } else {
      Die("unknown flag " + flag);
    }
  }
  if (o.redis && o.sha.size() != 40) Die("redis needs --sha of 40 hex digits");
  if (o.connections < 1 || o.keys < 1 || o.port <= 0) Die("bad numbers");
  return o;
}

// The workload: what each request writes, the same draw for both protocols.
class Workload {
 public:
  explicit Workload(const Options& o) : o_(o), rng_(std::random_device{}()) {}

  // The next request's bytes (and, seeding, false once every key is done).
  bool Next(std::string* out) {
    out->clear();
    if (o_.seed) {
      if (seeded_ >= o_.keys) return false;
      ++seeded_;
      Http(std::to_string(seeded_), "2", "seed", out);
      return true;
    }
    const long key = std::uniform_int_distribution<long>(0, o_.keys - 1)(rng_);
    const int die = std::uniform_int_distribution<int>(0, 9999)(rng_);
    const bool stale = die < 1000;
    if (o_.redis) {
      char name[32];
      std::snprintf(name, sizeof name, "bench:%012ld", key);
      Resp({"EVALSHA", o_.sha, "1", name, std::to_string(die), kPad}, out);
    } else {
      const std::string token =
          stale ? "1" : std::to_string(NowMicros());  // as a lease counter
      Http(std::to_string(key + 1), token, (stale ? "stale-" : "fresh-") + kPad,
           out);
    }
    return true;
  }

 private:
  static inline const std::string kPad = std::string(122, 'v');
  static long long NowMicros() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  static void Http(const std::string& key, const std::string& token,
                   const std::string& body, std::string* out) {
    *out += "PUT /bench/" + key +
            " HTTP/1.1\r\nHost: bench\r\nFencing-Token: " + token +
            "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
            body;
  }
  static void Resp(std::initializer_list<std::string> args, std::string* out) {
    *out += "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string& a : args) {
      *out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    }
  }
  const Options& o_;
  std::mt19937_64 rng_;
  long seeded_ = 0;
};

// What an answer said: an HTTP status, or for RESP 200 (":1", applied),
// 409 (":0", refused as stale) and 500 (an error reply).
struct Parsed {
  std::size_t length = 0;  // 0: not complete yet
  int status = 0;
};

Parsed ParseHttp(std::string_view in) {
  const auto end = in.find("\r\n\r\n");
  if (end == std::string_view::npos) return {};
  if (in.size() < 12 || in.substr(0, 5) != "HTTP/") Die("not an HTTP answer");
  const int status = std::atoi(std::string(in.substr(9, 3)).c_str());
  std::size_t length = 0;
  std::size_t pos = in.find("\r\n") + 2;
  while (pos < end) {
    const std::size_t eol = in.find("\r\n", pos);
    const std::string_view line = in.substr(pos, eol - pos);
    if (line.size() > 15 &&
        strncasecmp(line.data(), "content-length:", 15) == 0) {
      length = std::strtoul(std::string(line.substr(15)).c_str(), nullptr, 10);
    } else if (line.size() > 18 &&
               strncasecmp(line.data(), "transfer-encoding:", 18) == 0) {
      Die("a chunked answer: the benchmark expects Content-Length");
    }
    pos = eol + 2;
  }
  if (in.size() < end + 4 + length) return {};
  return {end + 4 + length, status};
}

Parsed ParseResp(std::string_view in) {
  const auto eol = in.find("\r\n");
  if (eol == std::string_view::npos) return {};
  int status = 500;
  if (in[0] == ':') status = in.substr(0, eol) == ":1" ? 200 : 409;
  if (in[0] == '$' || in[0] == '*') Die("an unexpected RESP answer");
  return {eol + 2, status};
}

struct Connection {
  int fd = -1;
  std::string out;
  std::size_t sent = 0;
  std::string in;
  Clock::time_point started;
};

int Connect(const Options& o) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(o.port));
  if (inet_pton(AF_INET, o.host.c_str(), &addr.sin_addr) != 1) Die("host");
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Die("connect: " + std::string(std::strerror(errno)));
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

double ProcessCpuSeconds(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) Die("cannot read /proc/PID/stat");
  std::istringstream fields(text.substr(paren + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt
  long utime = 0, stime = 0;
  fields >> utime >> stime;
  return static_cast<double>(utime + stime) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

double OwnCpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

// The counts of one window (the measured one, or all answers).
struct Counts {
  std::uint64_t requests = 0, ok = 0, stale = 0, other = 0;
  void Add(int status) {
    ++requests;
    if (status >= 200 && status < 300) {
      ++ok;
    } else if (status == 409) {
      ++stale;
    } else {
      ++other;
    }
  }
};

class Loop {
 public:
  explicit Loop(const Options& o) : o_(o), workload_(o) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    conns_.resize(static_cast<std::size_t>(o.connections));
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      conns_[i].fd = Connect(o);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      epoll_ctl(epoll_, EPOLL_CTL_ADD, conns_[i].fd, &ev);
    }
  }

  void Run() {
    const Clock::time_point begin = Clock::now();
    const auto warm_end = begin + Seconds(o_.seed ? 0 : o_.warmup);
    const auto end = warm_end + Seconds(o_.seed ? 1e9 : o_.seconds);
    for (Connection& c : conns_) Send(c);
    bool measuring = false;
    std::array<epoll_event, 256> events;
    while (busy_ > 0) {
      const Clock::time_point now = Clock::now();
      if (!measuring && now >= warm_end) {
        measuring = true;
        StartWindow();
      }
      if (now >= end) sending_ = false;  // drain what is in flight
      if (now >= end + Seconds(10)) Die("answers never came in 10 s");
      const int n = epoll_wait(epoll_, events.data(), events.size(), 100);
      for (int i = 0; i < n; ++i) {
        Connection& c = conns_[events[i].data.u64];
        if (events[i].events & EPOLLOUT) Flush(c);
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) Read(c);
      }
      if (measuring && window_open_ && Clock::now() >= end) EndWindow();
    }
    if (window_open_) EndWindow();
  }

  void Print() const {
    const double rps = static_cast<double>(window_.requests) / window_seconds_;
    const double per = window_.requests ? 1e6 / window_.requests : 0;
    std::printf(
        "proto=%s connections=%d seconds=%.2f requests=%llu rps=%.0f "
        "p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f ok=%llu "
        "stale=%llu other=%llu client_cpu_us=%.1f server_cpu_us=%s "
        "all_requests=%llu all_ok=%llu all_stale=%llu all_other=%llu\n",
        o_.redis ? "resp" : "http", o_.connections, window_seconds_,
        ULL(window_.requests), rps, hist_.QuantileMs(0.50),
        hist_.QuantileMs(0.99), hist_.QuantileMs(0.999), hist_.MaxMs(),
        ULL(window_.ok), ULL(window_.stale), ULL(window_.other),
        client_cpu_ * per,
        o_.server_pid ? std::to_string(server_cpu_ * per).c_str() : "-",
        ULL(all_.requests), ULL(all_.ok), ULL(all_.stale), ULL(all_.other));
  }

 private:
  static unsigned long long ULL(std::uint64_t v) { return v; }
  static Clock::duration Seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(s));
  }
  void StartWindow() {
    window_open_ = true;
    window_start_ = Clock::now();
    client_cpu_ = -OwnCpuSeconds();
    if (o_.server_pid) server_cpu_ = -ProcessCpuSeconds(o_.server_pid);
  }
  void EndWindow() {
    window_open_ = false;
    window_seconds_ =
        std::chrono::duration<double>(Clock::now() - window_start_).count();
    client_cpu_ += OwnCpuSeconds();
    if (o_.server_pid) server_cpu_ += ProcessCpuSeconds(o_.server_pid);
  }
  void Send(Connection& c) {
    if (!sending_ || !workload_.Next(&c.out)) return;
    c.sent = 0;
    ++busy_;
    c.started = Clock::now();
    Flush(c);
  }
  void Flush(Connection& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n =
          write(c.fd, c.out.data() + c.sent, c.out.size() - c.sent);
      if (n < 0 && errno == EAGAIN) {
        Watch(c, EPOLLIN | EPOLLOUT);
        return;
      }
      if (n <= 0) Die("write: " + std::string(std::strerror(errno)));
      c.sent += static_cast<std::size_t>(n);
    }
    Watch(c, EPOLLIN);
  }
  void Watch(Connection& c, std::uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = static_cast<std::uint64_t>(&c - conns_.data());
    epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
  }
  void Read(Connection& c) {
    char buffer[16384];
    while (true) {
      const ssize_t n = read(c.fd, buffer, sizeof buffer);
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) Die("the server closed a connection");
      c.in.append(buffer, static_cast<std::size_t>(n));
    }
    const Parsed p = o_.redis ? ParseResp(c.in) : ParseHttp(c.in);
    if (p.length == 0) return;
    if (p.length != c.in.size()) Die("more than one answer to one request");
    c.in.clear();
    const auto latency = Clock::now() - c.started;
    all_.Add(p.status);
    if (window_open_) {
      window_.Add(p.status);
      hist_.Add(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(latency)
              .count()));
    }
    --busy_;
    Send(c);
  }

  const Options& o_;
  Workload workload_;
  int epoll_ = -1;
  std::vector<Connection> conns_;
  int busy_ = 0;
  bool sending_ = true;
  bool window_open_ = false;
  Clock::time_point window_start_;
  double window_seconds_ = 0;
  double client_cpu_ = 0, server_cpu_ = 0;
  Counts window_, all_;
  Histogram hist_;
};

}  // namespace

int main(int argc, char** argv) {
  const Options options = Parse(argc, argv);
  Loop loop(options);
  loop.Run();
  loop.Print();
  return 0;
}
