// The raw-LMDB rows of the benchmark table: fenced writes (a fence record and
// a 128-byte value record, the shapes fencepost writes) straight into LMDB,
// with no HTTP and no proxy, committed durably every --batch writes, by one
// writer thread per environment.
//
//   raw_lmdb --dir DIR [--envs 1] [--batch 1] [--keys 10000] [--seconds 5]
//   raw_lmdb --dir DIR --sync-probe 1
//
// Prints one line: envs, batch, writes/s, commits/s. With --sync-probe, the
// disk's own figure instead: the median time of one 4 KiB overwrite plus
// fdatasync, which one durable acknowledgement cannot beat.

#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fence/big_endian.h"
#include "fence/env.h"

namespace {

struct Args {
  std::string dir;
  int envs = 1;
  int batch = 1;
  int keys = 10000;
  double seconds = 5;
  bool sync_probe = false;
};

Args Parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--dir") {
      args.dir = value;
    } else if (flag == "--envs") {
      args.envs = std::atoi(value);
    } else if (flag == "--batch") {
      args.batch = std::atoi(value);
    } else if (flag == "--keys") {
      args.keys = std::atoi(value);
    } else if (flag == "--seconds") {
      args.seconds = std::atof(value);
    } else if (flag == "--sync-probe") {
      args.sync_probe = std::atoi(value) != 0;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (args.dir.empty() || args.envs < 1 || args.batch < 1 || args.keys < 1) {
    std::fprintf(stderr,
                 "usage: raw_lmdb --dir DIR [--envs N] [--batch N] [--keys N] "
                 "[--seconds S]\n");
    std::exit(2);
  }
  return args;
}

void Check(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "%s: %s\n", what, mdb_strerror(rc));
    std::exit(1);
  }
}

// Writes until `stop`, `batch` writes per durable commit; counts writes.
void Writer(fencepost::fence::Env& env, int batch, int keys, unsigned seed,
            const std::atomic<bool>& stop, std::uint64_t* writes,
            std::uint64_t* commits) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(1, keys);
  const std::string body(128, 'v');
  std::uint64_t token = 1000;
  while (!stop.load(std::memory_order_relaxed)) {
    MDB_txn* txn = nullptr;
    Check(mdb_txn_begin(env.raw(), nullptr, 0, &txn), "mdb_txn_begin");
    for (int i = 0; i < batch; ++i) {
      std::string key = "/bench/" + std::to_string(pick(rng));
      MDB_val k{key.size(), key.data()};
      char fence[16];
      fencepost::fence::StoreBigEndian(fence, ++token, 8);
      fencepost::fence::StoreBigEndian(fence + 8, token, 8);
      MDB_val fv{sizeof fence, fence};
      Check(mdb_put(txn, env.fences(), &k, &fv, 0), "mdb_put fence");
      std::string value(11, '\0');
      value[0] = 1;
      value += body;
      MDB_val vv{value.size(), value.data()};
      Check(mdb_put(txn, env.values(), &k, &vv, 0), "mdb_put value");
    }
    Check(mdb_txn_commit(txn), "mdb_txn_commit");
    *writes += batch;
    ++*commits;
  }
}

int SyncProbe(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/sync-probe";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    std::perror("open");
    return 1;
  }
  std::vector<char> page(4096, 'x');
  std::vector<double> micros;
  for (int i = 0; i < 2000; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (::pwrite(fd, page.data(), page.size(), 0) !=
            static_cast<ssize_t>(page.size()) ||
        ::fdatasync(fd) != 0) {
      std::perror("pwrite/fdatasync");
      return 1;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
  }
  ::close(fd);
  std::filesystem::remove(path);
  std::sort(micros.begin(), micros.end());
  std::printf("fdatasync_p50_us=%.0f fdatasync_p99_us=%.0f\n",
              micros[micros.size() / 2], micros[micros.size() * 99 / 100]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  if (args.sync_probe) return SyncProbe(args.dir);
  std::vector<std::unique_ptr<fencepost::fence::Env>> envs;
  for (int i = 0; i < args.envs; ++i) {
    envs.push_back(
        std::make_unique<fencepost::fence::Env>(fencepost::fence::Env::Options{
            args.dir + "/" + std::to_string(i), 64ull << 30}));
    // LMDB's own synced commits: fencepost's environments leave the sync
    // to the applier's checkpoints, and these rows measure LMDB's.
    Check(mdb_env_set_flags(envs.back()->raw(), MDB_NOSYNC, 0),
          "mdb_env_set_flags");
  }
  std::atomic<bool> stop = false;
  std::vector<std::uint64_t> writes(args.envs), commits(args.envs);
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < args.envs; ++i) {
    threads.emplace_back(Writer, std::ref(*envs[i]), args.batch,
                         args.keys / args.envs + 1, 7u + i, std::cref(stop),
                         &writes[i], &commits[i]);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(args.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::uint64_t w = 0, c = 0;
  for (int i = 0; i < args.envs; ++i) {
    w += writes[i];
    c += commits[i];
  }
  std::printf("envs=%d batch=%d writes_per_s=%.0f commits_per_s=%.0f\n",
              args.envs, args.batch, w / secs, c / secs);
  return 0;
}
