#include "cli/probe.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
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

// One probe: a client, the write headers and the base path its scratch
// keys go below.
class Prober {
 public:
  Prober(Client client, std::string path, Headers write_headers)
      : client_(std::move(client)),
        path_(std::move(path)),
        write_headers_(std::move(write_headers)) {}

  // A key below the URL that no probe has used: fencepost-probe-<16 hex>.
  std::string NewTarget() const {
    return path_ + "/fencepost-probe-" + RandomHex();
  }
  Result Write(const std::string& target, const std::string& method,
               Headers extra, std::string body) {
    Headers headers = write_headers_;
    headers.insert(headers.end(), extra.begin(), extra.end());
    return client_.Send(method, target, headers, std::move(body));
  }
  Result Read(const std::string& target) { return client_.Send("GET", target); }

 private:
  Client client_;
  std::string path_;
  Headers write_headers_;
};

// No answer, or a 5xx: the store cannot say anything about preconditions.
bool Unreachable(const Result& r) {
  return !r.ok() || r.response.status >= 500;
}

bool Accepted(const Result& r) {
  return r.ok() && r.response.status / 100 == 2;
}

// What a GET found of the scratch value that held `original` before a
// write that must not change it.
std::string ValueState(const Result& read, const std::string& original) {
  const int status = read.response.status;
  if (status == 200) {
    return read.response.body == original ? "value unchanged"
                                          : "value overwritten";
  }
  if (status == 404 || status == 410) return "value deleted";
  return "value unreadable: GET answered HTTP " + std::to_string(status);
}

// What a GET found after a write that must apply: a PUT of `body`, or a
// DELETE when `body` is null.
std::string AppliedState(const Result& read, const std::string* body) {
  const int status = read.response.status;
  const bool gone = status == 404 || status == 410;
  if (status != 200 && !gone) {
    return "value unreadable: GET answered HTTP " + std::to_string(status);
  }
  if (body == nullptr) return gone ? "value deleted" : "value still there";
  if (gone) return "value missing";
  return read.response.body == *body ? "value written" : "value not written";
}

struct Check {
  const char* what;
  std::string method;
  Headers headers;
  std::string body;
};

// The probe's verdict so far. A store honours the preconditions when it
// refuses (412, nothing changed) every write whose precondition fails and
// applies every write whose precondition holds.
struct Verdict {
  bool ignores = false;      // a write whose precondition failed changed
                             // the value
  bool misreports = false;   // one changed nothing but was not answered 412
  bool refuses = false;      // a write whose precondition held was refused
                             // or did not apply
  bool unreadable = false;   // the value did not read back as written
  bool unavailable = false;  // no answer, or a 5xx
  bool stuck = false;        // the scratch value could not be put back
  bool ended() const { return unavailable || stuck; }
};

void PrintCheck(const char* what, bool holds, int status,
                const std::string& state) {
  std::cout << what << ": " << (holds ? "holds" : "DOES NOT HOLD") << " (HTTP "
            << status << ", " << state << ")\n";
}

// Sends `check` and the GET after it; false, with the verdict marked
// unavailable, when either got no usable answer.
bool Send(Prober& prober, const std::string& target, const Check& check,
          Result& answer, Result& after, Verdict& verdict) {
  answer = prober.Write(target, check.method, check.headers, check.body);
  after = prober.Read(target);
  if (Unreachable(answer) || Unreachable(after)) {
    std::cout << check.what << ": no verdict ("
              << Explain(Unreachable(answer) ? answer : after) << ")\n";
    verdict.unavailable = true;
    return false;
  }
  return true;
}

