// EtcdFences against an in-memory etcd (FakeEtcd): the store's own part of
// each verdict (what it reads, what one transaction compares and writes,
// what it does when another replica moved a fence in between). The rules
// themselves are fence/rules.h's, tested in fence_test; the real-etcd
// suites (ReplicasTest, EtcdLeasesTest, ...) cover etcd itself.

#include "storage/etcd_fences.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fence/errc.h"
#include "storage/etcd_records.h"
#include "tests/storage/fake_etcd.h"

namespace fencepost::storage {
namespace {

namespace asio = boost::asio;
using fence::FencedWrite;
using fence::FenceWrite;
using fence::LeaseOp;
using fence::WriteOutcome;
using testing::FakeEtcd;
using Verdict = fence::WriteOutcome::Verdict;
using LeaseVerdict = fence::LeaseOutcome::Verdict;

FencedWrite Write(std::string fence, fence::Token token, std::string key = "",
                  std::string body = "") {
  FencedWrite write;
  write.fence = std::move(fence);
  write.token = token;
  if (!key.empty()) {
    write.value = fence::ValueOp{fence::ValueOp::Kind::kPut, std::move(key),
                                 std::move(body), ""};
  }
  return write;
}

// `write` with If-Match `tags` (`*` alone: any).
FencedWrite IfMatch(FencedWrite write, std::vector<std::string> tags) {
  write.precondition.has_match = true;
  if (tags == std::vector<std::string>{"*"}) {
    write.precondition.match_any = true;
  } else {
    write.precondition.match = std::move(tags);
  }
  return write;
}

FencedWrite IfNoneMatchAny(FencedWrite write) {
  write.precondition.has_none_match = true;
  write.precondition.none_match_any = true;
  return write;
}

FencedWrite Delete(std::string fence, fence::Token token, std::string key) {
  FencedWrite write = Write(std::move(fence), token);
  write.value =
      fence::ValueOp{fence::ValueOp::Kind::kDelete, std::move(key), "", ""};
  return write;
}

LeaseOp Acquire(std::string name, std::string holder, std::uint64_t ttl_ms) {
  LeaseOp op;
  op.kind = LeaseOp::Kind::kAcquire;
  op.fence = name;
  op.name = std::move(name);
  op.holder = std::move(holder);
  op.ttl_ms = ttl_ms;
  return op;
}

LeaseOp Release(std::string name, std::string holder, fence::Token token) {
  LeaseOp op;
  op.kind = LeaseOp::Kind::kRelease;
  op.fence = name;
  op.name = std::move(name);
  op.holder = std::move(holder);
  op.token = token;
  return op;
}

class EtcdFencesTest : public ::testing::Test {
 protected:
  EtcdFencesTest() { Open(0); }

  // A store on a new, empty etcd, with --max-leases `max_leases` (0: none).
  void Open(std::size_t max_leases) {
    fences_.reset();
    auto fake = std::make_unique<FakeEtcd>();
    etcd_ = fake.get();
    EtcdFences::Options options;
    options.spec.prefix = "fp";
    options.on_retry = [this](std::string_view cause) {
      causes_.emplace_back(cause);
    };
    options.max_leases = max_leases;
    fences_ =
        std::make_unique<EtcdFences>(io_, std::move(options), std::move(fake));
  }

  // Submits every write before any runs (so they can form one group), and
  // runs them to their answers.
  std::vector<WriteOutcome> SubmitAll(std::vector<FencedWrite> writes) {
    std::vector<std::optional<WriteOutcome>> answers(writes.size());
    for (std::size_t i = 0; i < writes.size(); ++i) {
      Start(std::move(writes[i]), &answers[i]);
    }
    io_.restart();
    io_.run();
    std::vector<WriteOutcome> out;
    for (auto& answer : answers) {
      EXPECT_TRUE(answer.has_value()) << "a write was never answered";
      out.push_back(answer ? std::move(*answer) : WriteOutcome{});
    }
    return out;
  }
  WriteOutcome Submit(FenceWrite write) {
    std::optional<WriteOutcome> answer;
    Start(std::move(write), &answer);
    io_.restart();
    io_.run();
    EXPECT_TRUE(answer.has_value()) << "the write was never answered";
    return answer ? std::move(*answer) : WriteOutcome{};
  }
  void Start(FenceWrite&& write, std::optional<WriteOutcome>* answer) {
    fences_->Submit(std::move(write),
                    [answer](WriteOutcome o) { *answer = std::move(o); });
  }

