#include "cli/probe.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cli/requests.h"

namespace fencepost::cli {

using client::Client;
using client::Headers;
using client::Result;

namespace {

// Every request of a probe ends within this, and its answer is read only
// up to kMaxBody: the probe's values are a few bytes, and an error page
// longer than this says nothing more.
constexpr std::chrono::milliseconds kTimeout{10000};
constexpr std::size_t kMaxBody = std::size_t{1} << 20;

// 16 random hex digits.
std::string RandomHex() {
  thread_local std::mt19937_64 random(std::random_device{}());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(random()));
  return text;
}

// URL split into what the client connects to and the path keys go below.
struct Target {
  std::string base;  // scheme://host[:port]
  std::string path;  // "" or "/BASE" without a trailing '/'
};

Target SplitUrl(const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    throw UsageError("URL must be http://HOST[:PORT][/BASE] or https://...");
  }
  const auto slash = url.find('/', url.find("://") + 3);
  Target t{url.substr(0, slash), ""};
  if (slash != std::string::npos) t.path = url.substr(slash);
  for (const char c : t.path) {
    if (c == '?' || c == '#') {
      throw UsageError("URL must not have a query or fragment");
    }
    if (static_cast<unsigned char>(c) <= ' ' || c == '\x7f') {
      throw UsageError(
          "URL's path must be percent-encoded (no spaces or "
          "control characters)");
    }
  }
  while (!t.path.empty() && t.path.back() == '/') t.path.pop_back();
  return t;
}

// One probe: a client, the scratch key's target and the write headers.
class Prober {
 public:
  Prober(Client client, std::string target, Headers write_headers)
      : client_(std::move(client)),
        target_(std::move(target)),
        write_headers_(std::move(write_headers)) {}

  const std::string& target() const { return target_; }
  Result Write(const std::string& method, Headers extra, std::string body) {
    Headers headers = write_headers_;
    headers.insert(headers.end(), extra.begin(), extra.end());
    return client_.Send(method, target_, headers, std::move(body));
  }
  Result Read() { return client_.Send("GET", target_); }

 private:
  Client client_;
  std::string target_;
  Headers write_headers_;
};

// No answer, or a 5xx: the store cannot say anything about preconditions.
bool Unreachable(const Result& r) {
  return !r.ok() || r.response.status >= 500;
}

bool Accepted(const Result& r) {
  return r.ok() && r.response.status / 100 == 2;
}

// What a GET found of the scratch value that held `original`.
std::string ValueState(const Result& read, const std::string& original) {
  const int status = read.response.status;
  if (status == 200) {
    return read.response.body == original ? "value unchanged"
                                          : "value overwritten";
  }
  if (status == 404 || status == 410) return "value deleted";
  return "value unreadable: GET answered HTTP " + std::to_string(status);
}

struct Check {
  const char* what;
  std::string method;
  Headers headers;
  std::string body;
};

enum class Outcome {
  kHolds,
  kDoesNotHold,
  kNotProbed,    // the value did not read back as it was written
  kUnavailable,  // no answer, or a 5xx
};

// Runs `check`, prints its verdict and, when the value changed, writes it
// again for the next check; sets `stuck` when it cannot (the check did not
// hold, and the next ones would start from another value).
Outcome RunCheck(Prober& prober, const Check& check,
                 const std::string& original, bool& stuck) {
  const Result answer = prober.Write(check.method, check.headers, check.body);
  const Result after = prober.Read();
  if (Unreachable(answer) || Unreachable(after)) {
    std::cout << check.what << ": no verdict ("
              << Explain(Unreachable(answer) ? answer : after) << ")\n";
    return Outcome::kUnavailable;
  }
  const std::string state = ValueState(after, original);
  const int status = answer.response.status;
  const bool unchanged = state == "value unchanged";
  const bool holds = status == 412 && unchanged;
  std::cout << check.what << ": " << (holds ? "holds" : "DOES NOT HOLD")
            << " (HTTP " << status << ", " << state << ")\n";
  if (!unchanged) {
    const Result again = prober.Write("PUT", {}, original);
    if (!Accepted(again)) {
      std::cout << "the scratch value could not be written again ("
                << Explain(again) << "): the checks after this one were "
                << "not run\n";
      if (Unreachable(again)) return Outcome::kUnavailable;
      stuck = true;
    }
  }
  return holds ? Outcome::kHolds : Outcome::kDoesNotHold;
}

