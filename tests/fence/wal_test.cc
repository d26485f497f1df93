#include "fence/wal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fence/committer.h"
#include "fence/fence_store.h"
#include "fence/values.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

WalRecord Record(std::uint64_t seq, const std::string& body = "value") {
  WalRecord r;
  r.seq = seq;
  r.fence = "orders/" + std::to_string(seq % 7);
  r.fence_token = 100 + seq;
  r.updated_at_ns = 1700000000000000000 + static_cast<std::int64_t>(seq);
  r.op = seq % 3 == 0 ? WalRecord::Op::kDelete : WalRecord::Op::kPut;
  r.key = r.fence;
  r.body = r.op == WalRecord::Op::kPut ? body : "";
  if (seq % 2 == 0) r.value_token = 100 + seq;
  return r;
}

void ExpectSame(const WalRecord& a, const WalRecord& b) {
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.fence, b.fence);
  EXPECT_EQ(a.fence_token, b.fence_token);
  EXPECT_EQ(a.updated_at_ns, b.updated_at_ns);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.body, b.body);
  EXPECT_EQ(a.value_token, b.value_token);
}

TEST(WalRecordTest, RoundTripsEveryField) {
  std::string bytes;
  std::vector<WalRecord> records;
  for (std::uint64_t seq = 5; seq < 12; ++seq) {
    records.push_back(Record(seq, std::string(seq * 10, 'x')));
    EncodeRecord(records.back(), &bytes);
  }
  WalRecord observed;  // an observed write: no fence change, no token
  observed.seq = 12;
  observed.fence = "k";
  observed.op = WalRecord::Op::kPut;
  observed.key = "k";
  observed.body = std::string("\0\xff", 2);
  records.push_back(observed);
  EncodeRecord(observed, &bytes);
  const std::vector<WalRecord> run = DecodeRun(bytes);
  ASSERT_EQ(run.size(), records.size());
  for (std::size_t i = 0; i < run.size(); ++i) ExpectSame(run[i], records[i]);
}

// A log cut or damaged anywhere in its last records keeps exactly the
// records that are whole and intact before the damage.
TEST(WalRecordTest, ATornOrCorruptTailKeepsExactlyTheIntactPrefix) {
  std::string bytes;
  std::vector<std::size_t> ends;  // where each record ends
  for (std::uint64_t seq = 1; seq <= 6; ++seq) {
    EncodeRecord(Record(seq), &bytes);
    ends.push_back(bytes.size());
  }
  const std::size_t from = ends[2];  // the last three records
  for (std::size_t cut = from; cut <= bytes.size(); ++cut) {
    std::size_t whole = 0;
    while (whole < ends.size() && ends[whole] <= cut) ++whole;
    // What follows is old data, never zeros that could complete a record.
    std::string torn = bytes.substr(0, cut) + std::string(64, '\xee');
    EXPECT_EQ(DecodeRun(torn).size(), whole) << "cut at " << cut;
  }
  for (std::size_t at = from; at < bytes.size(); ++at) {
    std::size_t before = 0;
    while (ends[before] <= at) ++before;
    std::string corrupt = bytes;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0x5a);
    EXPECT_EQ(DecodeRun(corrupt).size(), before) << "byte " << at;
  }
}

TEST(WalRecordTest, ABatchCutShortIsDroppedWhole) {
  // Records 1 and 2 are single writes; 3, 4 and 5 one batch.
  std::string bytes;
  std::vector<std::size_t> ends;
  for (std::uint64_t seq = 1; seq <= 5; ++seq) {
    WalRecord r = Record(seq);
    r.batch_continues = seq == 3 || seq == 4;
    EncodeRecord(r, &bytes);
    ends.push_back(bytes.size());
  }
  const auto whole = DecodeRun(bytes);
  ASSERT_EQ(whole.size(), 5u);
  EXPECT_TRUE(whole[2].batch_continues);
  EXPECT_FALSE(whole[4].batch_continues);
  for (std::size_t cut = ends[1]; cut < bytes.size(); ++cut) {
    std::string torn = bytes.substr(0, cut) + std::string(64, '\xee');
    EXPECT_EQ(DecodeRun(torn).size(), 2u) << "cut at " << cut;
  }
}

TEST(WalRecordTest, AStaleRecordFromAnEarlierLapEndsTheRun) {
  std::string bytes;
  EncodeRecord(Record(50), &bytes);
  EncodeRecord(Record(51), &bytes);
  EncodeRecord(Record(12), &bytes);  // left from the segment's last lap
  EncodeRecord(Record(13), &bytes);
  EXPECT_EQ(DecodeRun(bytes).size(), 2u);
}