  template <typename T>
  T Await(Awaitable<T> awaitable) {
    std::optional<T> out;
    std::exception_ptr error;
    asio::co_spawn(io_, std::move(awaitable),
                   [&](std::exception_ptr e, T value) {
                     error = e;
                     if (!e) out = std::move(value);
                   });
    io_.restart();
    io_.run();
    if (error) std::rethrow_exception(error);
    return std::move(*out);
  }
  void Await(Awaitable<void> awaitable) {
    std::exception_ptr error;
    asio::co_spawn(io_, std::move(awaitable),
                   [&](std::exception_ptr e) { error = e; });
    io_.restart();
    io_.run();
    if (error) std::rethrow_exception(error);
  }

  // The fence `name` as etcd holds it (nullopt: no record).
  std::optional<fence::Token> FenceInEtcd(const std::string& name) {
    const FakeEtcd::Kv* kv = etcd_->Find("fp/fences/" + name);
    if (kv == nullptr) return std::nullopt;
    fence::Token token = 0;
    std::int64_t updated_at_ns = 0;
    EXPECT_TRUE(etcd::ParseFence(kv->value, &token, &updated_at_ns));
    return token;
  }
  // The value `key` as etcd holds it, "TOKEN\nBODY" ("" when there is none).
  std::string ValueInEtcd(const std::string& key) {
    const FakeEtcd::Kv* kv = etcd_->Find("fp/values/" + key);
    return kv != nullptr ? kv->value : "";
  }
  std::size_t Transactions() const { return fences_->transactions(); }

  asio::io_context io_;
  FakeEtcd* etcd_ = nullptr;
  std::unique_ptr<EtcdFences> fences_;
  // The cause of each retry (on_retry), in order.
  std::vector<std::string> causes_;
};

TEST_F(EtcdFencesTest, AWriteAtOrAboveTheFenceIsAcceptedAndBelowItRejected) {
  WriteOutcome first = Submit(Write("f", 5, "k", "five"));
  EXPECT_EQ(first.verdict, Verdict::kAccepted);
  EXPECT_EQ(first.previous, std::nullopt);
  EXPECT_EQ(first.current, 5u);
  EXPECT_TRUE(first.created);
  EXPECT_EQ(FenceInEtcd("f"), 5u);
  EXPECT_EQ(ValueInEtcd("k"), "5\nfive");

  WriteOutcome stale = Submit(Write("f", 3, "k", "three"));
  EXPECT_EQ(stale.verdict, Verdict::kRejected);
  EXPECT_EQ(stale.current, 5u);
  EXPECT_EQ(ValueInEtcd("k"), "5\nfive");

  WriteOutcome same = Submit(Write("f", 5, "k", "again"));
  EXPECT_EQ(same.verdict, Verdict::kAccepted);
  EXPECT_FALSE(same.created);
  EXPECT_EQ(ValueInEtcd("k"), "5\nagain");

  // The reads see what the writes left.
  Fences::Read read = Await(fences_->Get("f"));
  ASSERT_TRUE(read.fence.has_value());
  EXPECT_EQ(read.fence->token, 5u);
  EtcdFences::ValueRead value = Await(fences_->GetValue("k"));
  EXPECT_TRUE(value.found);
  EXPECT_EQ(value.token, 5u);
  EXPECT_EQ(value.body, "again");
}

TEST_F(EtcdFencesTest, AnObservedWriteIsAppliedAndLeavesTheFence) {
  Submit(Write("f", 5));
  FencedWrite observed = Write("f", 2, "k", "two");
  observed.observe = true;
  WriteOutcome outcome = Submit(observed);
  EXPECT_EQ(outcome.verdict, Verdict::kObserved);
  EXPECT_EQ(outcome.current, 5u);
  EXPECT_EQ(FenceInEtcd("f"), 5u);
  EXPECT_EQ(ValueInEtcd("k"), "2\ntwo");
}

TEST_F(EtcdFencesTest, AGroupIsDecidedInArrivalOrderInOneTransaction) {
  std::vector<WriteOutcome> out =
      SubmitAll({Write("f", 3, "a", "3"), Write("f", 2, "b", "2"),
                 Write("f", 4, "a", "4"), Write("g", 1)});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].verdict, Verdict::kAccepted);
  EXPECT_EQ(out[1].verdict, Verdict::kRejected);
  EXPECT_EQ(out[1].current, 3u);  // as the write before it left the fence
  EXPECT_EQ(out[2].verdict, Verdict::kAccepted);
  EXPECT_EQ(out[2].previous, 3u);
  EXPECT_EQ(out[3].verdict, Verdict::kAccepted);
  EXPECT_EQ(Transactions(), 1u);
  EXPECT_EQ(FenceInEtcd("f"), 4u);
  EXPECT_EQ(FenceInEtcd("g"), 1u);
  // The last write of a value wins; a rejected one writes nothing.
  EXPECT_EQ(ValueInEtcd("a"), "4\n4");
  EXPECT_EQ(ValueInEtcd("b"), "");
  EXPECT_TRUE(out[0].created);
  EXPECT_FALSE(out[2].created);
}