// Runs a write whose precondition fails, prints its verdict and, when the
// value changed, writes it again for the next check (stuck when it cannot).
void RunRefusedCheck(Prober& prober, const std::string& target,
                     const Check& check, const std::string& original,
                     Verdict& verdict) {
  Result answer, after;
  if (!Send(prober, target, check, answer, after, verdict)) return;
  const std::string state = ValueState(after, original);
  const bool unchanged = state == "value unchanged";
  // Only 412 tells a client that its precondition failed: a 403 or 409
  // that changed nothing is not told apart from other refusals.
  const bool holds = answer.response.status == 412 && unchanged;
  PrintCheck(check.what, holds, answer.response.status, state);
  if (!unchanged) verdict.ignores = true;
  if (unchanged && !holds) verdict.misreports = true;
  if (unchanged) return;
  const Result again = prober.Write(target, "PUT", {}, original);
  if (!Accepted(again)) {
    std::cout << "the scratch value could not be written again ("
              << Explain(again) << "): the checks after this one were "
              << "not run\n";
    if (Unreachable(again)) verdict.unavailable = true;
    verdict.stuck = true;
  }
}

// Runs a write whose precondition holds and prints its verdict: it must
// be 2xx and apply. Returns what the GET after it found.
std::string RunAppliedCheck(Prober& prober, const std::string& target,
                            const Check& check, Verdict& verdict) {
  Result answer, after;
  if (!Send(prober, target, check, answer, after, verdict)) return "";
  const std::string state =
      AppliedState(after, check.method == "DELETE" ? nullptr : &check.body);
  const bool holds = Accepted(answer) &&
                     (state == "value written" || state == "value deleted");
  PrintCheck(check.what, holds, answer.response.status, state);
  if (!holds) verdict.refuses = true;
  return state;
}

// The ETag a GET of `target` answers now ("" for none), or nullopt when
// the GET got no usable answer.
std::optional<std::string> CurrentTag(Prober& prober, const std::string& target,
                                      Verdict& verdict) {
  const Result read = prober.Read(target);
  if (Unreachable(read)) {
    std::cout << "reading the scratch value's ETag failed (" << Explain(read)
              << ")\n";
    verdict.unavailable = true;
    return std::nullopt;
  }
  return read.response.status == 200 ? read.response.header("etag") : "";
}

// The writes whose precondition fails, on the scratch key `target` that
// holds `original`: each must be 412 and change nothing.
void RunRefusedChecks(Prober& prober, const std::string& target,
                      const std::string& original, const std::string& etag,
                      Verdict& verdict) {
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
  for (const Check& check : checks) {
    RunRefusedCheck(prober, target, check, original, verdict);
    if (verdict.ended()) return;
  }
}

// The writes with the ETag the store itself answered on GET, on the
// scratch key `target`: a PUT, then a DELETE; each must apply. Returns
// whether the DELETE removed the key.
bool RunTagChecks(Prober& prober, const std::string& target,
                  const std::string& original, Verdict& verdict) {
  const char* put = "PUT with If-Match: the store's own ETag";
  const char* del = "DELETE with If-Match: the store's own ETag";
  std::optional<std::string> tag = CurrentTag(prober, target, verdict);
  if (!tag) return false;
  if (tag->empty()) {
    for (const char* what : {put, del}) {
      std::cout << what << ": DOES NOT HOLD (the store answered no ETag on "
                << "GET: a client has no tag to send)\n";
    }
    verdict.refuses = true;
    return false;
  }
  RunAppliedCheck(prober, target,
                  {put, "PUT", {{"If-Match", *tag}}, original + " (matched)"},
                  verdict);
  if (verdict.ended() || !(tag = CurrentTag(prober, target, verdict))) {
    return false;
  }
  return RunAppliedCheck(prober, target,
                         {del, "DELETE", {{"If-Match", *tag}}, ""},
                         verdict) == "value deleted";
}

// Removes a scratch key, saying so when the store refuses.
void Remove(Prober& prober, const std::string& target) {
  const Result removed = prober.Write(target, "DELETE", {}, "");
  if (!Accepted(removed)) {
    std::cout << "the scratch key " << target
              << " could not be removed: " << Explain(removed) << "\n";
  }
}