// The check value of the CRC-32C catalogue, and every length up to 100
// against a bit-at-a-time reference (the 8-byte steps and their tails).
TEST(Crc32cTest, MatchesTheCatalogueAndABitwiseReference) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  std::string data;
  for (int n = 0; n <= 100; ++n) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (const char ch : data) {
      c ^= static_cast<unsigned char>(ch);
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    }
    EXPECT_EQ(Crc32c(data), c ^ 0xFFFFFFFFu) << "length " << n;
    if (n >= 8) {  // the same bytes from an unaligned start
      const std::string shifted = "1234567" + data;
      for (std::size_t skip = 1; skip < 8; ++skip) {
        EXPECT_EQ(Crc32c(std::string_view(shifted).substr(7)),
                  Crc32c(std::string_view(shifted.data() + skip,
                                          shifted.size() - skip)
                             .substr(7 - skip)))
            << "length " << n << " start " << skip;
      }
    }
    data.push_back(static_cast<char>(n * 37 + 11));
  }
}

// A full segment is left only for one whose records LMDB has: until then
// the current one grows past its size (no write waits for a checkpoint),
// and the next open reads every record of the grown segment.
TEST(WalTest, AFullSegmentGrowsUntilTheOtherIsApplied) {
  testing::TempDir dir;
  constexpr std::size_t kSegment = 64u << 10;
  const std::string body(1000, 'b');
  std::uint64_t seq = 0;
  std::uint64_t first_in_1 = 0;
  // One group of the records numbered up to `seq`, as the committer writes.
  auto write = [&](Wal& wal, std::uint64_t applied) {
    std::string bytes;
    EncodeRecord(Record(++seq, body), &bytes);
    int segment = -1;
    EXPECT_EQ(wal.Write(bytes, seq, applied, &segment), 0);
    return segment;
  };
  {
    Wal wal({dir.path(), kSegment});
    // Segment 0 fills; segment 1 holds nothing, so the writer moves on.
    while (write(wal, 0) == 0) {
    }
    first_in_1 = seq;
    // Segment 1 fills while LMDB has nothing of segment 0: it grows.
    for (int i = 0; i < 400; ++i) EXPECT_EQ(write(wal, 0), 1);
    EXPECT_GT(std::filesystem::file_size(dir / "wal-1"), 3 * kSegment);
    // Once LMDB has segment 0's records, the writer goes back to it.
    EXPECT_EQ(write(wal, first_in_1 - 1), 0);
  }
  // LMDB has what segment 0 held: the grown segment 1 and the record
  // written over segment 0's start are what it lacks, in order.
  Wal wal({dir.path(), kSegment, first_in_1 - 1});
  ASSERT_EQ(wal.recovered().size(), seq - first_in_1 + 1);
  EXPECT_EQ(wal.recovered().front().seq, first_in_1);
  EXPECT_EQ(wal.recovered().back().seq, seq);
}

// Records at or below applied_seq are checked at open but not kept; the
// run's order and its torn end still count.
TEST(WalTest, RecordsLmdbHasAreCheckedButNotKept) {
  testing::TempDir dir;
  std::string bytes;
  std::vector<std::size_t> ends;
  for (std::uint64_t seq = 1; seq <= 30; ++seq) {
    EncodeRecord(Record(seq), &bytes);
    ends.push_back(bytes.size());
  }
  {
    Wal wal({dir.path(), 1u << 20});
    ASSERT_EQ(wal.Append(bytes, 30), 0);
  }
  {
    Wal wal({dir.path(), 1u << 20, 20});
    ASSERT_EQ(wal.recovered().size(), 10u);
    EXPECT_EQ(wal.recovered().front().seq, 21u);
    EXPECT_EQ(wal.last_seq(), 30u);
  }
  {
    Wal wal({dir.path(), 1u << 20, 30});
    EXPECT_TRUE(wal.recovered().empty());
    EXPECT_EQ(wal.last_seq(), 30u);
  }
  // Damages the payload of the record after ends[i].
  auto damage_after = [&](std::size_t i) {
    std::fstream wal(dir / "wal-0",
                     std::ios::in | std::ios::out | std::ios::binary);
    wal.seekp(static_cast<std::streamoff>(ends[i] + 12));
    wal.put('\x5a');
  };
  // Record 25 torn: the run ends before it, kept or not.
  damage_after(23);
  {
    Wal wal({dir.path(), 1u << 20, 20});
    ASSERT_EQ(wal.recovered().size(), 4u);
    EXPECT_EQ(wal.recovered().back().seq, 24u);
    EXPECT_EQ(wal.last_seq(), 24u);
  }
  {
    Wal wal({dir.path(), 1u << 20, 10});
    EXPECT_EQ(wal.recovered().size(), 14u);
  }
  // A record LMDB has is damaged (record 15, applied up to 28): the run
  // stops short of what LMDB applied, and the records after the damage,
  // acknowledged ones among them, cannot be told from an empty log.
  // Refusing to start is the only safe answer.
  damage_after(13);
  EXPECT_THROW(Wal({dir.path(), 1u << 20, 28}), std::runtime_error);
  EXPECT_NO_THROW(Wal({dir.path(), 1u << 20, 14}));
}