TEST_F(EtcdFencesTest, ABatchIsAppliedWhollyOrNotAtAll) {
  Submit(Write("b", 3));
  fence::Batch stopped;
  stopped.writes = {Write("a", 5, "x", "x"), Write("b", 1, "y", "y"),
                    Write("c", 1)};
  WriteOutcome refused = Submit(stopped);
  EXPECT_EQ(refused.verdict, Verdict::kRejected);
  ASSERT_EQ(refused.batch.size(), 2u);  // up to the write that stopped it
  EXPECT_EQ(refused.batch[0].verdict, Verdict::kAccepted);
  EXPECT_EQ(refused.batch[1].verdict, Verdict::kRejected);
  EXPECT_EQ(FenceInEtcd("a"), std::nullopt);
  EXPECT_EQ(FenceInEtcd("c"), std::nullopt);
  EXPECT_EQ(ValueInEtcd("x"), "");

  const std::size_t before = Transactions();
  fence::Batch whole;
  whole.writes = {Write("a", 5, "x", "x"), Write("b", 4, "y", "y")};
  WriteOutcome applied = Submit(whole);
  EXPECT_EQ(applied.verdict, Verdict::kAccepted);
  ASSERT_EQ(applied.batch.size(), 2u);
  EXPECT_EQ(Transactions(), before + 1);
  EXPECT_EQ(FenceInEtcd("a"), 5u);
  EXPECT_EQ(FenceInEtcd("b"), 4u);
  EXPECT_EQ(ValueInEtcd("x"), "5\nx");
  EXPECT_EQ(ValueInEtcd("y"), "4\ny");
}

// Another replica moves the fence after this one read it and before its
// transaction: the compare fails, the failure branch's read is taken, and
// the write is decided again against it.
TEST_F(EtcdFencesTest, AFenceMovedBetweenReadAndCommitIsDecidedAgain) {
  // Call 1 reads the fence (none yet), call 2 is the transaction.
  etcd_->BeforeCall(2, [this] { etcd_->Put("fp/fences/f", "9 1"); });
  WriteOutcome stale = Submit(Write("f", 7, "k", "seven"));
  EXPECT_EQ(stale.verdict, Verdict::kRejected);
  EXPECT_EQ(stale.current, 9u);
  EXPECT_EQ(causes_, std::vector<std::string>{"fence"});
  EXPECT_EQ(FenceInEtcd("f"), 9u);
  EXPECT_EQ(ValueInEtcd("k"), "");

  // Cached now: the next transaction is the first call.
  etcd_->BeforeCall(1, [this] { etcd_->Put("fp/fences/f", "11 1"); });
  WriteOutcome fresh = Submit(Write("f", 12, "k", "twelve"));
  EXPECT_EQ(fresh.verdict, Verdict::kAccepted);
  EXPECT_EQ(fresh.previous, 11u);
  EXPECT_EQ(causes_, (std::vector<std::string>{"fence", "fence"}));
  EXPECT_EQ(FenceInEtcd("f"), 12u);
  EXPECT_EQ(ValueInEtcd("k"), "12\ntwelve");
}

