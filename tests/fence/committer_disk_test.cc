// The committer on a disk whose syncs the test controls and watches:
// tests/reliability/powercut_fs.py, whose journal records every write and
// every fsync/fdatasync of the log with CLOCK_REALTIME nanoseconds (an
// io_uring IORING_OP_FSYNC included), and whose control file delays the
// log's syncs. A plain directory cannot show these: its syncs return before
// the order of an answer and a sync can differ.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fence/committer.h"
#include "fence/env.h"
#include "tests/testing/powercut_fs.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

using testing::FsEvent;
using testing::PowercutFs;
using testing::PowercutFsOptions;
using Verdict = WriteOutcome::Verdict;

std::int64_t RealtimeNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A write's answer and when it came, on the journal's clock.
struct Answer {
  WriteOutcome outcome;
  std::int64_t at_ns = 0;
};

// Collects answers; Await waits (at most 60 s) until `n` have come.
class Answers {
 public:
  explicit Answers(std::size_t n) : answers_(n) {}
  Committer::Done For(std::size_t i) {
    return [this, i](WriteOutcome o) {
      const std::int64_t now = RealtimeNs();
      std::lock_guard lock(mu_);
      answers_[i] = Answer{std::move(o), now};
      ++count_;
      cv_.notify_all();
    };
  }
  bool Await(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60),
                        [&] { return count_ >= n; });
  }
  std::size_t count() {
    std::lock_guard lock(mu_);
    return count_;
  }
  const Answer& operator[](std::size_t i) {
    std::lock_guard lock(mu_);
    return answers_[i];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Answer> answers_;
  std::size_t count_ = 0;
};

// Counts the journal's events of `kind` on log segments.
std::size_t LogEvents(const PowercutFs& fs, FsEvent::Kind kind) {
  std::size_t n = 0;
  for (const FsEvent& e : fs.Journal()) {
    n += e.kind == kind && testing::IsLogSegment(e.path);
  }
  return n;
}

class CommitterDiskTest : public ::testing::Test {
 public:
  void SetUp() override {
    if (const std::string why = testing::PowercutFsUnsupported();
        !why.empty()) {
      GTEST_FAIL() << why;
    }
    PowercutFsOptions options;
    options.journal = true;
    fs_.emplace(dir_ / "fs", options);
    data_ = fs_->mountpoint() + "/data";
    std::filesystem::create_directories(data_);
    env_.emplace(Env::Options{data_, 64u << 20, 4u << 20});
  }
  void TearDown() override {
    committer_.reset();  // off the mount before it goes
    env_.reset();
  }
  void Start(Committer::Options options) {
    committer_.emplace(*env_, std::move(options));
    started_at_ = fs_->Journal().size();
  }

  testing::TempDir dir_;
  std::optional<PowercutFs> fs_;
  std::string data_;
  std::optional<Env> env_;
  std::optional<Committer> committer_;
  std::size_t started_at_ = 0;  // the journal's length once started
};

// Token 5 is written and its sync made to take a second (the disk delays
// it); meanwhile a second write of the fence, at `token`, is decided from
// the unsynced group. Its answer must come after that sync's end. Returns
// the second write's outcome.
WriteOutcome SecondWriteAfterAnUnsyncedRaise(CommitterDiskTest& test,
                                             Token token);

// A 409 names the fence's token: that token's write must be durable before
// the 409 goes out, or a power cut could lose the write the 409 cited. A
// group of rejections alone logs nothing, yet it must wait for the sync of
// the group before it.
TEST_F(CommitterDiskTest, ARejectionCitingAnUnsyncedTokenWaitsForItsSync) {
  Start({});
  const WriteOutcome second = SecondWriteAfterAnUnsyncedRaise(*this, 3);
  EXPECT_EQ(second.verdict, Verdict::kRejected);
  EXPECT_EQ(second.current, Token{5}) << "the 409 cites token 5";
}

// A write at the fence's own token, its value kept elsewhere (fs:, http://,
// s3://), changes nothing of the fence and logs nothing; but it is accepted
// on token 5's raise, which must be durable before the write goes on to its
// store.
TEST_F(CommitterDiskTest, AnEqualTokenWriteOnAnUnsyncedRaiseWaitsForItsSync) {
  Start({});
  const WriteOutcome second = SecondWriteAfterAnUnsyncedRaise(*this, 5);
  EXPECT_EQ(second.verdict, Verdict::kAccepted);
  EXPECT_EQ(second.current, Token{5});
  EXPECT_EQ(committer_->commits(), 1u) << "the equal token logged a record";
}

