#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/reliability/load.h"

namespace fencepost::reliability {

// Conditional writes under the crash loop: two threads per counter read it
// (GET, its ETag), add one and write it back with If-Match (If-None-Match:
// * to create it), again after a 412. Each write's body is "VALUE ID", ID
// unique to the attempt. After a restart (Check): the value holds the
// highest acknowledged increment or one unanswered after it, never less
// (an acknowledged conditional write is never lost); it is the body of an
// acknowledged or unanswered attempt, never of a refused one (a refused
// write never lands), with the ETag its answer gave; and an unanswered
// attempt that had not landed by the restart never appears later.
class CasLoad {
 public:
  static constexpr int kCounters = 2;
  // `conditional` false: the same load without If-Match (the negative
  // control of the check's lost-update rule).
  explicit CasLoad(bool conditional = true) : conditional_(conditional) {}
  ~CasLoad() { Stop(); }
  void Start(std::uint16_t data_port);
  void Stop();
  std::size_t acknowledged() const { return acked_; }
  std::size_t refused() const { return refused_; }
  // Increments acknowledged with a value another was acknowledged with:
  // two writers each told their increment landed, one of them lost.
  std::size_t duplicates() const { return duplicates_; }
  const std::vector<Disconnect>& disconnects() const { return disconnects_; }
  std::vector<std::string> Check(std::uint16_t data_port);
  // For the check's negative controls: the key and body of a write that
  // was refused, and of the highest acknowledged one less one increment.
  std::pair<std::string, std::string> RefusedWrite();
  std::pair<std::string, std::string> LostIncrement();

 private:
  struct Attempt {
    int counter = 0;
    std::uint64_t value = 0;
    enum class Outcome {
      kUnknown,
      kAcked,
      kRefused,
      kNotLanded
    } outcome = Outcome::kUnknown;
    std::string etag;  // the answer's, when acknowledged
  };
  void Run(std::uint16_t data_port, int counter);
  // Records attempt `id` before it is sent, then its answer.
  void Sent(std::uint64_t id, int counter, std::uint64_t value);
  void Answered(std::uint64_t id, int status, const std::string& etag);

  const bool conditional_;
  std::atomic<bool> stop_ = false;
  std::atomic<std::size_t> duplicates_ = 0;
  std::map<int, std::map<std::uint64_t, std::uint64_t>> acked_values_;
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::size_t> acked_ = 0, refused_ = 0;
  std::mutex mu_;
  std::map<std::uint64_t, Attempt> attempts_;
  std::map<int, std::uint64_t> highest_acked_;  // by counter
  std::vector<Disconnect> disconnects_;
  std::vector<std::thread> threads_;
};

}  // namespace fencepost::reliability