TEST_F(EtcdFencesTest, LeasesAreGrantedRenewedDeniedAndReleasedThroughHolds) {
  WriteOutcome granted = Submit(Acquire("L", "a", 5000));
  ASSERT_TRUE(granted.lease.has_value());
  EXPECT_EQ(granted.lease->verdict, LeaseVerdict::kGranted);
  EXPECT_EQ(granted.lease->lease.token, 1u);
  EXPECT_EQ(FenceInEtcd("L"), 1u);  // a grant raises the fence with it
  const FakeEtcd::Kv* hold = etcd_->Find("fp/holds/L");
  ASSERT_NE(hold, nullptr);
  EXPECT_NE(hold->lease, 0);  // attached to an etcd lease

  WriteOutcome denied = Submit(Acquire("L", "b", 5000));
  EXPECT_EQ(denied.verdict, Verdict::kRejected);
  EXPECT_EQ(denied.lease->verdict, LeaseVerdict::kDenied);
  EXPECT_GT(denied.lease->expires_in_ms, 0);

  WriteOutcome renewed = Submit(Acquire("L", "a", 5000));
  EXPECT_EQ(renewed.lease->verdict, LeaseVerdict::kRenewed);
  EXPECT_EQ(renewed.lease->lease.token, 1u);

  EXPECT_EQ(Submit(Release("L", "b", 1)).lease->verdict,
            LeaseVerdict::kNotHeld);
  EXPECT_EQ(Submit(Release("L", "a", 1)).lease->verdict,
            LeaseVerdict::kReleased);
  EXPECT_EQ(etcd_->Find("fp/holds/L"), nullptr);
  EXPECT_EQ(etcd_->live_leases(), 0u);  // the hold's etcd lease revoked

  WriteOutcome next = Submit(Acquire("L", "b", 5000));
  EXPECT_EQ(next.lease->verdict, LeaseVerdict::kGranted);
  EXPECT_EQ(next.lease->lease.token, 2u);
  EXPECT_EQ(next.lease->reason, fence::LeaseOutcome::GrantReason::kReleased);
}

// --max-leases counts the holds with the lease's read; a grant past it is
// refused with no transaction and leaves nothing; renewals and acquires of a
// live lease are not grants; a release frees the room at once.
TEST_F(EtcdFencesTest, GrantsPastTheLeaseLimitAreRefusedAndChangeNothing) {
  Open(1);
  WriteOutcome a = Submit(Acquire("A", "h", 5000));
  ASSERT_EQ(a.lease->verdict, LeaseVerdict::kGranted);
  const std::size_t transactions = Transactions();
  WriteOutcome over = Submit(Acquire("B", "h", 5000));
  EXPECT_EQ(over.verdict, Verdict::kRejected);
  EXPECT_EQ(over.lease->verdict, LeaseVerdict::kTooManyLeases);
  EXPECT_EQ(Transactions(), transactions);
  EXPECT_EQ(etcd_->Find("fp/leases/B"), nullptr);
  EXPECT_EQ(FenceInEtcd("B"), std::nullopt);
  EXPECT_EQ(Submit(Acquire("A", "h", 5000)).lease->verdict,
            LeaseVerdict::kRenewed);
  EXPECT_EQ(Submit(Acquire("A", "other", 5000)).lease->verdict,
            LeaseVerdict::kDenied);
  EXPECT_EQ(Submit(Release("A", "h", 1)).lease->verdict,
            LeaseVerdict::kReleased);
  EXPECT_EQ(Submit(Acquire("B", "h", 5000)).lease->verdict,
            LeaseVerdict::kGranted);
}

// Another replica's grant between the count and the commit (a hold created
// since the read) fails the grant's compare: it is read and decided again,
// and refused. Seen failing without the compare: both were granted.
TEST_F(EtcdFencesTest, AGrantElsewhereBetweenCountAndCommitIsSeen) {
  Open(1);
  // The acquire's calls: its read, the etcd lease of its hold, its commit.
  etcd_->BeforeCall(3, [this] {
    etcd_->Put("fp/holds/X", etcd::FormatHold(1, 0, "X", "other"));
  });
  WriteOutcome over = Submit(Acquire("B", "h", 5000));
  EXPECT_EQ(over.lease->verdict, LeaseVerdict::kTooManyLeases);
  EXPECT_EQ(causes_, std::vector<std::string>{"lease-limit"});
  EXPECT_EQ(etcd_->Find("fp/holds/B"), nullptr);
  EXPECT_EQ(etcd_->Find("fp/leases/B"), nullptr);
}

