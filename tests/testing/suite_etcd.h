#pragma once

// One etcd (FENCEPOST_ETCD_SH, on 127.0.0.1) for a whole gtest suite:
// started before its first test and stopped after its last, each test
// working under a prefix of its own. A fixture derives from SuiteEtcd and
// reads url_ (etcd://HOST:PORT); a test fails at once when etcd did not
// start.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/coordination/shell.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::testing {

class SuiteEtcd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    url_ = ShellLine(std::string(FENCEPOST_ETCD_SH) + " start " +
                     (*dir_ / "etcd"));
  }
  static void TearDownTestSuite() {
    Shell(std::string(FENCEPOST_ETCD_SH) + " stop " + (*dir_ / "etcd"));
    dir_.reset();
    url_.clear();
  }
  void SetUp() override { ASSERT_FALSE(url_.empty()) << "etcd did not start"; }

  inline static std::string url_;

 private:
  inline static std::unique_ptr<TempDir> dir_;
};

}  // namespace fencepost::testing