// Reads the value of `target` back and prints whether the store answers
// an ETag; then runs the checks while the store lets them run: the writes
// whose precondition fails, those with the store's own ETag, and a
// create-only PUT to a second, new key. Removes the scratch keys.
Verdict RunChecks(Prober& prober, const std::string& target,
                  const std::string& original) {
  Verdict verdict;
  const Result read = prober.Read(target);
  if (Unreachable(read)) {
    std::cout << "reading the scratch value back failed (" << Explain(read)
              << ")\n";
    verdict.unavailable = true;
    return verdict;
  }
  if (read.response.status != 200 || read.response.body != original) {
    std::cout << "the store did not give back the value it stored ("
              << ValueState(read, original) << ")\n";
    verdict.unreadable = true;
    Remove(prober, target);
    return verdict;
  }
  const std::string etag = read.response.header("etag");
  std::cout << "scratch key " << target << " written; "
            << (etag.empty() ? "the store answered no ETag on GET"
                             : "the store's ETag on GET: " + etag)
            << "\n";
  RunRefusedChecks(prober, target, original, etag, verdict);
  bool removed = false;
  if (!verdict.ended()) {
    removed = RunTagChecks(prober, target, original, verdict);
  }
  if (!verdict.ended()) {
    const std::string created = prober.NewTarget();
    const std::string state =
        RunAppliedCheck(prober, created,
                        {"PUT with If-None-Match: * to a new key",
                         "PUT",
                         {{"If-None-Match", "*"}},
                         original},
                        verdict);
    if (state != "value missing" && !verdict.unavailable) {
      Remove(prober, created);
    }
  }
  if (!removed) Remove(prober, target);
  return verdict;
}

// Whether every check held.
bool Honours(const Verdict& v) {
  return !v.ignores && !v.misreports && !v.refuses && !v.stuck &&
         !v.unreadable && !v.unavailable;
}

// The verdict line for a probe of `url`.
void PrintVerdict(const std::string& url, const Verdict& verdict) {
  if (verdict.unavailable) {
    std::cerr << "fencepost: probe: " << url
              << " stopped answering or failed (5xx): no verdict\n";
    return;
  }
  if (verdict.unreadable) {
    std::cout << "verdict: " << url
              << " could not be probed: it does not read back what it "
                 "stores\n";
    return;
  }
  if (Honours(verdict)) {
    std::cout << "verdict: " << url << " honours If-Match and If-None-Match\n";
    return;
  }
  std::vector<std::string> why;
  if (verdict.ignores || verdict.stuck) {
    why.push_back("a compare-and-set through it can lose updates");
  }
  if (verdict.misreports) {
    why.push_back(
        "it answers a failed precondition with another status than 412, "
        "which a client cannot tell from other refusals");
  }
  if (verdict.refuses) {
    why.push_back(
        "it refuses writes whose precondition holds, so a compare-and-set "
        "through it cannot succeed");
  }
  std::cout << "verdict: " << url
            << " does NOT honour If-Match and If-None-Match: ";
  for (std::size_t i = 0; i < why.size(); ++i) {
    std::cout << (i == 0 ? "" : "; ") << why[i];
  }
  std::cout << "\n";
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
  Prober prober(MakeClient(options), target.path, std::move(write_headers));
  const std::string scratch = prober.NewTarget();
  const std::string original = "fencepost probe " + RandomHex();
  const Result first = prober.Write(scratch, "PUT", {}, original);
  if (!Accepted(first)) {
    std::cerr << "fencepost: probe: the first write to " << url << " ("
              << scratch << ") failed: " << Explain(first)
              << FirstWriteHint(first, flags) << "\n";
    return Unreachable(first) ? kUnavailable : kRefused;
  }
  const Verdict verdict = RunChecks(prober, scratch, original);
  PrintVerdict(url, verdict);
  if (verdict.unavailable) return kUnavailable;
  return Honours(verdict) ? kSuccess : kRefused;
}

}  // namespace fencepost::cli