TEST_F(EtcdFencesTest, ALeaseWhoseHoldRanOutGoesToTheNextAndIsCountedOnce) {
  Submit(Acquire("L", "a", 2000));
  etcd_->Advance(std::chrono::seconds(3));  // etcd lets the hold go
  EXPECT_EQ(etcd_->Find("fp/holds/L"), nullptr);

  WriteOutcome next = Submit(Acquire("L", "b", 2000));
  EXPECT_EQ(next.lease->verdict, LeaseVerdict::kGranted);
  EXPECT_EQ(next.lease->lease.token, 2u);
  EXPECT_EQ(next.lease->previous_holder, "a");
  EXPECT_TRUE(next.lease->previous_expired);
  ASSERT_TRUE(next.lease->expired.has_value());  // this grant noticed it
  EXPECT_EQ(next.lease->expired->holder, "a");

  etcd_->Advance(std::chrono::seconds(3));
  Fences::LeaseRead read = Await(fences_->GetLease("L", "L"));
  ASSERT_TRUE(read.entry.has_value());
  EXPECT_FALSE(fence::IsLive(*read.entry, read.now_ns));
  ASSERT_TRUE(read.expired.has_value());  // b's, noticed by this read
  EXPECT_EQ(read.expired->holder, "b");
  Fences::LeaseRead again = Await(fences_->GetLease("L", "L"));
  EXPECT_FALSE(again.expired.has_value());  // once
  EXPECT_TRUE(again.entry->expiry_noticed);
}

// A renewal of a lease this replica knows is one transaction, the
// keep-alive of its hold's etcd lease beside it; when that etcd lease ran
// out between the transaction and the keep-alive (etcd deleted the hold the
// transaction kept), the renewal is not answered as renewed on a hold that
// is gone: it is decided again and gets a hold that lives. Seen failing
// with the keep-alive's answer ignored: renewed, and no hold in etcd.
TEST_F(EtcdFencesTest,
       ARenewalWhoseEtcdLeaseRanOutAfterItsTransactionGetsANewHold) {
  ASSERT_EQ(Submit(Acquire("L", "a", 2000)).lease->verdict,
            LeaseVerdict::kGranted);
  const std::size_t before = etcd_->calls().size();
  WriteOutcome renewed = Submit(Acquire("L", "a", 2000));
  EXPECT_EQ(renewed.lease->verdict, LeaseVerdict::kRenewed);
  ASSERT_EQ(etcd_->calls().size(), before + 2);  // no read first
  EXPECT_EQ(etcd_->calls()[before].path, "/v3/kv/txn");
  EXPECT_EQ(etcd_->calls()[before + 1].path, "/v3/lease/keepalive");

  // The transaction is the next call, the keep-alive the one after.
  etcd_->BeforeCall(2, [this] { etcd_->Advance(std::chrono::seconds(3)); });
  WriteOutcome again = Submit(Acquire("L", "a", 2000));
  ASSERT_TRUE(again.lease.has_value()) << again.error.message();
  EXPECT_EQ(again.lease->lease.token, 1u);  // nobody else took it
  const FakeEtcd::Kv* hold = etcd_->Find("fp/holds/L");
  ASSERT_NE(hold, nullptr) << "answered on a hold etcd deleted";
  EXPECT_EQ(etcd_->live_leases(), 1u);
}

TEST_F(EtcdFencesTest, AGrantAfterTheFenceWentAboveTheHolderTakesANewToken) {
  Submit(Acquire("L", "a", 5000));
  Submit(Write("L", 10));
  WriteOutcome again = Submit(Acquire("L", "a", 5000));
  EXPECT_EQ(again.lease->verdict, LeaseVerdict::kGranted);
  EXPECT_EQ(again.lease->lease.token, 11u);
  EXPECT_EQ(again.lease->reason, fence::LeaseOutcome::GrantReason::kFenceAbove);
  EXPECT_EQ(FenceInEtcd("L"), 11u);
}

TEST_F(EtcdFencesTest, TheScopeRecordIsReadAndWrittenWithACompare) {
  EXPECT_EQ(Await(fences_->RecordedScopes()), fence::ScopeRecord{});
  fence::ScopeRecord record{{"a/", "b/"}, {"old/"}};
  Await(fences_->RecordScopes(record));
  EXPECT_EQ(etcd_->Find("fp/scopes")->value, fence::EncodeScopeRecord(record));
  EXPECT_EQ(Await(fences_->RecordedScopes()), record);

  // Another replica's start wrote other scopes since this one read them.
  etcd_->Put("fp/scopes", fence::EncodeScopeRecord({{"c/"}, {}}));
  EXPECT_THROW(Await(fences_->RecordScopes(record)), std::runtime_error);
  EXPECT_EQ(Await(fences_->RecordedScopes()), (fence::ScopeRecord{{"c/"}, {}}));
}