WriteOutcome SecondWriteAfterAnUnsyncedRaise(CommitterDiskTest& test,
                                             Token token) {
  PowercutFs& fs = *test.fs_;
  Committer& committer = *test.committer_;
  fs.Control("delay */wal-* 1000\n");
  Answers answers(2);
  const std::size_t syncs = LogEvents(fs, FsEvent::Kind::kFsyncBegin);
  committer.Submit(FencedWrite{"k", 5, false, std::nullopt}, answers.For(0));
  // Its sync has begun: the group is written, and waits for the disk.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (LogEvents(fs, FsEvent::Kind::kFsyncBegin) == syncs) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the write's sync never began";
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  committer.Submit(FencedWrite{"k", token, false, std::nullopt},
                   answers.For(1));
  if (!answers.Await(2)) {
    ADD_FAILURE() << "the writes were not answered";
    return {};
  }
  EXPECT_EQ(answers[0].outcome.verdict, Verdict::kAccepted);
  // The fence it was decided on is the one token 5's raise left, time too.
  EXPECT_EQ(answers[1].outcome.updated_at_ns, answers[0].outcome.updated_at_ns);

  // The end of the first log sync that began after the write was submitted.
  std::int64_t synced_ns = 0;
  std::size_t begins = 0;
  for (const FsEvent& e : fs.Journal()) {
    if (!testing::IsLogSegment(e.path)) continue;
    if (e.kind == FsEvent::Kind::kFsyncBegin) ++begins;
    if (e.kind == FsEvent::Kind::kFsyncEnd && begins > syncs) {
      synced_ns = e.ns;
      break;
    }
  }
  EXPECT_NE(synced_ns, 0) << "no end of the write's sync in the journal";
  EXPECT_GT(answers[1].at_ns, synced_ns)
      << "the write at token " << token << " was answered "
      << (synced_ns - answers[1].at_ns) / 1000000
      << " ms before token 5's sync ended";
  EXPECT_GE(answers[1].at_ns, answers[0].at_ns) << "answers out of order";
  fs.Control("");  // the stop's syncs need no delay
  return answers[1].outcome;
}

// Recovery reads each segment's run from its start: if the writer began the
// next segment while the last group of the one it left was still being
// synced, a power cut in between would leave a durable run after a gap, and
// the restart would refuse the log. With small segments, groups of four
// writes and every log sync delayed 20 ms (so two are in flight, and a
// switch would overtake one), no write may reach the next segment before
// the sync of the segment left has ended.
TEST_F(CommitterDiskTest, NoSegmentIsBegunBeforeTheOneLeftIsSynced) {
  Committer::Options options;
  options.segment_bytes = 64u << 10;
  options.max_batch_writes = 4;
  // Checkpoints every few writes, so LMDB keeps up and the writer leaves
  // each full segment (it grows one LMDB is behind on).
  options.max_unapplied_bytes = 64u << 10;
  Start(options);
  fs_->Control("delay */wal-* 20\n");
  constexpr std::size_t kWrites = 480;  // 480 x 2 KiB: about 15 switches
  Answers answers(kWrites);
  for (std::size_t i = 0; i < kWrites; ++i) {
    const std::string key = "k" + std::to_string(i % 50);
    committer_->Submit(
        FencedWrite{key, Token(i + 1), false,
                    ValueOp{ValueOp::Kind::kPut, key, std::string(2048, 'v')}},
        answers.For(i));
  }
  ASSERT_TRUE(answers.Await(kWrites)) << answers.count() << " answered";
  for (std::size_t i = 0; i < kWrites; ++i) {
    ASSERT_EQ(answers[i].outcome.verdict, Verdict::kAccepted) << i;
  }
  const std::vector<FsEvent> journal = fs_->Journal();
  int switches = 0;
  for (const std::string& line : testing::SwitchesAheadOfTheirSync(
           journal, started_at_, journal.size(), &switches)) {
    ADD_FAILURE() << line;
  }
  EXPECT_GE(switches, 8) << "the writes went round the segments";
}

}  // namespace
}  // namespace fencepost::fence
