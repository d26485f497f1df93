#include "cli/probe.h"

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

// 16 random hex digits.
std::string RandomHex() {
  std::mt19937_64 random(std::random_device{}());
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
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    throw UsageError("URL must be http://HOST[:PORT][/BASE] or https://...");
  }
  const auto slash = url.find('/', scheme + 3);
  Target t{url.substr(0, slash), ""};
  if (slash != std::string::npos) t.path = url.substr(slash);
  if (t.path.find_first_of("?# ") != std::string::npos) {
    throw UsageError("URL must not have a query or fragment");
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

bool Unreachable(const Result& r) {
  return !r.ok() || r.response.status >= 500;
}

struct Check {
  const char* what;
  std::string method;
  Headers headers;
  std::string body;
};

// Runs `check`; prints its verdict. Returns 0 (holds), 1 (does not) or 3.
int RunCheck(Prober& prober, const Check& check, const std::string& original) {
  const Result answer = prober.Write(check.method, check.headers, check.body);
  const Result after = prober.Read();
  if (Unreachable(answer) || Unreachable(after)) {
    std::cout << check.what << ": no answer ("
              << Explain(Unreachable(answer) ? answer : after) << ")\n";
    return kUnavailable;
  }
  const bool unchanged =
      after.response.status == 200 && after.response.body == original;
  const int status = answer.response.status;
  const char* state = unchanged                      ? "value unchanged"
                      : after.response.status == 404 ? "value deleted"
                                                     : "value overwritten";
  const bool holds = status == 412 && unchanged;
  std::cout << check.what << ": " << (holds ? "holds" : "DOES NOT HOLD")
            << " (HTTP " << status << ", " << state << ")\n";
  if (!unchanged) {
    // Put it back, so the next check starts from the same value.
    const Result again = prober.Write("PUT", {}, original);
    if (Unreachable(again)) return kUnavailable;
  }
  return holds ? kSuccess : kRefused;
}

}  // namespace

int Probe(const Flags& flags) {
  const std::string url = flags.positional.at(0);
  const Target target = SplitUrl(url);
  Headers write_headers;
  if (flags.token) {
    write_headers.emplace_back("Fencing-Token", std::to_string(*flags.token));
  }
  Prober prober(MakeClient(PortOptions(flags, target.base)),
                target.path + "/fencepost-probe-" + RandomHex(),
                std::move(write_headers));
  const std::string original = "fencepost probe " + RandomHex();
  const Result first = prober.Write("PUT", {}, original);
  if (Unreachable(first) || first.response.status / 100 != 2) {
    std::cerr << "fencepost: probe: the first write to " << url
              << " failed: " << Explain(first) << "\n";
    return Unreachable(first) ? kUnavailable : kRefused;
  }
  const Result read = prober.Read();
  if (Unreachable(read)) {
    std::cerr << "fencepost: probe: " << Explain(read) << "\n";
    return kUnavailable;
  }
  const std::string etag = read.response.header("etag");
  std::cout << "scratch value written; "
            << (etag.empty() ? "the store answered no ETag"
                             : "the store's ETag: " + etag)
            << "\n";
  const std::string wrong = "\"fencepost-probe-wrong-" + RandomHex() + "\"";
  const std::vector<Check> checks = {
      {"PUT with a wrong If-Match",
       "PUT",
       {{"If-Match", wrong}},
       "overwritten"},
      {"PUT with If-None-Match: * over a value",
       "PUT",
       {{"If-None-Match", "*"}},
       "overwritten"},
      {"DELETE with a wrong If-Match", "DELETE", {{"If-Match", wrong}}, ""}};
  int status = kSuccess;
  for (const Check& check : checks) {
    const int one = RunCheck(prober, check, original);
    if (one == kUnavailable) return kUnavailable;
    if (one != kSuccess) status = kRefused;
  }
  const Result removed = prober.Write("DELETE", {}, "");
  if (Unreachable(removed) || removed.response.status / 100 != 2) {
    std::cout << "the scratch key could not be removed: " << Explain(removed)
              << "\n";
  }
  std::cout << "verdict: " << url
            << (status == kSuccess
                    ? " honours If-Match and If-None-Match\n"
                    : " does NOT honour If-Match and If-None-Match: a "
                      "compare-and-set through it can lose updates\n");
  return status;
}

}  // namespace fencepost::cli
