// Google Benchmark microbenchmarks: the accept rule, token parsing, and the
// committer's batch path (durable commits into a temp LMDB environment).
//
//   build-bench/tests/bench/micro_bench [--benchmark_filter=...]

#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <latch>
#include <string>

#include "fence/accept.h"
#include "fence/committer.h"
#include "fence/env.h"
#include "fence/token.h"

namespace {

using namespace fencepost::fence;

void BM_Decide(benchmark::State& state) {
  std::optional<Token> highest = 1000;
  Token token = 990;
  for (auto _ : state) {
    benchmark::DoNotOptimize(highest);
    benchmark::DoNotOptimize(token);
    Decision d = Decide(highest, token);
    benchmark::DoNotOptimize(d);
    token = token == 1010 ? 990 : token + 1;
  }
}
BENCHMARK(BM_Decide);

void BM_ParseToken(benchmark::State& state) {
  const std::string text = "1795000000123456";
  for (auto _ : state) {
    benchmark::DoNotOptimize(ParseToken(text));
  }
}
BENCHMARK(BM_ParseToken);

// A temp directory for one benchmark run's environment.
class TempEnv {
 public:
  TempEnv() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "fencepost-micro.XXXXXX")
            .string();
    dir_ = mkdtemp(pattern.data());
    env_ = std::make_unique<Env>(Env::Options{dir_, 1ull << 30});
  }
  ~TempEnv() {
    env_.reset();
    std::filesystem::remove_all(dir_);
  }
  Env& env() { return *env_; }

 private:
  std::string dir_;
  std::unique_ptr<Env> env_;
};

// range(0) fenced writes submitted together, so they share durable commits;
// items/s is durable fenced writes per second through the batch path.
void BM_CommitBatch(benchmark::State& state) {
  TempEnv temp;
  Committer committer(temp.env(), {});
  const int batch = static_cast<int>(state.range(0));
  const std::string body(128, 'v');
  Token token = 1;
  int key = 0;
  for (auto _ : state) {
    std::latch done(batch);
    for (int i = 0; i < batch; ++i) {
      FencedWrite write;
      write.fence = "/bench/" + std::to_string(key++ % 10000);
      write.token = ++token;
      write.value = ValueOp{ValueOp::Kind::kPut, write.fence, body, ""};
      committer.Submit(std::move(write),
                       [&done](WriteOutcome) { done.count_down(); });
    }
    done.wait();
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["writes_per_commit"] =
      static_cast<double>(state.iterations() * batch) /
      static_cast<double>(committer.commits());
}
BENCHMARK(BM_CommitBatch)->Arg(1)->Arg(8)->Arg(32)->Arg(128)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