// A batch cut short at the end with nothing else kept: the segment's run
// still reaches applied_seq, and nothing is recovered.
TEST(WalTest, ACutBatchAboveTheAppliedRecordsIsDropped) {
  testing::TempDir dir;
  std::string bytes;
  for (std::uint64_t seq = 1; seq <= 9; ++seq) {
    WalRecord r = Record(seq);
    r.batch_continues = seq >= 8;  // 8 and 9 begin a batch whose end is lost
    EncodeRecord(r, &bytes);
  }
  {
    Wal wal({dir.path(), 1u << 20});
    ASSERT_EQ(wal.Append(bytes, 9), 0);
  }
  Wal wal({dir.path(), 1u << 20, 7});
  EXPECT_TRUE(wal.recovered().empty());
  EXPECT_EQ(wal.last_seq(), 7u);
}

// Records LMDB never received (as after a crash before the applier ran)
// are replayed when the committer opens the environment.
TEST(WalRecoveryTest, ReplaysWhatLmdbLacks) {
  testing::TempDir dir;
  {
    Env env({dir.path(), 64u << 20});
    Wal wal({dir.path(), 1u << 20});
    std::string bytes;
    for (std::uint64_t seq = 1; seq <= 30; ++seq)
      EncodeRecord(Record(seq), &bytes);
    ASSERT_EQ(wal.Append(bytes, 30), 0);
  }
  Env env({dir.path(), 64u << 20});
  Committer committer(env, {});
  EXPECT_EQ(committer.replayed(), 30u);
  auto last_of = [](std::uint64_t k) {  // the last record of fence k
    std::uint64_t last = 0;
    for (std::uint64_t seq = 1; seq <= 30; ++seq) {
      if (seq % 7 == k) last = seq;
    }
    return last;
  };
  // Served at once (from the overlay, while the applier catches up).
  for (std::uint64_t k = 0; k < 7; ++k) {
    std::optional<FenceRecord> fence;
    ASSERT_FALSE(FenceStore(env).Get("orders/" + std::to_string(k), &fence));
    ASSERT_TRUE(fence);
    EXPECT_EQ(fence->token, 100 + last_of(k));
  }
  // New writes continue after the recovered numbers, are decided against
  // them, and a restart replays nothing more.
  std::promise<WriteOutcome> stale, fresh;
  committer.Submit(
      FencedWrite{"orders/1", 100 + last_of(1) - 1, false, std::nullopt},
      [&stale](WriteOutcome o) { stale.set_value(o); });
  committer.Submit(FencedWrite{"orders/1", 1000, false, std::nullopt},
                   [&fresh](WriteOutcome o) { fresh.set_value(o); });
  EXPECT_EQ(stale.get_future().get().verdict, WriteOutcome::Verdict::kRejected);
  EXPECT_EQ(fresh.get_future().get().verdict, WriteOutcome::Verdict::kAccepted);
  committer.Stop();
  // Everything is in LMDB itself once the applier is done.
  for (std::uint64_t k = 0; k < 7; ++k) {
    const std::string name = "orders/" + std::to_string(k);
    Env::ReadTxn txn(env);
    Slot slot;
    std::optional<FenceRecord> fence;
    ASSERT_EQ(ReadFenceOf(txn.get(), env, name, &slot, &fence), 0);
    ASSERT_TRUE(fence) << name;
    EXPECT_EQ(fence->token, k == 1 ? 1000 : 100 + last_of(k));
    StoredValue value;
    ASSERT_EQ(ReadValue(txn.get(), env.values(), name, &value), 0);
    EXPECT_EQ(value.found, last_of(k) % 3 != 0) << name;
  }
  Committer again(env, {});
  EXPECT_EQ(again.replayed(), 0u);
}

