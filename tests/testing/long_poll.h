#pragma once

// A long poll of GET /v1/fences/KEY?wait_above=N for the tests, on a thread
// of its own, known to be waiting before the test goes on: the server counts
// it in fencepost_watchers. Header-only.

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>

#include "tests/testing/exposition.h"
#include "tests/testing/http_client.h"

namespace fencepost::testing {

class LongPoll {
 public:
  // Polls `key`'s fence above `above` for at most `timeout_ms`; returns once
  // the server counts `watchers` watchers (this poll among them), or after
  // 10 s. The default outlasts the test client's 10 s wait for an answer,
  // so a poll that no change woke has none (status 0): at its own timeout
  // the server would answer the fence as it stands, above `above` or not.
  LongPoll(std::uint16_t admin, const std::string& key, std::uint64_t above,
           int watchers, int timeout_ms = 60000) {
    const std::string target = "/v1/fences/" + key +
                               "?wait_above=" + std::to_string(above) +
                               "&timeout_ms=" + std::to_string(timeout_ms);
    thread_ = std::thread([this, admin, target] {
      try {
        answer_ = Fetch(admin, "GET", target);
      } catch (const std::exception&) {
        // No answer at all: status 0 tells.
      }
    });
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (MetricValue(Fetch(admin, "GET", "/metrics").body,
                       "fencepost_watchers") < watchers &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~LongPoll() {
    if (thread_.joinable()) thread_.join();
  }
  LongPoll(const LongPoll&) = delete;
  LongPoll& operator=(const LongPoll&) = delete;

  // The poll's answer, once it came: 200 without Fencepost-Watch when the
  // fence went above `above`; status 0 when none came within 10 s.
  HttpResponse Answer() {
    if (thread_.joinable()) thread_.join();
    return answer_;
  }

 private:
  std::thread thread_;
  HttpResponse answer_;
};

}  // namespace fencepost::testing
