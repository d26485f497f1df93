// The embedded backend's value records (fence/values.h) in each format a
// data directory may hold: what a read finds in them.

#include "fence/values.h"

#include <gtest/gtest.h>
#include <lmdb.h>

#include <optional>
#include <string>

#include "fence/env.h"
#include "fence/long_keys.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::fence {
namespace {

// A format-1 record (the release before entity tags), as it wrote them:
// flags (bit 0: a token follows), the token, the stored name's length (0
// for a short key), the body. Without a token, its eight bytes are zero.
std::string Format1(std::optional<Token> token, std::string_view body) {
  std::string record(11, '\0');
  record[0] = token ? 1 : 0;
  const Token t = token.value_or(0);
  for (int i = 0; i < 8; ++i) {
    record[1 + i] = static_cast<char>(t >> (8 * (7 - i)));
  }
  record += body;
  return record;
}

class ValuesTest : public ::testing::Test {
 protected:
  // Runs `fn(txn)` in a write transaction and commits it.
  template <typename Fn>
  void Write(Fn fn) {
    MDB_txn* txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env_.raw(), nullptr, 0, &txn), 0);
    fn(txn);
    ASSERT_EQ(mdb_txn_commit(txn), 0);
  }
  void PutRaw(std::string_view key, const std::string& record) {
    Write([&](MDB_txn* txn) {
      MDB_val k = Val(key);
      MDB_val v = Val(record);
      ASSERT_EQ(mdb_put(txn, env_.values(), &k, &v, 0), 0);
    });
  }
  // What a read of `key` finds, with the body copied out.
  struct Found {
    bool found = false;
    std::optional<Token> token;
    std::uint64_t seq = 0;
    std::string body;
  };
  Found Read(std::string_view key) {
    Env::ReadTxn txn(env_);
    StoredValue value;
    EXPECT_EQ(ReadValue(txn.get(), env_.values(), key, &value), 0);
    return {value.found, value.token, value.seq, std::string(value.body)};
  }

  testing::TempDir dir_;
  Env env_{Env::Options{dir_.path(), 64u << 20}};
};

// A value stored without a token (observe mode, before or after entity
// tags) has none: a read must not make one up from the zero bytes where a
// token would be (GET would answer Fencing-Token: 0).
TEST_F(ValuesTest, AValueWithoutATokenHasNone) {
  PutRaw("old/none", Format1(std::nullopt, "legacy"));
  PutRaw("old/five", Format1(5, "fenced"));
  Write([this](MDB_txn* txn) {
    ASSERT_EQ(PutValue(txn, env_.values(), "new/none", "now", std::nullopt, 7),
              0);
    ASSERT_EQ(PutValue(txn, env_.values(), "new/zero", "zero", Token{0}, 8), 0);
  });

  const Found old_none = Read("old/none");
  EXPECT_TRUE(old_none.found);
  EXPECT_EQ(old_none.token, std::nullopt);
  EXPECT_EQ(old_none.seq, 0u) << "format 1 has no tag of its own";
  EXPECT_EQ(old_none.body, "legacy");
  const Found old_five = Read("old/five");
  EXPECT_EQ(old_five.token, Token{5});
  EXPECT_EQ(old_five.body, "fenced");

  const Found new_none = Read("new/none");
  EXPECT_EQ(new_none.token, std::nullopt);
  EXPECT_EQ(new_none.seq, 7u);
  EXPECT_EQ(new_none.body, "now");
  EXPECT_EQ(Read("new/zero").token, Token{0}) << "token 0 is a token";
  EXPECT_FALSE(Read("absent").found);
}

}  // namespace
}  // namespace fencepost::fence
