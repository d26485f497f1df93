#include "tests/reliability/cas_load.h"

#include <algorithm>

#include "tests/testing/http_client.h"

namespace fencepost::reliability {

namespace {

std::string KeyOf(int counter) { return "/cas/" + std::to_string(counter); }

}  // namespace

void CasLoad::Start(std::uint16_t data_port) {
  stop_ = false;
  for (int counter = 0; counter < kCounters; ++counter) {
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back(
          [this, data_port, counter] { Run(data_port, counter); });
    }
  }
}

void CasLoad::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void CasLoad::Sent(std::uint64_t id, int counter, std::uint64_t value) {
  std::lock_guard lock(mu_);
  attempts_[id] = Attempt{counter, value, Attempt::Outcome::kUnknown, ""};
}

void CasLoad::Answered(std::uint64_t id, int status, const std::string& etag) {
  std::lock_guard lock(mu_);
  Attempt& a = attempts_[id];
  if (status == 200 || status == 201) {
    if (!acked_values_[a.counter].emplace(a.value, id).second) ++duplicates_;
    a.outcome = Attempt::Outcome::kAcked;
    a.etag = etag;
    highest_acked_[a.counter] = std::max(highest_acked_[a.counter], a.value);
    ++acked_;
  } else if (status == 412) {
    a.outcome = Attempt::Outcome::kRefused;
    ++refused_;
  }
  // Anything else (a 5xx) stays unknown: it may have landed.
}

void CasLoad::Run(std::uint16_t data_port, int counter) {
  try {
    testing::HttpClient client(data_port);
    while (!stop_) {
      const auto read = client.Request("GET", KeyOf(counter));
      testing::Headers headers = {{"Fencing-Token", "1"}};
      std::uint64_t value = 1;
      if (read.status == 200) {
        value = std::stoull(read.body) + 1;
        if (conditional_) headers.emplace_back("If-Match", read.header("etag"));
      } else if (conditional_) {
        headers.emplace_back("If-None-Match", "*");
      }
      const std::uint64_t id = next_id_++;
      Sent(id, counter, value);
      const auto write =
          client.Request("PUT", KeyOf(counter), headers,
                         std::to_string(value) + " " + std::to_string(id));
      Answered(id, write.status, write.header("etag"));
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    disconnects_.push_back({SteadyNs(std::chrono::steady_clock::now()),
                            data_port, e.what(), std::nullopt});
  }
}

std::pair<std::string, std::string> CasLoad::RefusedWrite() {
  std::lock_guard lock(mu_);
  for (const auto& [id, a] : attempts_) {
    if (a.outcome == Attempt::Outcome::kRefused) {
      return {KeyOf(a.counter),
              std::to_string(a.value) + " " + std::to_string(id)};
    }
  }
  return {};
}

std::pair<std::string, std::string> CasLoad::LostIncrement() {
  std::lock_guard lock(mu_);
  for (const auto& [id, a] : attempts_) {
    if (a.outcome == Attempt::Outcome::kAcked &&
        a.value + 1 == highest_acked_[a.counter]) {
      return {KeyOf(a.counter),
              std::to_string(a.value) + " " + std::to_string(id)};
    }
  }
  return {};
}

std::vector<std::string> CasLoad::Check(std::uint16_t data_port) {
  using Outcome = Attempt::Outcome;
  std::vector<std::string> violations;
  std::lock_guard lock(mu_);
  if (duplicates_ > 0) {
    violations.push_back(std::to_string(duplicates_) +
                         " increments were acknowledged with a value another "
                         "was acknowledged with: lost updates");
  }
  for (int counter = 0; counter < kCounters; ++counter) {
    const std::string key = KeyOf(counter);
    const auto read = testing::Fetch(data_port, "GET", key);
    const std::uint64_t floor = highest_acked_[counter];
    std::uint64_t landed = 0;  // the attempt whose body is there
    if (read.status == 200) {
      const std::size_t space = read.body.find(' ');
      const std::uint64_t value = std::stoull(read.body);
      landed = std::stoull(read.body.substr(space + 1));
      auto it = attempts_.find(landed);
      if (it == attempts_.end() || it->second.counter != counter ||
          it->second.value != value) {
        violations.push_back(key + " holds a body never sent: " + read.body);
      } else if (it->second.outcome == Outcome::kRefused) {
        violations.push_back(key + " holds a write answered 412: " + read.body);
      } else if (it->second.outcome == Outcome::kNotLanded) {
        violations.push_back(key +
                             " holds an unanswered write that had not "
                             "landed at an earlier restart: " +
                             read.body);
      } else if (it->second.outcome == Outcome::kAcked &&
                 read.header("etag") != it->second.etag) {
        violations.push_back(key + ": its ETag " + read.header("etag") +
                             " is not the one its write was answered with, " +
                             it->second.etag);
      }
      if (value < floor) {
        violations.push_back(key + " lost acknowledged increments: it is " +
                             std::to_string(value) + ", " +
                             std::to_string(floor) + " was acknowledged");
      }
    } else if (floor > 0) {
      violations.push_back(key + " is gone (" + std::to_string(read.status) +
                           ") after " + std::to_string(floor) +
                           " acknowledged increments");
    }
    // What did not land by this restart never lands later; what did is
    // the floor from now on.
    for (auto& [id, a] : attempts_) {
      if (a.counter != counter || a.outcome != Outcome::kUnknown) continue;
      if (id == landed) {
        if (!acked_values_[counter].emplace(a.value, id).second) {
          ++duplicates_;
        }
        a.outcome = Outcome::kAcked;
        a.etag = read.header("etag");
        highest_acked_[counter] = std::max(highest_acked_[counter], a.value);
      } else {
        a.outcome = Outcome::kNotLanded;
      }
    }
  }
  return violations;
}

}  // namespace fencepost::reliability
