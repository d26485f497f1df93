// ValueGate: the protocol of values kept elsewhere, over a fake store and
// fences in memory: the fence durable and told first, a refusal that
// changes nothing, the precondition decided again in the turn, an unknown
// outcome that holds the fence closed (a stale token still rejected), one
// write of a fence at a time.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/value_gate.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fence/rules.h"
#include "storage/errc.h"
#include "tests/testing/stub_fences.h"

namespace fencepost::storage {
namespace {

namespace asio = boost::asio;
using Verdict = fence::WriteOutcome::Verdict;
using fence::Landing;

// Fences in memory, decided by the rulebook, durable at once.
class MemoryFences : public testing::StubFences {
 public:
  void Submit(fence::FenceWrite write, fence::WriteDone done) override {
    const auto& w = std::get<fence::FencedWrite>(write);
    std::optional<fence::Token> token;
    std::int64_t at = 0;
    if (auto it = fences.find(w.fence); it != fences.end()) {
      token = it->second.token;
      at = it->second.updated_at_ns;
    }
    fence::WriteOutcome out = fence::DecideWrite(
        w, token, at, ++clock, w.value_now.value_or(fence::ValueNow{}));
    if (fence::RaisesFence(out)) {
      fences[w.fence] = {w.fence, *out.current, out.updated_at_ns};
    }
    ++commits;
    done(std::move(out));
  }
  Awaitable<Read> Get(std::string name) override {
    Read read;
    if (auto it = fences.find(name); it != fences.end())
      read.fence = it->second;
    co_return read;
  }
  std::optional<std::uint64_t> Count() override { return fences.size(); }

  std::map<std::string, fence::FenceRecord> fences;
  std::int64_t clock = 0;
  int commits = 0;
};

// A store whose answers the test sets; it logs what it is asked, with the
// fence as it stood when the value was stored.
class FakeStore : public ValueStore {
 public:
  explicit FakeStore(MemoryFences& fences) : fences_(fences) {}

  Awaitable<Current> Prepare(const WriteRequest& request,
                             bool read_value) override {
    log.push_back("prepare " + request.key + (read_value ? " read" : ""));
    Current current;
    current.error = refuse;
    if (read_value) current.value = before;
    co_return current;
  }
  Awaitable<Current> Reread(const WriteRequest& request) override {
    log.push_back("reread " + request.key);
    Current current;
    current.value = now;
    co_return current;
  }
  Awaitable<Stored> Store(const WriteRequest& request,
                          const fence::ValueNow* /*seen*/) override {
    const auto it = fences_.fences.find(request.fence);
    log.push_back("store " + request.key + " at " +
                  (it == fences_.fences.end()
                       ? std::string("none")
                       : std::to_string(it->second.token)) +
                  (told_before_store ? " told" : ""));
    if (pause) {
      boost::system::error_code ec;
      co_await pause->async_wait(asio::redirect_error(kUseAwaitable, ec));
    }
    Stored stored;
    stored.landing = landing;
    if (landing != Landing::kApplied) stored.error = Errc::kOutcomeUnknown;
    if (landing == Landing::kNotApplied) stored.error = Errc::kUpstreamFailed;
    stored.etag = "new";
    stored.created = true;
    co_return stored;
  }

  std::vector<std::string> log;
  std::error_code refuse;
  fence::ValueNow before, now;
  Landing landing = Landing::kApplied;
  bool told_before_store = false;
  asio::steady_timer* pause = nullptr;

 private:
  MemoryFences& fences_;
};

class ValueGateTest : public ::testing::Test {
 protected:
  ValueGateTest() {
    MakeGate({std::chrono::seconds(60), std::chrono::seconds(0), false});
  }

  void MakeGate(ValueGate::Options options) {
    gate_.emplace(fences_, store_, options);
    fences_.TellChanges([this](const Change& change) {
      told_.push_back(change.fence.name + "=" +
                      std::to_string(change.fence.token));
      store_.told_before_store = true;
    });
  }

  static WriteRequest Put(fence::Token token, std::string key = "k") {
    WriteRequest request;
    request.key = key;
    request.fence = std::move(key);
    request.token = token;
    request.body = "v";
    return request;
  }

