#include "cli/flags.h"

#include <charconv>
#include <cstdlib>

#include "client/duration.h"

namespace fencepost::cli {

using std::chrono::milliseconds;

namespace {

// SPEC "Leases": ttl_ms is 100 to 3600000.
constexpr milliseconds kMinTtl{100};
constexpr milliseconds kMaxTtl{3600000};

std::uint64_t ParseToken(const std::string& v,
                         const std::string& where = "--token") {
  std::uint64_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || v.size() > 20 || ec != std::errc() ||
      end != v.data() + v.size()) {
    throw UsageError(where + ": '" + v + "' is not a decimal uint64");
  }
  return out;
}

milliseconds ParseDurationFlag(const std::string& flag, const std::string& v) {
  const std::optional<milliseconds> d = client::ParseDuration(v);
  if (!d) {
    throw UsageError("--" + flag + ": '" + v +
                     "' is not a duration such as 500ms, 10s or 2m");
  }
  return *d;
}

std::string EnvOr(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// Sets the flag `name` (one `spec` takes) to `value`.
void SetFlag(Flags& flags, const std::string& name, const std::string& value) {
  if (name == "admin") flags.admin = value;
  if (name == "data") {
    flags.data = value;
    flags.data_given = true;
  }
  if (name == "auth-token-file") flags.auth_token_file = value;
  if (name == "tls-ca") flags.tls_ca = value;
  if (name == "holder") flags.holder = value;
  if (name == "token") flags.token = ParseToken(value);
  if (name == "ttl") flags.ttl = ParseDurationFlag(name, value);
  if (name == "wait") flags.wait = ParseDurationFlag(name, value);
  if (name == "grace") flags.grace = ParseDurationFlag(name, value);
  if (name == "via") flags.via = value;
  if (name == "s3-endpoint") flags.s3_endpoint = value;
  if (name == "s3-region") flags.s3_region = value;
  if (name == "s3-addressing") flags.s3_addressing = value;
  if (name == "s3-credentials-file") flags.s3_credentials_file = value;
  if (name == "s3-profile") flags.s3_profile = value;
  if (name == "fence-key") flags.fence_key = value;
  if (name == "idempotency-key") flags.idempotency_key = value;
  if (name == "method") flags.method = value;
  if (name == "content-type") flags.content_type = value;
  if (name == "fence") {
    if (value.empty()) throw UsageError("--fence needs a key");
    flags.fences.push_back(value);
  }
}

// The defaults the environment gives the flags not given.
void ApplyEnvironment(const CommandSpec& spec, Flags& flags) {
  if (flags.admin.empty()) {
    flags.admin = EnvOr("FENCEPOST_ADMIN", "http://127.0.0.1:7401");
  }
  if (flags.data.empty()) {
    flags.data = EnvOr("FENCEPOST_DATA", "http://127.0.0.1:7400");
  }
  if (flags.via.empty() && spec.flags.count("via") != 0) {
    flags.via = EnvOr("FENCEPOST_VIA", "");
  }
  if (spec.flags.count("fence-key") != 0) {
    if (flags.fence_key.empty()) flags.fence_key = EnvOr("FENCEPOST_FENCE", "");
    const std::string token = EnvOr("FENCING_TOKEN", "");
    if (!flags.token && !token.empty()) {
      flags.token = ParseToken(token, "FENCING_TOKEN");
    }
  }
}

}  // namespace

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> kCommands = {
      {"lease", "acquire", "NAME", {"holder", "ttl", "wait"}},
      {"lease", "release", "NAME", {"holder", "token"}},
      {"lease", "get", "NAME", {}},
      {"lease",
       "run",
       "NAME",
       {"holder", "ttl", "grace", "via", "fence"},
       true},
      {"fence", "get", "KEY", {}},
      {"fence", "bump", "KEY", {"token"}},
      {"batch", "", "FILE", {"token"}, false, true},
      {"probe",
       "",
       "URL",
       {"token", "s3-endpoint", "s3-region", "s3-addressing",
        "s3-credentials-file", "s3-profile"}},
      {"watch", "", "PREFIX", {}, false, true},
      {"effect",
       "",
       "NAME[/REST]",
       {"token", "fence-key", "idempotency-key", "method", "content-type"},
       false,
       false,
       true},
  };
  return kCommands;
}

Flags ParseFlags(const CommandSpec& spec,
                 const std::vector<std::string>& args) {
  static const std::set<std::string_view> kCommon = {
      "admin", "data", "auth-token-file", "tls-ca"};
  Flags flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (!spec.takes_command) throw UsageError("unexpected '--'");
      flags.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg.rfind("--", 0) != 0) {
      flags.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw UsageError("--" + name + " needs a value");
    }
    if (kCommon.count(name) == 0 && spec.flags.count(name) == 0) {
      throw UsageError("unknown flag --" + name + " for '" + spec.Title() +
                       "'");
    }
    SetFlag(flags, name, value);
  }
  if (flags.positional.size() > 1 && spec.takes_command) {
    std::string rest;
    for (std::size_t i = 1; i < flags.positional.size(); ++i) {
      rest += " " + flags.positional[i];
    }
    throw UsageError("'" + spec.Title() + "' takes one " +
                     std::string(spec.operand) +
                     "; the command goes after '--': " + spec.Title() + " " +
                     flags.positional[0] + " [FLAGS] --" + rest);
  }
  if (flags.positional.size() > (spec.takes_file ? 2 : 1) ||
      (flags.positional.empty() && !spec.operand_optional)) {
    if (spec.takes_file) {
      throw UsageError("'" + spec.Title() + "' takes one " +
                       std::string(spec.operand) + " and at most one FILE");
    }
    throw UsageError("'" + spec.Title() + "' takes " +
                     (spec.operand_optional ? "at most " : "") + "one " +
                     std::string(spec.operand));
  }
  if (!flags.positional.empty() && flags.positional[0].empty()) {
    throw UsageError(std::string(spec.operand) + " is empty");
  }
  if (spec.takes_command && flags.command.empty()) {
    throw UsageError("no command after '--'");
  }
  ApplyEnvironment(spec, flags);
  return flags;
}

void Require(bool present, std::string_view flag) {
  if (!present) throw UsageError("--" + std::string(flag) + " is required");
}

milliseconds RequireTtl(const Flags& flags) {
  Require(flags.ttl.has_value(), "ttl");
  if (*flags.ttl < kMinTtl || *flags.ttl > kMaxTtl) {
    throw UsageError("--ttl must be from 100ms to 1h");
  }
  return *flags.ttl;
}

}  // namespace fencepost::cli
