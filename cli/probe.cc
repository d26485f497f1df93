#include "cli/probe.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli/probe_store.h"
#include "cli/requests.h"

namespace fencepost::cli {

using client::Client;
using client::Headers;
using client::Result;

std::string RandomHex() {
  thread_local std::mt19937_64 random(std::random_device{}());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(random()));
  return text;
}

namespace {

// URL split into what the client connects to and the path keys go below.
struct Target {
  std::string base;  // scheme://host[:port]
  std::string path;  // "" or "/BASE" without a trailing '/'
};

Target SplitUrl(const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    throw UsageError(
        "URL must be http://HOST[:PORT][/BASE], https://... or "
        "s3://BUCKET[/PREFIX]");
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

// A plain HTTP store: a key is the request target below the URL's path;
// every write carries --token's Fencing-Token, when given.
class HttpStore : public ProbeStore {
 public:
  HttpStore(Client client, std::string path, Headers write_headers,
            const Flags& flags)
      : client_(std::move(client)),
        path_(std::move(path)),
        write_headers_(std::move(write_headers)),
        flags_(flags) {}

  std::string NewKey() const override {
    return path_ + "/fencepost-probe-" + RandomHex();
  }
  Result Write(const std::string& target, const std::string& method,
               const Headers& extra, std::string body) override {
    Headers headers = write_headers_;
    headers.insert(headers.end(), extra.begin(), extra.end());
    return client_.Send(method, target, headers, std::move(body));
  }
  Result Read(const std::string& target) override {
    return client_.Send("GET", target);
  }
  std::string Status(const Result& answer) const override {
    return "HTTP " + std::to_string(answer.response.status);
  }
  std::string Explain(const Result& answer) const override {
    return cli::Explain(answer);
  }
  std::string FirstWriteHint(const Result& first) const override;
  std::string WrongTag() const override {
    return "\"fencepost-probe-wrong-" + RandomHex() + "\"";
  }
  bool TriesTagWithoutQuotes() const override { return false; }

 private:
  Client client_;
  std::string path_;
  Headers write_headers_;
  Flags flags_;
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
  bool bare_tags = false;    // If-Match held only with the tag unquoted
  std::vector<std::string> failed;  // the checks that did not hold
  bool ended() const { return unavailable || stuck; }
};

// "WHAT: holds[ HOW] (STATUS, STATE)"; a check that does not hold is
// named again in the verdict.
void PrintCheck(const ProbeStore& store, const char* what, bool holds,
                const Result& answer, const std::string& state,
                Verdict& verdict, const std::string& how = "") {
  if (!holds) verdict.failed.emplace_back(what);
  std::cout << what << ": " << (holds ? "holds" : "DOES NOT HOLD") << how
            << " (" << store.Status(answer) << ", " << state << ")\n";
}

// Sends `check` and the GET after it; false, with the verdict marked
// unavailable, when either got no usable answer.
bool Send(ProbeStore& store, const std::string& key, const Check& check,
          Result& answer, Result& after, Verdict& verdict) {
  answer = store.Write(key, check.method, check.headers, check.body);
  after = store.Read(key);
  if (Unreachable(answer) || Unreachable(after)) {
    std::cout << check.what << ": no verdict ("
              << store.Explain(Unreachable(answer) ? answer : after) << ")\n";
    verdict.unavailable = true;
    return false;
  }
  return true;
}

// Runs a write whose precondition fails, prints its verdict and, when the
// value changed, writes it again for the next check (stuck when it cannot).
void RunRefusedCheck(ProbeStore& store, const std::string& key,
                     const Check& check, const std::string& original,
                     Verdict& verdict) {
  Result answer, after;
  if (!Send(store, key, check, answer, after, verdict)) return;
  const std::string state = ValueState(after, original);
  const bool unchanged = state == "value unchanged";
  // Only 412 tells a client that its precondition failed: a 403 or 409
  // that changed nothing is not told apart from other refusals.
  const bool holds = answer.response.status == 412 && unchanged;
  PrintCheck(store, check.what, holds, answer, state, verdict);
  if (!unchanged) verdict.ignores = true;
  if (unchanged && !holds) verdict.misreports = true;
  if (unchanged) return;
  const Result again = store.Write(key, "PUT", {}, original);
  if (!Accepted(again)) {
    std::cout << "the scratch value could not be written again ("
              << store.Explain(again) << "): the checks after this one were "
              << "not run\n";
    if (Unreachable(again)) verdict.unavailable = true;
    verdict.stuck = true;
  }
}

// Runs a write whose precondition holds and prints its verdict: it must
// be 2xx and apply. Returns what the GET after it found.
std::string RunAppliedCheck(ProbeStore& store, const std::string& key,
                            const Check& check, Verdict& verdict) {
  Result answer, after;
  if (!Send(store, key, check, answer, after, verdict)) return "";
  const std::string state =
      AppliedState(after, check.method == "DELETE" ? nullptr : &check.body);
  const bool holds = Accepted(answer) &&
                     (state == "value written" || state == "value deleted");
  PrintCheck(store, check.what, holds, answer, state, verdict);
  if (!holds) verdict.refuses = true;
  return state;
}

bool Quoted(const std::string& tag) {
  return tag.size() >= 2 && tag.front() == '"' && tag.back() == '"';
}

// Runs a write with If-Match: `tag`, the store's own ETag, which must
// apply. A store that TriesTagWithoutQuotes gets a quoted tag refused
// with 412 (nothing changed) again without the quotes, and the line says
// which form held; once a check held only so, later ones send the bare tag
// at once (verdict.bare_tags). Returns what the last GET found.
std::string RunTagCheck(ProbeStore& store, const std::string& key,
                        const char* what, const std::string& method,
                        const std::string& body, const std::string& tag,
                        Verdict& verdict) {
  std::vector<std::string> forms = {tag};
  if (store.TriesTagWithoutQuotes() && Quoted(tag)) {
    const std::string bare = tag.substr(1, tag.size() - 2);
    if (verdict.bare_tags) forms.clear();
    forms.push_back(bare);
  }
  const std::string* written = method == "DELETE" ? nullptr : &body;
  for (std::size_t i = 0; i < forms.size(); ++i) {
    Result answer, after;
    const Check check{what, method, {{"If-Match", forms[i]}}, body};
    if (!Send(store, key, check, answer, after, verdict)) return "";
    const std::string state = AppliedState(after, written);
    const bool holds = Accepted(answer) &&
                       (state == "value written" || state == "value deleted");
    const bool bare = forms[i] != tag;
    if (holds) {
      PrintCheck(store, what, true, answer, state, verdict,
                 bare ? " when the tag is sent without quotes" : "");
      verdict.bare_tags = verdict.bare_tags || bare;
      return state;
    }
    const bool unchanged =
        state == "value not written" || state == "value still there";
    if (i + 1 < forms.size() && answer.response.status == 412 && unchanged) {
      std::cout << what << ", quoted as the store answered it: refused ("
                << store.Status(answer) << ", " << state
                << "); sent again without the quotes\n";
      continue;
    }
    PrintCheck(store, what, false, answer, state, verdict,
               bare ? " with the tag sent without quotes either" : "");
    verdict.refuses = true;
    return state;
  }
  return "";
}

// The ETag a GET of `key` answers now ("" for none), or nullopt when the
// GET got no usable answer.
std::optional<std::string> CurrentTag(ProbeStore& store, const std::string& key,
                                      Verdict& verdict) {
  const Result read = store.Read(key);
  if (Unreachable(read)) {
    std::cout << "reading the scratch value's ETag failed ("
              << store.Explain(read) << ")\n";
    verdict.unavailable = true;
    return std::nullopt;
  }
  return read.response.status == 200 ? read.response.header("etag") : "";
}

// The writes whose precondition fails, on the scratch key `key` that holds
// `original`: each must be 412 and change nothing.
void RunRefusedChecks(ProbeStore& store, const std::string& key,
                      const std::string& original, const std::string& etag,
                      Verdict& verdict) {
  std::string wrong;
  do {
    wrong = store.WrongTag();
  } while (wrong == etag);
  const std::vector<Check> checks = {
      {"PUT with a wrong If-Match", "PUT", {{"If-Match", wrong}}, "changed"},
      {"PUT with If-None-Match: * over a value",
       "PUT",
       {{"If-None-Match", "*"}},
       "changed"},
      {"DELETE with a wrong If-Match", "DELETE", {{"If-Match", wrong}}, ""}};
  for (const Check& check : checks) {
    RunRefusedCheck(store, key, check, original, verdict);
    if (verdict.ended()) return;
  }
}

// The writes with the ETag the store itself answered on GET, on the
// scratch key `key`: a PUT, then a DELETE; each must apply. Returns
// whether the DELETE removed the key.
bool RunTagChecks(ProbeStore& store, const std::string& key,
                  const std::string& original, Verdict& verdict) {
  const char* put = "PUT with If-Match: the store's own ETag";
  const char* del = "DELETE with If-Match: the store's own ETag";
  std::optional<std::string> tag = CurrentTag(store, key, verdict);
  if (!tag) return false;
  if (tag->empty()) {
    for (const char* what : {put, del}) {
      std::cout << what << ": DOES NOT HOLD (the store answered no ETag on "
                << "GET: a client has no tag to send)\n";
      verdict.failed.emplace_back(what);
    }
    verdict.refuses = true;
    return false;
  }
  RunTagCheck(store, key, put, "PUT", original + " (matched)", *tag, verdict);
  if (verdict.ended() || !(tag = CurrentTag(store, key, verdict))) {
    return false;
  }
  return RunTagCheck(store, key, del, "DELETE", "", *tag, verdict) ==
         "value deleted";
}

// Removes a scratch key, saying so when the store refuses.
void Remove(ProbeStore& store, const std::string& key) {
  const Result removed = store.Write(key, "DELETE", {}, "");
  if (!Accepted(removed)) {
    std::cout << "the scratch key " << key
              << " could not be removed: " << store.Explain(removed) << "\n";
  }
}

// Reads the value of `key` back and prints whether the store answers an
// ETag; then runs the checks while the store lets them run: the writes
// whose precondition fails, those with the store's own ETag, and a
// create-only PUT to a second, new key. Removes the scratch keys.
Verdict RunChecks(ProbeStore& store, const std::string& key,
                  const std::string& original) {
  Verdict verdict;
  const Result read = store.Read(key);
  if (Unreachable(read)) {
    std::cout << "reading the scratch value back failed ("
              << store.Explain(read) << ")\n";
    verdict.unavailable = true;
    return verdict;
  }
  if (read.response.status != 200 || read.response.body != original) {
    std::cout << "the store did not give back the value it stored ("
              << ValueState(read, original) << ")\n";
    verdict.unreadable = true;
    Remove(store, key);
    return verdict;
  }
  const std::string etag = read.response.header("etag");
  std::cout << "scratch key " << key << " written; "
            << (etag.empty() ? "the store answered no ETag on GET"
                             : "the store's ETag on GET: " + etag)
            << "\n";
  RunRefusedChecks(store, key, original, etag, verdict);
  bool removed = false;
  if (!verdict.ended()) removed = RunTagChecks(store, key, original, verdict);
  if (!verdict.ended()) {
    const std::string created = store.NewKey();
    const std::string state =
        RunAppliedCheck(store, created,
                        {"PUT with If-None-Match: * to a new key",
                         "PUT",
                         {{"If-None-Match", "*"}},
                         original},
                        verdict);
    if (state != "value missing" && !verdict.unavailable) {
      Remove(store, created);
    }
  }
  if (!removed) Remove(store, key);
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
  const std::string bare =
      verdict.bare_tags
          ? " (it compares If-Match with the ETag sent without its quotes)"
          : "";
  if (Honours(verdict)) {
    std::cout << "verdict: " << url << " honours If-Match and If-None-Match"
              << bare << "\n";
    return;
  }
  if (!verdict.failed.empty()) {
    std::cout << "checks that failed: ";
    for (std::size_t i = 0; i < verdict.failed.size(); ++i) {
      std::cout << (i == 0 ? "" : "; ") << verdict.failed[i];
    }
    std::cout << "\n";
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
  std::cout << bare << "\n";
}

std::string HttpStore::FirstWriteHint(const Result& first) const {
  if (!first.ok()) return "";
  const int status = first.response.status;
  if (status == 428 && !flags_.token) {
    return " (a fencepost data port needs a fencing token: --token N)";
  }
  if ((status == 401 || status == 403) && flags_.auth_token_file.empty()) {
    return " (a store that needs a bearer token: --auth-token-file FILE)";
  }
  return "";
}

}  // namespace

std::unique_ptr<ProbeStore> MakeHttpProbeStore(const Flags& flags,
                                               const std::string& url) {
  const Target target = SplitUrl(url);
  if (!flags.s3_endpoint.empty() || !flags.s3_region.empty() ||
      !flags.s3_addressing.empty() || !flags.s3_credentials_file.empty() ||
      !flags.s3_profile.empty()) {
    throw UsageError("the --s3-* flags are for an s3://BUCKET[/PREFIX] URL");
  }
  Client::Options options = PortOptions(flags, target.base);
  options.timeout = kProbeTimeout;
  options.max_body = kProbeMaxBody;
  Headers write_headers;
  if (flags.token) {
    write_headers.emplace_back("Fencing-Token", std::to_string(*flags.token));
  }
  return std::make_unique<HttpStore>(MakeClient(options), target.path,
                                     std::move(write_headers), flags);
}

int Probe(const Flags& flags) {
  const std::string url = flags.positional.at(0);
  const std::unique_ptr<ProbeStore> store =
      url.rfind("s3://", 0) == 0 ? MakeS3ProbeStore(flags, url)
                                 : MakeHttpProbeStore(flags, url);
  const std::string scratch = store->NewKey();
  const std::string original = "fencepost probe " + RandomHex();
  const Result first = store->Write(scratch, "PUT", {}, original);
  if (!Accepted(first)) {
    std::cerr << "fencepost: probe: the first write to " << url << " ("
              << scratch << ") failed: " << store->Explain(first)
              << store->FirstWriteHint(first) << "\n";
    return Unreachable(first) ? kUnavailable : kRefused;
  }
  const Verdict verdict = RunChecks(*store, scratch, original);
  PrintVerdict(url, verdict);
  if (verdict.unavailable) return kUnavailable;
  return Honours(verdict) ? kSuccess : kRefused;
}

}  // namespace fencepost::cli
