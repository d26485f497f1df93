#include "fence/effect.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "fence/key.h"

namespace fencepost::fence {
namespace {

using State = EffectRecord::State;

EffectRecord Answered() {
  EffectRecord record;
  record.state = State::kDone;
  record.fence = "orders/leader";
  record.token = 18446744073709551615ull;
  record.request_hash = std::string(64, 'a');
  record.created_at_ns = 1765000000000000000;
  record.deadline_ns = 1765000012000000000;
  record.status = 201;
  record.content_type = "application/json";
  record.body = std::string("{\"id\":\"ch_1\"}\0tail", 18);
  return record;
}

TEST(EffectRecordTest, RoundTripsEveryField) {
  const EffectRecord record = Answered();
  EffectRecord back;
  ASSERT_TRUE(DecodeEffect(EncodeEffect(record), &back));
  EXPECT_EQ(back.state, State::kDone);
  EXPECT_EQ(back.fence, record.fence);
  EXPECT_EQ(back.token, record.token);
  EXPECT_EQ(back.request_hash, record.request_hash);
  EXPECT_EQ(back.created_at_ns, record.created_at_ns);
  EXPECT_EQ(back.deadline_ns, record.deadline_ns);
  EXPECT_EQ(back.status, 201);
  EXPECT_EQ(back.content_type, record.content_type);
  EXPECT_EQ(back.body, record.body);
}

TEST(EffectRecordTest, RefusesBytesItDidNotWrite) {
  const std::string good = EncodeEffect(Answered());
  EffectRecord back;
  EXPECT_FALSE(DecodeEffect("", &back));
  EXPECT_FALSE(DecodeEffect(good.substr(0, 20), &back));
  std::string other_version = good;
  other_version[0] = 2;
  EXPECT_FALSE(DecodeEffect(other_version, &back));
  std::string bad_state = good;
  bad_state[1] = 'x';
  EXPECT_FALSE(DecodeEffect(bad_state, &back));
  // Lengths that run past the end.
  std::string cut = good.substr(0, 34 + 5);
  EXPECT_FALSE(DecodeEffect(cut, &back));
}

TEST(EffectRuleTest, SentOnceAndReplayedToTheSameRequest) {
  const std::string hash(64, 'a');
  const std::int64_t now = 1765000000000000000;
  EXPECT_EQ(DecideEffect(nullptr, hash, false, now), EffectVerdict::kSend);
  EffectRecord record = Answered();
  EXPECT_EQ(DecideEffect(&record, hash, false, now), EffectVerdict::kReplay);
  EXPECT_EQ(DecideEffect(&record, std::string(64, 'b'), false, now),
            EffectVerdict::kKeyReused);
  record.state = State::kInFlight;
  record.deadline_ns = now + 1;
  EXPECT_EQ(DecideEffect(&record, hash, true, now + 5),
            EffectVerdict::kInProgress);
  EXPECT_EQ(DecideEffect(&record, hash, false, now), EffectVerdict::kInProgress)
      << "another replica's call, before its deadline: maybe on its way";
  EXPECT_EQ(DecideEffect(&record, hash, false, now + 1),
            EffectVerdict::kOutcomeUnknown)
      << "left in flight by a process that stopped: it may have been sent";
  record.state = State::kUnknown;
  EXPECT_EQ(DecideEffect(&record, hash, false, 0),
            EffectVerdict::kOutcomeUnknown);
  record.state = State::kNotSent;
  EXPECT_EQ(DecideEffect(&record, hash, false, now), EffectVerdict::kSend);
  EXPECT_EQ(DecideEffect(&record, std::string(64, 'b'), false, now),
            EffectVerdict::kKeyReused);
}

TEST(EffectRuleTest, IdempotencyKeysAreVisibleAscii) {
  EXPECT_TRUE(IsIdempotencyKey("a"));
  EXPECT_TRUE(IsIdempotencyKey("charge-2026-12-07/42~!"));
  EXPECT_TRUE(IsIdempotencyKey(std::string(255, 'k')));
  EXPECT_FALSE(IsIdempotencyKey(""));
  EXPECT_FALSE(IsIdempotencyKey(std::string(256, 'k')));
  EXPECT_FALSE(IsIdempotencyKey("has space"));
  EXPECT_FALSE(IsIdempotencyKey("tab\t"));
  EXPECT_FALSE(IsIdempotencyKey("\x7f"));
  EXPECT_FALSE(IsIdempotencyKey("caf\xc3\xa9"));
}

TEST(EffectRuleTest, RecordKeysAreNoDataPortKeyAndRoundTrip) {
  const std::string key = EffectRecordKey("pay", "charge/42");
  EXPECT_EQ(key, "//effects/pay/charge/42");
  EXPECT_NE(ValidateKey(key), KeyError::kOk)
      << "a data port request must never name a record";
  std::string target, id;
  ASSERT_TRUE(ParseEffectRecordKey(key, &target, &id));
  EXPECT_EQ(target, "pay");
  EXPECT_EQ(id, "charge/42");
  EXPECT_FALSE(ParseEffectRecordKey("effects/pay/x", &target, &id));
  EXPECT_FALSE(ParseEffectRecordKey("//effects/pay", &target, &id));
  EXPECT_TRUE(IsEffectTargetName("pay-v2.eu_1"));
  EXPECT_FALSE(IsEffectTargetName("pay/x"));
  EXPECT_FALSE(IsEffectTargetName(""));
  EXPECT_FALSE(IsEffectTargetName(std::string(65, 'a')));
}

TEST(EffectRuleTest, TheRequestTextTellsEveryPartApart) {
  EXPECT_NE(EffectRequestText("POST", "f", "/a", "", "b"),
            EffectRequestText("POST", "f", "/ab", "", ""));
  EXPECT_NE(EffectRequestText("POST", "f", "", "q", ""),
            EffectRequestText("POST", "f", "", "", "q"));
  EXPECT_NE(EffectRequestText("POST", "f", "", "", ""),
            EffectRequestText("PUT", "f", "", "", ""));
  EXPECT_NE(EffectRequestText("POST", "f1", "", "", ""),
            EffectRequestText("POST", "f2", "", "", ""));
}

TEST(EffectRuleTest, ARecordLeftInFlightPastItsDeadlineIsUnknown) {
  EffectRecord record = Answered();
  record.state = State::kInFlight;
  const std::int64_t deadline = record.deadline_ns;
  EXPECT_EQ(EffectStateName(record, true, deadline + 1), "in-flight");
  EXPECT_EQ(EffectStateName(record, false, deadline - 1), "in-flight");
  EXPECT_EQ(EffectStateName(record, false, deadline), "unknown");
  EXPECT_TRUE(InProgress(record, false, deadline - 1));
  EXPECT_FALSE(InProgress(record, false, deadline));
  record.state = State::kDone;
  EXPECT_EQ(EffectStateName(record, false, 0), "done");
  EXPECT_FALSE(InProgress(record, true, 0));
  record.state = State::kNotSent;
  EXPECT_EQ(EffectStateName(record, false, 0), "not-sent");
  record.state = State::kUnknown;
  EXPECT_EQ(EffectStateName(record, true, 0), "unknown");
}

TEST(EffectRuleTest, ACallStaysUnderItsTargetsPath) {
  EXPECT_TRUE(StaysUnderTarget(""));
  EXPECT_TRUE(StaysUnderTarget("/charges"));
  EXPECT_TRUE(StaysUnderTarget("/a/b.c/..d/%2e%2e%2e"));
  EXPECT_TRUE(StaysUnderTarget("/"));
  EXPECT_FALSE(StaysUnderTarget("/../admin"));
  EXPECT_FALSE(StaysUnderTarget("/a/.."));
  EXPECT_FALSE(StaysUnderTarget("/./a"));
  EXPECT_FALSE(StaysUnderTarget("/%2e%2E/admin"));
  EXPECT_FALSE(StaysUnderTarget("/.%2E"));
  EXPECT_FALSE(StaysUnderTarget("/a%zz"));
  EXPECT_FALSE(StaysUnderTarget("charges"));
  // However the target reads the path: path parameters, encoded slashes,
  // empty segments (a "//host" authority on a target without a path).
  EXPECT_TRUE(StaysUnderTarget("/charges/"));
  EXPECT_TRUE(StaysUnderTarget("/a;v=1/b"));
  EXPECT_FALSE(StaysUnderTarget("/..;/admin"));
  EXPECT_FALSE(StaysUnderTarget("/.;x/admin"));
  EXPECT_FALSE(StaysUnderTarget("/%2e%2e%2fadmin"));
  EXPECT_FALSE(StaysUnderTarget("/a/%2e%2e%2f%2e%2e%2fadmin"));
  EXPECT_FALSE(StaysUnderTarget("/%2fadmin"));
  EXPECT_FALSE(StaysUnderTarget("/a%5c..%5cadmin"));
  EXPECT_FALSE(StaysUnderTarget("//evil.example/x"));
  EXPECT_FALSE(StaysUnderTarget("/a//b"));
}

}  // namespace
}  // namespace fencepost::fence