TEST_F(EtcdFencesTest, ListingsComeInPages) {
  SubmitAll({Write("a", 1), Write("b", 2), Write("c", 3), Write("d/x", 4)});
  Fences::ListRead first = Await(fences_->List("", "", 2));
  ASSERT_EQ(first.list.fences.size(), 2u);
  EXPECT_EQ(first.list.fences[0].name, "a");
  EXPECT_EQ(first.list.next, "b");
  Fences::ListRead rest = Await(fences_->List("", "b", 5));
  ASSERT_EQ(rest.list.fences.size(), 2u);
  EXPECT_EQ(rest.list.fences[1].name, "d/x");
  EXPECT_EQ(rest.list.fences[1].token, 4u);
  EXPECT_EQ(rest.list.next, std::nullopt);
  Fences::ListRead under = Await(fences_->List("d/", "", 5));
  ASSERT_EQ(under.list.fences.size(), 1u);

  Submit(Acquire("l1", "a", 5000));
  Submit(Acquire("l2", "b", 5000));
  Fences::LeaseList leases = Await(fences_->ListLeases("", "", 1));
  ASSERT_EQ(leases.leases.size(), 1u);
  EXPECT_EQ(leases.leases[0].first, "l1");
  EXPECT_TRUE(fence::IsLive(leases.leases[0].second, leases.now_ns));
  EXPECT_EQ(leases.next, "l1");
}

// --- Conditional writes ----------------------------------------------------

