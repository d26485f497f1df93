// Elections per second through one LeaseBackend: one candidate acquires and
// releases a lease in a loop for SECONDS (an election and a handover each),
// then renews it in a loop; prints the rates and the acquire latency.
//
//   elections BACKEND URL [SECONDS]
//   BACKEND: fencepost (URL: the admin port), etcd, zookeeper, postgres
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "client/etcd_leases.h"
#include "client/fencepost_leases.h"
#include "client/postgres_leases.h"
#include "client/zookeeper_leases.h"

namespace {

using namespace fencepost::client;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::unique_ptr<LeaseBackend> Make(const std::string& backend,
                                   const std::string& url,
                                   const LeaseSpec& spec) {
  if (backend == "fencepost") {
    Client::Options options;
    options.url = url;
    return std::make_unique<FencepostLeases>(options, spec);
  }
  if (backend == "etcd") return std::make_unique<EtcdLeases>(url, spec);
  if (backend == "zookeeper")
    return std::make_unique<ZooKeeperLeases>(url, spec);
  if (backend == "postgres") return std::make_unique<PostgresLeases>(url, spec);
  std::fprintf(stderr, "unknown backend %s\n", backend.c_str());
  std::exit(2);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
}

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: elections BACKEND URL [SECONDS]\n");
    return 2;
  }
  const std::string backend = argv[1];
  const double seconds = argc > 3 ? std::atof(argv[3]) : 5;
  const auto leases =
      Make(backend, argv[2],
           LeaseSpec{"bench/elections", "bencher", milliseconds(10000)});
  const milliseconds timeout(5000);
  const auto span = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(seconds));

  std::vector<double> acquire_ms;
  int failures = 0;
  std::uint64_t last_token = 0;
  const Clock::time_point start = Clock::now();
  while (Clock::now() - start < span) {
    const Clock::time_point t = Clock::now();
    const LeaseAttempt held = leases->Acquire(timeout);
    if (held.outcome != LeaseAttempt::Outcome::kHeld) {
      ++failures;
      continue;
    }
    acquire_ms.push_back(Ms(Clock::now() - t));
    if (held.token <= last_token) {
      std::fprintf(stderr, "token %llu after %llu\n",
                   static_cast<unsigned long long>(held.token),
                   static_cast<unsigned long long>(last_token));
      return 1;
    }
    last_token = held.token;
    if (!leases->Release(held.token, timeout).empty()) ++failures;
  }
  const double elections =
      static_cast<double>(acquire_ms.size()) / Ms(Clock::now() - start) * 1000;

  const LeaseAttempt held = leases->Acquire(timeout);
  std::size_t renewals = 0;
  const Clock::time_point renew_start = Clock::now();
  while (held.outcome == LeaseAttempt::Outcome::kHeld &&
         Clock::now() - renew_start < span) {
    if (leases->Renew(held.token, timeout).outcome ==
        LeaseAttempt::Outcome::kHeld) {
      ++renewals;
    } else {
      ++failures;
    }
  }
  const double renew_rate =
      static_cast<double>(renewals) / Ms(Clock::now() - renew_start) * 1000;
  if (held.outcome == LeaseAttempt::Outcome::kHeld) {
    leases->Release(held.token, timeout);
  }
  std::printf(
      "%-10s elections/s %8.1f  acquire p50 %6.2f ms p99 %6.2f ms  "
      "renewals/s %8.1f  failures %d\n",
      backend.c_str(), elections, Percentile(acquire_ms, 0.5),
      Percentile(acquire_ms, 0.99), renew_rate, failures);
  return failures == 0 ? 0 : 1;
}
