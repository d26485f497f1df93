// fencepost_test_switches: the server with the test-only switches of
// proxy/test_switches.h, read from FENCEPOST_TEST_* variables. Never
// installed.

#include <cstdlib>
#include <string>
#include <string_view>

#include "proxy/entry.h"

namespace {

bool On(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string_view(value) == "1";
}

}  // namespace

int main(int argc, char** argv) {
  fencepost::proxy::TestSwitches test;
  if (const char* n = std::getenv("FENCEPOST_TEST_MAX_QUEUE_WRITES")) {
    test.max_queue_writes = std::stoul(n);
  }
  if (const char* n = std::getenv("FENCEPOST_TEST_SEGMENT_BYTES")) {
    test.segment_bytes = std::stoul(n);
  }
  if (const char* n = std::getenv("FENCEPOST_TEST_MAX_UNAPPLIED_BYTES")) {
    test.max_unapplied_bytes = std::stoul(n);
  }
  test.checkpoint_without_sync = On("FENCEPOST_TEST_CHECKPOINT_WITHOUT_SYNC");
  test.answer_before_sync = On("FENCEPOST_TEST_ANSWER_BEFORE_SYNC");
  test.one_fs_thread = On("FENCEPOST_TEST_FS_THREADS");
  test.disable_upstream_gate = On("FENCEPOST_TEST_DISABLE_UPSTREAM_GATE");
  return fencepost::proxy::Main(argc, argv, test);
}
