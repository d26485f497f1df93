#include "client/fencepost_leases.h"

#include <memory>
#include <stdexcept>
#include <utility>

#include "client/documents.h"

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Outcome = LeaseAttempt::Outcome;

// The server's bounds on ttl_ms.
constexpr milliseconds kMinTtl{100};
constexpr milliseconds kMaxTtl{3600000};

LeaseSpec Checked(LeaseSpec spec) {
  if (spec.name.empty()) throw std::invalid_argument("the lease needs a name");
  if (spec.ttl < kMinTtl || spec.ttl > kMaxTtl) {
    throw std::invalid_argument("the lease TTL must be from 100ms to 1h");
  }
  return spec;
}

// "HTTP 503: <the problem's detail>", or the transport error.
std::string Describe(const Result& result) {
  if (!result.ok()) return result.detail;
  std::string out = "HTTP " + std::to_string(result.response.status);
  if (const auto problem = ParseProblem(result.response.body);
      problem && !problem->detail.empty()) {
    out += ": " + problem->detail;
  }
  return out;
}

// GET /v1/fences/{name}?wait_above=TOKEN: answered as soon as the fence is
// above the token; after timeout_ms with Fencepost-Watch: timeout.
class FencepostFenceWatch final : public FenceWatch {
 public:
  FencepostFenceWatch(Client::Options admin, std::string name,
                      std::uint64_t token)
      : client_(std::move(admin)), name_(std::move(name)), token_(token) {}

  Outcome Wait(milliseconds max_wait, std::string* detail) override {
    // The request's own deadline is past the server's wait.
    client_.set_timeout(max_wait + milliseconds(10000));
    const Result result = client_.Send(
        "GET", "/v1/fences/" + EncodeKey(name_) +
                   "?wait_above=" + std::to_string(token_) +
                   "&timeout_ms=" + std::to_string(max_wait.count()));
    if (!result.ok()) {
      *detail = result.detail;
      return Outcome::kFailed;
    }
    const Response& r = result.response;
    if (!r.header("fencepost-watch").empty()) return Outcome::kTimedOut;
    if (r.status == 200) {
      const std::optional<Fence> fence = ParseFence(r.body);
      // The lease's fence may be a scope's: name the fence that moved.
      const std::string fence_name =
          fence && !fence->name.empty() && fence->name != name_
              ? fence->name + " (of the lease " + name_ + ")"
              : name_;
      *detail = "the fence " + fence_name + " went above token " +
                std::to_string(token_) +
                (fence ? " (to " + std::to_string(fence->token) + ")" : "") +
                ": another holder was granted the lease, or the fence was "
                "bumped";
      return Outcome::kAbove;
    }
    *detail = "HTTP " + std::to_string(r.status);
    return Outcome::kFailed;
  }

 private:
  Client client_;
  const std::string name_;
  const std::uint64_t token_;
};

}  // namespace

FencepostLeases::FencepostLeases(Client::Options admin, LeaseSpec spec)
    : spec_(Checked(std::move(spec))),
      admin_(admin),
      client_(std::move(admin)) {}

std::unique_ptr<FenceWatch> FencepostLeases::WatchFence(
    std::uint64_t token) const {
  return std::make_unique<FencepostFenceWatch>(admin_, spec_.name, token);
}

std::string FencepostLeases::Describe() const {
  return "fencepost " + client_.url().ToString();
}

LeaseAttempt FencepostLeases::Put(std::uint64_t token, milliseconds timeout) {
  client_.set_timeout(timeout);
  const Clock::time_point sent = Clock::now();
  const Result result =
      client_.AcquireLease(spec_.name, spec_.holder, spec_.ttl);
  const int status = result.ok() ? result.response.status : 0;
  LeaseAttempt out;
  if (status == 200) {
    const std::optional<Lease> lease = ParseLease(result.response.body);
    if (!lease) return LeaseAttempt::Failed("unreadable lease document", true);
    if (lease->holder != spec_.holder) {
      out.outcome = Outcome::kRefused;
      out.holder = lease->holder.value_or("");
      out.detail = "answered with holder " + lease->holder.value_or("null");
      return out;
    }
    if (token != 0 && lease->token != token) {
      out.outcome = Outcome::kRefused;
      out.detail = "the renewal was answered with token " +
                   std::to_string(lease->token) + " instead of " +
                   std::to_string(token);
      return out;
    }
    out.outcome = Outcome::kHeld;
    out.token = lease->token;
    out.sent_at = sent;
    out.ttl = spec_.ttl;
    return out;
  }
  if (status == 409) {
    const std::optional<Problem> problem = ParseProblem(result.response.body);
    out.outcome = Outcome::kRefused;
    out.holder = problem && problem->holder ? *problem->holder : "";
    out.detail = std::string(token == 0 ? "held" : "the renewal was refused") +
                 (out.holder.empty() ? "" : " (held by " + out.holder + ")");
    return out;
  }
  // Any other 4xx but 408 and 429 is an answer that will not change.
  const bool final_answer =
      status >= 400 && status < 500 && status != 408 && status != 429;
  if (final_answer && token != 0) {
    out.outcome = Outcome::kRefused;
    out.detail = "the renewal was refused with " + client::Describe(result);
    return out;
  }
  return LeaseAttempt::Failed(client::Describe(result), !final_answer);
}

LeaseAttempt FencepostLeases::Acquire(milliseconds timeout) {
  return Put(0, timeout);
}

LeaseAttempt FencepostLeases::Renew(std::uint64_t token, milliseconds timeout) {
  return Put(token, timeout);
}

std::string FencepostLeases::Release(std::uint64_t token,
                                     milliseconds timeout) {
  client_.set_timeout(timeout);
  const Result result = client_.ReleaseLease(spec_.name, spec_.holder, token);
  if (result.ok() && result.response.status == 204) return "";
  return client::Describe(result);
}

}  // namespace fencepost::client