// Recovered records wait in the log for the applier: the writer must not
// overwrite them before LMDB has them. Each round a child process recovers,
// checks every write acknowledged so far, writes more, and dies without
// stopping (as a SIGKILL leaves things, page cache included), the applier
// anywhere behind. Segments are small, so every life switches segments and
// some crashes come soon after a switch.
TEST(WalRecoveryTest, RecoveredRecordsSurviveTheNextCrash) {
  testing::TempDir dir;
  Committer::Options options;
  options.segment_bytes = 16u << 10;
  const std::string acks = dir / "acks";
  auto acked = [&acks] {  // the highest acknowledged token of each fence
    std::map<std::string, Token> out;
    std::ifstream in(acks);
    std::string fence;
    Token token = 0;
    while (in >> fence >> token) out[fence] = std::max(out[fence], token);
    return out;
  };
  // 0 when no fence is below a token acknowledged on it, else 4. (A write
  // may be durable while its acknowledgement was never recorded.)
  auto check = [&acked](Env& env) {
    for (const auto& [name, token] : acked()) {
      std::optional<FenceRecord> fence;
      if (FenceStore(env).Get(name, &fence) || !fence || fence->token < token) {
        return 4;
      }
    }
    return 0;
  };
  for (int round = 0; round < 12; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Env env({dir.path(), 64u << 20});
      Committer committer(env, options);
      if (int code = check(env); code != 0) std::_Exit(code);
      const int fd = ::open(acks.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
      std::atomic<bool> refused = false;
      std::mt19937 rng(static_cast<unsigned>(round));
      // About 1.5 segments of records, submitted without waiting, so the
      // writer switches segments while the applier is behind; then death
      // at a random moment, mid-group or mid-switch.
      for (int i = 0; i < 100; ++i) {
        const std::string fence = "f/" + std::to_string(i % 9);
        const Token token = 1000 * (round + 1) + i;
        committer.Submit(FencedWrite{fence, token, false,
                                     ValueOp{ValueOp::Kind::kPut, fence,
                                             std::string(200, 'v')}},
                         [fd, fence, token, &refused](WriteOutcome o) {
                           if (o.verdict != WriteOutcome::Verdict::kAccepted) {
                             refused = true;
                             return;
                           }
                           // One append: the line is there whole or not at all.
                           const std::string line =
                               fence + ' ' + std::to_string(token) + '\n';
                           if (::write(fd, line.data(), line.size()) < 0)
                             refused = true;
                         });
        if (i % 10 == 9) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
      std::_Exit(refused ? 3 : 0);  // no Stop: a crash
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << round;
    ASSERT_EQ(WEXITSTATUS(status), 0)
        << "round " << round
        << (WEXITSTATUS(status) == 4 ? ": an acknowledged write was lost"
                                     : ": a write was not accepted");
  }
  Env env({dir.path(), 64u << 20});
  Committer committer(env, options);
  EXPECT_EQ(check(env), 0);
  EXPECT_EQ(acked().size(), 9u);
}

// A restart after a crash mid-write: the log's last records are cut at
// every byte offset (the rest of the segment holds old bytes); recovery
// replays exactly the records before the cut, each group written and synced
// on its own as the committer does.
TEST(WalRecoveryTest, ATornTailIsDroppedAndTheIntactPrefixReplayed) {
  testing::TempDir dir;
  const std::string source = dir / "source";
  std::filesystem::create_directories(source);
  std::vector<std::size_t> ends;
  {
    Wal wal({source, 64u << 10});
    std::size_t at = 0;
    for (std::uint64_t seq = 1; seq <= 5; ++seq) {
      std::string group;
      EncodeRecord(Record(seq, std::string(seq, 'b')), &group);
      ASSERT_EQ(wal.Append(group, seq), 0);
      at += group.size();
      ends.push_back(at);
    }
  }
  for (std::size_t cut = ends[2]; cut <= ends[4]; ++cut) {
    const std::string copy = dir / ("cut-" + std::to_string(cut));
    std::filesystem::create_directories(copy);
    for (const char* name : {"wal-0", "wal-1"}) {
      std::filesystem::copy_file(source + "/" + name, copy + "/" + name);
    }
    {
      std::fstream wal(copy + "/wal-0",
                       std::ios::in | std::ios::out | std::ios::binary);
      wal.seekp(static_cast<std::streamoff>(cut));
      const std::string old(ends[4] - cut, '\xee');
      wal.write(old.data(), static_cast<std::streamsize>(old.size()));
    }
    std::size_t whole = 0;
    while (whole < ends.size() && ends[whole] <= cut) ++whole;
    Env env({copy, 64u << 20});
    Committer::Options options;
    options.segment_bytes = 64u << 10;
    Committer committer(env, options);
    EXPECT_EQ(committer.replayed(), whole) << "cut at " << cut;
    std::optional<FenceRecord> fence;
    ASSERT_FALSE(
        FenceStore(env).Get("orders/" + std::to_string(whole % 7), &fence));
    ASSERT_TRUE(fence) << cut;
    EXPECT_EQ(fence->token, 100 + whole) << cut;
  }
}

TEST(WalRecoveryTest, AGapInTheLogRefusesToStart) {
  testing::TempDir dir;
  {
    Env env({dir.path(), 64u << 20});
    Wal wal({dir.path(), 1u << 20});
    std::string bytes;
    EncodeRecord(Record(3), &bytes);  // 1 and 2 are missing
    ASSERT_EQ(wal.Append(bytes, 3), 0);
  }
  Env env({dir.path(), 64u << 20});
  EXPECT_THROW(Committer(env, {}), std::runtime_error);
}

// Small segments: the writer fills one, then the other, then the first
// again, and every acknowledged write survives each restart.
TEST(WalRecoveryTest, SegmentsAreReusedAndEveryWriteSurvivesRestarts) {
  testing::TempDir dir;
  Committer::Options options;
  options.segment_bytes = 16u << 10;
  Token token = 0;
  for (int round = 0; round < 3; ++round) {
    Env env({dir.path(), 64u << 20});
    Committer committer(env, options);
    for (int i = 0; i < 400; ++i) {
      std::promise<WriteOutcome> p;
      const std::string key = "k" + std::to_string(i % 50);
      committer.Submit(FencedWrite{key, ++token, false,
                                   ValueOp{ValueOp::Kind::kPut, key,
                                           std::string(100, 'a' + round)}},
                       [&p](WriteOutcome o) { p.set_value(o); });
      ASSERT_EQ(p.get_future().get().verdict, WriteOutcome::Verdict::kAccepted);
    }
  }
  Env env({dir.path(), 64u << 20});
  Committer committer(env, options);
  std::optional<FenceRecord> fence;
  ASSERT_FALSE(FenceStore(env).Get("k49", &fence));
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->token, token);
  std::ifstream wal0(dir / "wal-0"), wal1(dir / "wal-1");
  EXPECT_TRUE(wal0.good() && wal1.good());
}

// Syncs overlap: 8 threads write at once to small segments, so groups are
// decided while earlier ones are being synced and the writer switches
// segments many times. Every answer's fence is what the accept rule says,
// and after a restart each fence is the highest token acknowledged for it.
TEST(WalRecoveryTest, OverlappingSyncsAcrossSegmentSwitchesLoseNothing) {
  testing::TempDir dir;
  Committer::Options options;
  options.segment_bytes = 16u << 10;
  constexpr int kThreads = 8, kWrites = 300, kKeys = 20;
  std::atomic<Token> next{0};
  std::mutex mu;
  std::map<std::string, Token> acked;  // the highest acknowledged per key
  {
    Env env({dir.path(), 64u << 20});
    Committer committer(env, options);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kWrites; ++i) {
          const std::string key = "k" + std::to_string((t * 7 + i) % kKeys);
          const Token token = ++next;
          std::promise<WriteOutcome> p;
          committer.Submit(FencedWrite{key, token, false,
                                       ValueOp{ValueOp::Kind::kPut, key,
                                               std::string(64, 'v')}},
                           [&p](WriteOutcome o) { p.set_value(o); });
          const WriteOutcome o = p.get_future().get();
          std::lock_guard lock(mu);
          if (o.verdict == WriteOutcome::Verdict::kAccepted) {
            EXPECT_EQ(o.current, token);
            acked[key] = std::max(acked[key], token);
          } else {
            EXPECT_EQ(o.verdict, WriteOutcome::Verdict::kRejected);
            ASSERT_TRUE(o.current);
            EXPECT_GT(*o.current, token)
                << "a stale write names a higher token";
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_LT(committer.commits(),
              static_cast<std::uint64_t>(kThreads * kWrites))
        << "writes were grouped";
  }
  Env env({dir.path(), 64u << 20});
  Committer committer(env, options);
  ASSERT_EQ(acked.size(), static_cast<std::size_t>(kKeys));
  for (const auto& [key, token] : acked) {
    std::optional<FenceRecord> fence;
    ASSERT_FALSE(FenceStore(env).Get(key, &fence));
    ASSERT_TRUE(fence) << key;
    EXPECT_EQ(fence->token, token) << key;
  }
}

}  // namespace
}  // namespace fencepost::fence