  // Starts the write; its result lands in *out once it is done.
  void Start(WriteRequest request, std::optional<WriteResult>* out) {
    asio::co_spawn(
        io_,
        [this, request = std::move(request), out]() mutable -> Awaitable<void> {
          *out = co_await gate_->Write(std::move(request));
        },
        asio::detached);
    io_.restart();
    io_.poll();
  }

  WriteResult Write(WriteRequest request) {
    std::optional<WriteResult> out;
    Start(std::move(request), &out);
    io_.restart();
    io_.run();
    EXPECT_TRUE(out.has_value());
    return out.value_or(WriteResult{});
  }

  asio::io_context io_;
  MemoryFences fences_;
  FakeStore store_{fences_};
  std::optional<ValueGate> gate_;
  std::vector<std::string> told_;
};

TEST_F(ValueGateTest, TheFenceIsDurableAndToldBeforeTheValueIsStored) {
  const WriteResult result = Write(Put(7));
  EXPECT_EQ(result.outcome.verdict, Verdict::kAccepted);
  EXPECT_EQ(result.outcome.etag, "new");
  EXPECT_TRUE(result.created);
  EXPECT_EQ(store_.log,
            (std::vector<std::string>{"prepare k", "store k at 7 told"}));
  EXPECT_EQ(told_, std::vector<std::string>{"k=7"});
}

TEST_F(ValueGateTest, AStaleWriteReachesNoStore) {
  Write(Put(7));
  store_.log.clear();
  const WriteResult result = Write(Put(5));
  EXPECT_EQ(result.outcome.verdict, Verdict::kRejected);
  EXPECT_EQ(store_.log, std::vector<std::string>{"prepare k"});
  EXPECT_EQ(fences_.fences.at("k").token, 7u);
}

TEST_F(ValueGateTest, ARefusalOfTheStoreChangesNothing) {
  store_.refuse = Errc::kSymlink;
  const WriteResult result = Write(Put(7));
  EXPECT_EQ(result.outcome.verdict, Verdict::kFailed);
  EXPECT_EQ(result.outcome.error, Errc::kSymlink);
  EXPECT_EQ(fences_.commits, 0);
  EXPECT_TRUE(fences_.fences.empty());
  EXPECT_TRUE(told_.empty());
}

TEST_F(ValueGateTest, APreconditionIsDecidedBeforeTheCommitAndAgainInTheTurn) {
  WriteRequest request = Put(7);
  request.precondition.has_match = true;
  request.precondition.match = {"t"};
  // The first read refuses: nothing changes.
  store_.before = {true, "u"};
  WriteResult result = Write(request);
  EXPECT_EQ(result.outcome.verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(result.outcome.etag, "u");
  EXPECT_TRUE(fences_.fences.empty());
  // The first read holds, the value changed before the turn: the fence has
  // moved (safe), the value is not stored.
  store_.log.clear();
  store_.before = {true, "t"};
  store_.now = {true, "u"};
  result = Write(request);
  EXPECT_EQ(result.outcome.verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(result.outcome.etag, "u");
  EXPECT_EQ(fences_.fences.at("k").token, 7u);
  EXPECT_EQ(store_.log,
            (std::vector<std::string>{"prepare k read", "reread k"}));
  // Both reads hold: stored.
  store_.log.clear();
  store_.now = {true, "t"};
  result = Write(request);
  EXPECT_EQ(result.outcome.verdict, Verdict::kAccepted);
  EXPECT_EQ(store_.log, (std::vector<std::string>{"prepare k read", "reread k",
                                                  "store k at 7 told"}));
}

TEST_F(ValueGateTest, AFailedStoreLeavesTheFenceAdvancedAndOpen) {
  store_.landing = Landing::kNotApplied;
  WriteResult result = Write(Put(7));
  EXPECT_EQ(result.outcome.verdict, Verdict::kFailed);
  EXPECT_EQ(result.outcome.error, Errc::kUpstreamFailed);
  EXPECT_EQ(fences_.fences.at("k").token, 7u);
  EXPECT_EQ(told_, std::vector<std::string>{"k=7"});
  store_.landing = Landing::kApplied;
  result = Write(Put(8));
  EXPECT_EQ(result.outcome.verdict, Verdict::kAccepted);
}

TEST_F(ValueGateTest, AnUnknownOutcomeHoldsTheFenceClosed) {
  store_.landing = Landing::kUnknown;
  WriteResult result = Write(Put(7));
  EXPECT_EQ(result.outcome.verdict, Verdict::kFailed);
  EXPECT_EQ(result.outcome.error, Errc::kOutcomeUnknown);
  EXPECT_EQ(told_, std::vector<std::string>{"k=7"});

  store_.landing = Landing::kApplied;
  store_.log.clear();
  const int commits = fences_.commits;
  // A newer write waits; a stale one still gets its 409; neither commits
  // nor reaches the store. Another fence is not held.
  result = Write(Put(9));
  EXPECT_EQ(result.outcome.error, Errc::kFenceHeld);
  EXPECT_GE(result.retry_after, 59);
  EXPECT_LE(result.retry_after, 60);
  result = Write(Put(3));
  EXPECT_EQ(result.outcome.verdict, Verdict::kRejected);
  EXPECT_EQ(result.outcome.current, fence::Token{7});
  EXPECT_EQ(fences_.commits, commits);
  EXPECT_TRUE(store_.log.empty());
  EXPECT_EQ(Write(Put(1, "other")).outcome.verdict, Verdict::kAccepted);
}

TEST_F(ValueGateTest, AStartAfterACrashHoldsEveryFence) {
  MakeGate({std::chrono::seconds(60), std::chrono::seconds(90), false});
  const WriteResult result = Write(Put(7));
  EXPECT_EQ(result.outcome.error, Errc::kFenceHeld);
  EXPECT_GE(result.retry_after, 89);
  EXPECT_LE(result.retry_after, 90);
  EXPECT_EQ(fences_.commits, 0);
  EXPECT_GT(gate_->HoldLeft(), std::chrono::seconds(89)) << "handed on";
}

// What a clean stop hands on: the longest hold that still has to run.
TEST_F(ValueGateTest, HoldLeftIsTheLongestHoldStillToRun) {
  EXPECT_EQ(gate_->HoldLeft(), std::chrono::milliseconds(0));
  store_.landing = Landing::kUnknown;
  EXPECT_EQ(Write(Put(7)).outcome.error, Errc::kOutcomeUnknown);
  EXPECT_GT(gate_->HoldLeft(), std::chrono::seconds(59));
  EXPECT_LE(gate_->HoldLeft(), std::chrono::seconds(60));
}

TEST_F(ValueGateTest, WithoutHoldsAnUnknownOutcomeLeavesTheFenceOpen) {
  MakeGate({std::chrono::seconds(60), std::chrono::seconds(60), true});
  store_.landing = Landing::kUnknown;
  EXPECT_EQ(Write(Put(7)).outcome.error, Errc::kOutcomeUnknown);
  store_.landing = Landing::kApplied;
  EXPECT_EQ(Write(Put(8)).outcome.verdict, Verdict::kAccepted);
}

TEST_F(ValueGateTest, AFencesWritesReachTheStoreOneAtATime) {
  asio::steady_timer pause(io_, asio::steady_timer::time_point::max());
  store_.pause = &pause;
  std::optional<WriteResult> first, second, other;
  Start(Put(7), &first);
  Start(Put(8), &second);
  Start(Put(1, "other"), &other);
  // The second write of k waits for the first one's value: not committed.
  EXPECT_EQ(fences_.fences.at("k").token, 7u);
  EXPECT_EQ(store_.log, (std::vector<std::string>{
                            "prepare k", "store k at 7 told", "prepare other",
                            "store other at 1 told"}));
  store_.pause = nullptr;
  pause.cancel();
  io_.restart();
  io_.run();
  ASSERT_TRUE(first && second && other);
  EXPECT_EQ(second->outcome.verdict, Verdict::kAccepted);
  EXPECT_EQ(store_.log.back(), "store k at 8 told");
}

}  // namespace
}  // namespace fencepost::storage