// Reads the value back and prints whether the store answers an ETag; then
// runs the three checks while the store lets them run.
Outcome RunChecks(Prober& prober, const std::string& original) {
  const Result read = prober.Read();
  if (Unreachable(read)) {
    std::cout << "reading the scratch value back failed (" << Explain(read)
              << ")\n";
    return Outcome::kUnavailable;
  }
  if (read.response.status != 200 || read.response.body != original) {
    std::cout << "the store did not give back the value it stored ("
              << ValueState(read, original) << ")\n";
    return Outcome::kNotProbed;
  }
  const std::string etag = read.response.header("etag");
  std::cout << "scratch key " << prober.target() << " written; "
            << (etag.empty() ? "the store answered no ETag on GET"
                             : "the store's ETag on GET: " + etag)
            << "\n";
  std::string wrong;
  do {
    wrong = "\"fencepost-probe-wrong-" + RandomHex() + "\"";
  } while (wrong == etag);
  const std::vector<Check> checks = {
      {"PUT with a wrong If-Match", "PUT", {{"If-Match", wrong}}, "changed"},
      {"PUT with If-None-Match: * over a value",
       "PUT",
       {{"If-None-Match", "*"}},
       "changed"},
      {"DELETE with a wrong If-Match", "DELETE", {{"If-Match", wrong}}, ""}};
  Outcome outcome = Outcome::kHolds;
  bool stuck = false;
  for (const Check& check : checks) {
    const Outcome one = RunCheck(prober, check, original, stuck);
    if (one == Outcome::kUnavailable) return one;
    if (one != Outcome::kHolds) outcome = one;
    if (stuck) break;
  }
  return outcome;
}

// The verdict line for a probe of `url` that ran to `outcome`.
void PrintVerdict(const std::string& url, Outcome outcome) {
  switch (outcome) {
    case Outcome::kHolds:
      std::cout << "verdict: " << url
                << " honours If-Match and If-None-Match\n";
      break;
    case Outcome::kDoesNotHold:
      std::cout << "verdict: " << url
                << " does NOT honour If-Match and If-None-Match: a "
                   "compare-and-set through it can lose updates\n";
      break;
    case Outcome::kNotProbed:
      std::cout << "verdict: " << url
                << " could not be probed: it does not read back what it "
                   "stores\n";
      break;
    case Outcome::kUnavailable:
      std::cerr << "fencepost: probe: " << url
                << " stopped answering or failed (5xx): no verdict\n";
      break;
  }
}

// Why the first write was refused, with what to do about the usual causes.
std::string FirstWriteHint(const Result& first, const Flags& flags) {
  if (!first.ok()) return "";
  const int status = first.response.status;
  if (status == 428 && !flags.token) {
    return " (a fencepost data port needs a fencing token: --token N)";
  }
  if ((status == 401 || status == 403) && flags.auth_token_file.empty()) {
    return " (a store that needs a bearer token: --auth-token-file FILE)";
  }
  return "";
}

}  // namespace

int Probe(const Flags& flags) {
  const std::string url = flags.positional.at(0);
  const Target target = SplitUrl(url);
  Client::Options options = PortOptions(flags, target.base);
  options.timeout = kTimeout;
  options.max_body = kMaxBody;
  Headers write_headers;
  if (flags.token) {
    write_headers.emplace_back("Fencing-Token", std::to_string(*flags.token));
  }
  Prober prober(MakeClient(options),
                target.path + "/fencepost-probe-" + RandomHex(),
                std::move(write_headers));
  const std::string original = "fencepost probe " + RandomHex();
  const Result first = prober.Write("PUT", {}, original);
  if (!Accepted(first)) {
    std::cerr << "fencepost: probe: the first write to " << url << " ("
              << prober.target() << ") failed: " << Explain(first)
              << FirstWriteHint(first, flags) << "\n";
    return Unreachable(first) ? kUnavailable : kRefused;
  }
  const Outcome outcome = RunChecks(prober, original);
  const Result removed = prober.Write("DELETE", {}, "");
  if (!Accepted(removed)) {
    std::cout << "the scratch key " << prober.target()
              << " could not be removed: " << Explain(removed) << "\n";
  }
  PrintVerdict(url, outcome);
  switch (outcome) {
    case Outcome::kHolds:
      return kSuccess;
    case Outcome::kUnavailable:
      return kUnavailable;
    default:
      return kRefused;
  }
}

}  // namespace fencepost::cli
