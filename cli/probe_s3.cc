// `fencepost probe s3://BUCKET[/PREFIX]`: the probe's checks (probe.cc)
// against the bucket itself, each request addressed and signed by s3/.

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cli/probe_store.h"
#include "cli/requests.h"
#include "s3/error.h"
#include "s3/location.h"
#include "s3/request.h"
#include "sigv4/credentials.h"

namespace fencepost::cli {

using client::Client;
using client::Headers;
using client::Result;

namespace {

// A bucket: a key is an object key below PREFIX; every request is signed
// with the credentials, whose source (a variable's or a file's name, never
// a value) is named when the store refuses them.
class S3Store : public ProbeStore {
 public:
  S3Store(Client client, s3::Location location, std::string prefix,
          sigv4::Credentials credentials, std::string source)
      : client_(std::move(client)),
        location_(std::move(location)),
        prefix_(std::move(prefix)),
        credentials_(std::move(credentials)),
        source_(std::move(source)) {}

  std::string NewKey() const override {
    return s3::ObjectKey(prefix_, "fencepost-probe-" + RandomHex());
  }
  Result Write(const std::string& key, const std::string& method,
               const Headers& headers, std::string body) override {
    return Send(method, key, headers, std::move(body));
  }
  Result Read(const std::string& key) override {
    return Send("GET", key, {}, "");
  }
  std::string Status(const Result& answer) const override {
    return s3::DescribeAnswer(answer.response.status, answer.response.body,
                              answer.response.header("x-amz-request-id"));
  }
  std::string Explain(const Result& answer) const override {
    return answer.ok() ? Status(answer) : answer.detail;
  }
  std::string FirstWriteHint(const Result& first) const override;
  // Unquoted: a store that compares the bare tag (RGW) refuses every
  // quoted one, so a quoted wrong tag would be refused for the wrong
  // reason; a store that compares quoted tags refuses a bare wrong one.
  std::string WrongTag() const override {
    return "fencepost-probe-wrong-" + RandomHex();
  }
  bool TriesTagWithoutQuotes() const override { return true; }

 private:
  Result Send(const std::string& method, const std::string& key,
              const Headers& extra, std::string body) {
    std::vector<sigv4::Header> to_sign;
    for (const auto& [name, value] : extra) to_sign.push_back({name, value});
    const s3::SignedRequest request = s3::SignObjectRequest(
        location_, credentials_, method, key, std::move(to_sign), body,
        std::chrono::system_clock::now());
    Headers headers;
    for (const sigv4::Header& h : request.headers) {
      headers.emplace_back(h.name, h.value);
    }
    return client_.Send(request.method, request.target, headers,
                        std::move(body));
  }

  Client client_;
  s3::Location location_;
  std::string prefix_;
  sigv4::Credentials credentials_;
  std::string source_;
};

std::string S3Store::FirstWriteHint(const Result& first) const {
  if (!first.ok()) return "";
  const std::optional<s3::ErrorDocument> error =
      s3::ParseErrorDocument(first.response.body);
  const std::string code = error ? error->code : "";
  if (code == "SignatureDoesNotMatch" || code == "InvalidAccessKeyId" ||
      code == "InvalidToken" || code == "ExpiredToken") {
    return " (the store refused the credentials of " + source_ + ")";
  }
  if (code == "AccessDenied") {
    return " (the credentials of " + source_ + " may not write to the bucket)";
  }
  if (code == "NoSuchBucket") {
    return " (no bucket '" + location_.bucket + "' at " +
           location_.endpoint.Authority() + ")";
  }
  if (code == "RequestTimeTooSkewed") {
    return " (this machine's clock is off from the store's)";
  }
  if (code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect" ||
      first.response.status == 301) {
    return " (the bucket may be in another region than " + location_.region +
           ": --s3-region, --s3-endpoint)";
  }
  return "";
}

// --s3-region: AWS's region names are lower-case letters, digits and '-'.
std::string Region(const Flags& flags) {
  const std::string region =
      flags.s3_region.empty() ? "us-east-1" : flags.s3_region;
  for (const char c : region) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      throw UsageError("--s3-region: '" + region +
                       "' is not a region name such as us-east-1");
    }
  }
  return region;
}

// The bucket, endpoint, addressing and region the flags name.
s3::Location Locate(const Flags& flags, const std::string& bucket) {
  s3::Location location;
  location.bucket = bucket;
  location.region = Region(flags);
  const std::string endpoint = flags.s3_endpoint.empty()
                                   ? s3::DefaultEndpoint(location.region)
                                   : flags.s3_endpoint;
  try {
    location.endpoint = s3::ParseEndpoint(endpoint);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--s3-endpoint: ") + e.what());
  }
  if (flags.s3_addressing.empty()) {
    location.addressing = s3::DefaultAddressing(location.endpoint);
  } else if (auto a = s3::ParseAddressing(flags.s3_addressing)) {
    location.addressing = *a;
  } else {
    throw UsageError("--s3-addressing must be path or virtual");
  }
  try {
    location.Check();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return location;
}

}  // namespace

std::unique_ptr<ProbeStore> MakeS3ProbeStore(const Flags& flags,
                                             const std::string& url) {
  if (flags.token) {
    throw UsageError(
        "--token is for probing through a fencepost data port, not an "
        "s3:// bucket");
  }
  if (!flags.auth_token_file.empty()) {
    throw UsageError(
        "--auth-token-file is for http:// stores: an s3:// bucket's "
        "requests are signed (--s3-credentials-file, or AWS_ACCESS_KEY_ID "
        "and AWS_SECRET_ACCESS_KEY)");
  }
  s3::BucketUrl bucket;
  try {
    bucket = s3::ParseBucketUrl(url);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  s3::Location location = Locate(flags, bucket.bucket);
  sigv4::LoadedCredentials loaded =
      sigv4::LoadCredentials({flags.s3_credentials_file, flags.s3_profile});
  if (!loaded.credentials) throw UsageError(loaded.message);
  Client::Options options = PortOptions(flags, location.BaseUrl());
  options.timeout = kProbeTimeout;
  options.max_body = kProbeMaxBody;
  return std::make_unique<S3Store>(
      MakeClient(options), std::move(location), std::move(bucket.prefix),
      std::move(*loaded.credentials), std::move(loaded.source));
}

}  // namespace fencepost::cli