TEST_F(EtcdFencesTest, AValuesTagIsItsModRevisionAndChangesOnEveryWrite) {
  FencedWrite put = Write("f", 5, "k", "same");
  put.value->content_type = "text/plain; charset=utf-8";
  WriteOutcome first = Submit(put);
  ASSERT_EQ(first.verdict, Verdict::kAccepted);
  EXPECT_EQ(first.etag,
            std::to_string(etcd_->Find("fp/values/k")->mod_revision));
  EXPECT_EQ(ValueInEtcd("k"), "5 text/plain; charset=utf-8\nsame");
  EtcdFences::ValueRead read = Await(fences_->GetValue("k"));
  EXPECT_EQ(read.etag, first.etag);
  EXPECT_EQ(read.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(read.body, "same");

  // The same body and token again: a new tag.
  WriteOutcome again = Submit(Write("f", 5, "k", "same"));
  EXPECT_NE(again.etag, first.etag);
  read = Await(fences_->GetValue("k"));
  EXPECT_EQ(read.etag, again.etag);
  EXPECT_EQ(read.content_type, "");  // none sent this time
  EXPECT_EQ(ValueInEtcd("k"), "5\nsame");
}

TEST_F(EtcdFencesTest, AValueInThePreviousReleasesFormatStillReads) {
  etcd_->Put("fp/values/old", "7\nwritten before tags");
  etcd_->Put("fp/values/none", "-\n");
  EtcdFences::ValueRead old = Await(fences_->GetValue("old"));
  ASSERT_TRUE(old.found);
  EXPECT_EQ(old.token, 7u);
  EXPECT_EQ(old.body, "written before tags");
  EXPECT_EQ(old.content_type, "");
  EXPECT_EQ(old.etag,
            std::to_string(etcd_->Find("fp/values/old")->mod_revision));
  EtcdFences::ValueRead none = Await(fences_->GetValue("none"));
  ASSERT_TRUE(none.found);
  EXPECT_EQ(none.token, std::nullopt);
  EXPECT_EQ(none.body, "");
  // And its tag is good for If-Match.
  WriteOutcome cas = Submit(IfMatch(Write("old", 7, "old", "new"), {old.etag}));
  EXPECT_EQ(cas.verdict, Verdict::kAccepted);
}

TEST_F(EtcdFencesTest, APreconditionIsCheckedAfterTheTokenAndRefusesWithNoTxn) {
  const std::string tag = Submit(Write("f", 5, "k", "v1")).etag;
  const std::size_t before = Transactions();
  WriteOutcome wrong = Submit(IfMatch(Write("f", 6, "k", "v2"), {"12345"}));
  EXPECT_EQ(wrong.verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(wrong.etag, tag);
  WriteOutcome create = Submit(IfNoneMatchAny(Write("f", 6, "k", "v2")));
  EXPECT_EQ(create.verdict, Verdict::kPreconditionFailed);
  // The token first: a stale one is rejected whatever the precondition.
  WriteOutcome stale = Submit(IfMatch(Write("f", 4, "k", "v2"), {"12345"}));
  EXPECT_EQ(stale.verdict, Verdict::kRejected);
  // Nothing changed: no transaction, the fence and the value as they were.
  EXPECT_EQ(Transactions(), before);
  EXPECT_EQ(FenceInEtcd("f"), 5u);
  EXPECT_EQ(ValueInEtcd("k"), "5\nv1");

  WriteOutcome right = Submit(IfMatch(Write("f", 6, "k", "v2"), {"1", tag}));
  EXPECT_EQ(right.verdict, Verdict::kAccepted);
  EXPECT_FALSE(right.created);
  EXPECT_EQ(FenceInEtcd("f"), 6u);
  WriteOutcome any = Submit(IfMatch(Write("f", 6, "k", "v3"), {"*"}));
  EXPECT_EQ(any.verdict, Verdict::kAccepted);
  EXPECT_EQ(Submit(IfMatch(Delete("f", 6, "k"), {right.etag})).verdict,
            Verdict::kPreconditionFailed);
  EXPECT_EQ(Submit(IfMatch(Delete("f", 6, "k"), {any.etag})).verdict,
            Verdict::kAccepted);
  EXPECT_EQ(Submit(IfMatch(Write("f", 6, "k", "v4"), {"*"})).verdict,
            Verdict::kPreconditionFailed);
  WriteOutcome created = Submit(IfNoneMatchAny(Write("f", 6, "k", "v4")));
  EXPECT_EQ(created.verdict, Verdict::kAccepted);
  EXPECT_TRUE(created.created);
}

// Another replica writes the value (and not the fence: an observed write,
// say) after this one read its tag and before its transaction: the
// value's compare fails, and the write is decided again against it.
TEST_F(EtcdFencesTest, AValueWrittenBetweenReadAndCommitIsDecidedAgain) {
  const std::string tag = Submit(Write("f", 5, "k", "v1")).etag;
  // Call 1 reads the fence and the value, call 2 is the transaction.
  etcd_->BeforeCall(2, [this] { etcd_->Put("fp/values/k", "5\nother"); });
  WriteOutcome lost = Submit(IfMatch(Write("f", 5, "k", "mine"), {tag}));
  EXPECT_EQ(lost.verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(lost.etag,
            std::to_string(etcd_->Find("fp/values/k")->mod_revision));
  EXPECT_EQ(causes_, std::vector<std::string>{"value"});
  EXPECT_EQ(ValueInEtcd("k"), "5\nother");

  // A value created meanwhile fails a create-only write the same way.
  etcd_->BeforeCall(2, [this] { etcd_->Put("fp/values/new", "5\nfirst"); });
  EXPECT_EQ(Submit(IfNoneMatchAny(Write("f", 5, "new", "second"))).verdict,
            Verdict::kPreconditionFailed);
  EXPECT_EQ(ValueInEtcd("new"), "5\nfirst");
  EXPECT_EQ(causes_, (std::vector<std::string>{"value", "value"}));
}

// A replica whose cache has the fence below another replica's write
// answers a stale token with a wrong If-Match 409, not 412: the fence of a
// write with a precondition is read afresh.
TEST_F(EtcdFencesTest, APreconditionWriteIsDecidedOnTheFenceAsItIs) {
  Submit(Write("f", 5, "k", "v1"));  // cached at 5
  etcd_->Put("fp/fences/f", "9 1");
  WriteOutcome stale = Submit(IfMatch(Write("f", 5, "k", "v2"), {"1"}));
  EXPECT_EQ(stale.verdict, Verdict::kRejected);
  EXPECT_EQ(stale.current, 9u);
}

TEST_F(EtcdFencesTest, AWriteSeesTheWritesBeforeItInItsGroup) {
  const std::string tag = Submit(Write("f", 5, "k", "v1")).etag;
  Submit(Write("f", 5, "gone", "x"));
  std::vector<WriteOutcome> out = SubmitAll(
      {IfMatch(Write("f", 5, "k", "a"), {tag}),
       IfMatch(Write("f", 5, "k", "b"), {tag}),  // the tag is a's now
       IfNoneMatchAny(Write("f", 5, "k", "c")),
       IfMatch(Write("f", 5, "k", "d"), {"*"}), Delete("f", 5, "gone"),
       IfMatch(Write("f", 5, "gone", "e"), {"*"}), Write("f", 5, "twice", "1"),
       Write("f", 5, "twice", "2")});
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(Transactions(), 3u);
  EXPECT_EQ(out[0].verdict, Verdict::kAccepted);
  EXPECT_EQ(out[1].verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(out[2].verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(out[3].verdict, Verdict::kAccepted);
  EXPECT_EQ(out[4].verdict, Verdict::kAccepted);
  EXPECT_EQ(out[5].verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(out[5].etag, "");  // no value
  const std::string revision = std::to_string(etcd_->revision());
  // The value is d's; the 412s name its tag, the transaction's revision.
  EXPECT_EQ(ValueInEtcd("k"), "5\nd");
  EXPECT_EQ(out[1].etag, revision);
  EXPECT_EQ(out[2].etag, revision);
  EXPECT_EQ(out[3].etag, revision);
  EXPECT_EQ(out[0].etag, "");  // replaced by d in the same transaction
  EXPECT_EQ(out[6].etag, "");
  EXPECT_EQ(out[7].etag, revision);
  EXPECT_EQ(ValueInEtcd("gone"), "");
}

TEST_F(EtcdFencesTest, ABatchWithAFailingPreconditionAppliesNothing) {
  const std::string tag = Submit(Write("a", 5, "x", "x1")).etag;
  Submit(Write("b", 7));
  const std::size_t before = Transactions();
  fence::Batch failing;
  failing.writes = {Write("a", 5, "y", "y1"),
                    IfMatch(Write("a", 5, "x", "x2"), {"999999"}),
                    Write("c", 5, "z", "z1")};
  WriteOutcome refused = Submit(failing);
  EXPECT_EQ(refused.verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(fence::FirstNotApplied(refused), 1u);
  EXPECT_EQ(refused.batch[1].etag, tag);
  EXPECT_EQ(Transactions(), before);
  EXPECT_EQ(ValueInEtcd("y"), "");
  EXPECT_EQ(FenceInEtcd("c"), std::nullopt);

  // A stale write after the failing precondition is the batch's answer.
  fence::Batch stale = failing;
  stale.writes[2] = Write("b", 5, "z", "z1");
  WriteOutcome rejected = Submit(stale);
  EXPECT_EQ(rejected.verdict, Verdict::kRejected);
  EXPECT_EQ(rejected.batch.size(), 3u);
  EXPECT_EQ(Transactions(), before);

  fence::Batch whole;
  whole.writes = {IfNoneMatchAny(Write("a", 5, "y", "y1")),
                  IfMatch(Write("a", 5, "x", "x2"), {tag})};
  WriteOutcome applied = Submit(whole);
  EXPECT_EQ(applied.verdict, Verdict::kAccepted);
  ASSERT_EQ(applied.batch.size(), 2u);
  const std::string revision = std::to_string(etcd_->revision());
  EXPECT_EQ(applied.batch[0].etag, revision);
  EXPECT_EQ(applied.batch[1].etag, revision);
  EXPECT_EQ(ValueInEtcd("x"), "5\nx2");
}

// The fs: backend reads its file's tag itself: the write carries it, and
// etcd's values are not read.
TEST_F(EtcdFencesTest, AWriteThatCarriesItsValuesStateIsDecidedOnIt) {
  FencedWrite write = IfMatch(Write("f", 5), {"file-tag"});
  write.value_now = fence::ValueNow{true, "other-tag"};
  const std::size_t calls = etcd_->calls().size();
  WriteOutcome refused = Submit(write);
  EXPECT_EQ(refused.verdict, Verdict::kPreconditionFailed);
  EXPECT_EQ(refused.etag, "other-tag");
  write.value_now->tag = "file-tag";
  EXPECT_EQ(Submit(write).verdict, Verdict::kAccepted);
  for (std::size_t i = calls; i < etcd_->calls().size(); ++i) {
    EXPECT_EQ(etcd_->calls()[i].body.find("keys_only"), std::string::npos);
  }
}

}  // namespace
}  // namespace fencepost::storage
