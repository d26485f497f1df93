#include "sigv4/credentials.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "sigv4/errc.h"

namespace fencepost::sigv4 {
namespace {

constexpr std::string_view kKeyId = "aws_access_key_id";
constexpr std::string_view kSecretKey = "aws_secret_access_key";
constexpr std::string_view kTokenKey = "aws_session_token";

LoadedCredentials Fail(Errc errc, std::string message) {
  LoadedCredentials out;
  out.error = errc;
  out.message = std::move(message);
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// "FILE:LINE: "
std::string At(std::string_view file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": ";
}

std::string Section(std::string_view profile) {
  return "[" + std::string(profile) + "]";
}

// The profile's three values, as the file spells them.
struct Profile {
  bool found = false;
  std::optional<std::string> key_id, secret, token;
};

// Records `key = value` of the wanted profile; other keys are ignored.
std::optional<std::string> Assign(Profile& profile, std::string_view key,
                                  std::string_view value) {
  std::optional<std::string>* slot = key == kKeyId       ? &profile.key_id
                                     : key == kSecretKey ? &profile.secret
                                     : key == kTokenKey  ? &profile.token
                                                         : nullptr;
  if (slot == nullptr) return std::nullopt;
  if (slot->has_value()) return std::string(key) + " is given twice";
  *slot = std::string(value);
  return std::nullopt;
}

LoadedCredentials FromProfile(Profile& p, std::string_view profile,
                              std::string_view file_name) {
  std::string where = Section(profile) + " in " + std::string(file_name);
  if (!p.found) return Fail(Errc::kBadCredentials, "no profile " + where);
  for (auto [value, key] :
       {std::pair{&p.key_id, kKeyId}, std::pair{&p.secret, kSecretKey}}) {
    if (!value->has_value() || (*value)->empty()) {
      return Fail(Errc::kBadCredentials,
                  "profile " + where + " has no " + std::string(key));
    }
  }
  LoadedCredentials out;
  out.credentials =
      Credentials{std::move(*p.key_id), Secret(std::move(*p.secret)),
                  Secret(p.token.value_or(""))};
  out.source = std::string(file_name) + " " + Section(profile);
  return out;
}

// The whole file, or a message (never its content) saying why not.
std::optional<std::string> ReadFile(const std::string& path, std::string* error,
                                    int* error_number) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"),
                                             &std::fclose);
  if (file == nullptr) {
    *error_number = errno;
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string text(kMaxCredentialsFileBytes + 1, '\0');
  size_t size = std::fread(text.data(), 1, text.size(), file.get());
  if (std::ferror(file.get())) {
    *error_number = EIO;
    *error = "cannot read " + path;
    return std::nullopt;
  }
  text.resize(size);
  return text;
}

LoadedCredentials FromFile(const std::string& path, std::string_view profile) {
  std::string error;
  int error_number = 0;
  auto text = ReadFile(path, &error, &error_number);
  if (!text) return Fail(Errc::kBadCredentials, error);
  LoadedCredentials out = ParseCredentialsFile(*text, profile, path);
  Secret wipe(std::move(*text));
  return out;
}

std::string Env(const Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

LoadedCredentials ParseCredentialsFile(std::string_view text,
                                       std::string_view profile,
                                       std::string_view file_name) {
  if (text.size() > kMaxCredentialsFileBytes) {
    return Fail(Errc::kBadCredentials,
                std::string(file_name) + " is over " +
                    std::to_string(kMaxCredentialsFileBytes) + " bytes");
  }
  Profile wanted;
  std::set<std::string, std::less<>> sections;
  std::optional<std::string> current;
  for (int number = 1; !text.empty(); ++number) {
    size_t newline = text.find('\n');
    std::string_view line = Trim(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view()
                                             : text.substr(newline + 1);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      std::string_view name;
      if (line.size() >= 2 && line.back() == ']') {
        name = Trim(line.substr(1, line.size() - 2));
      }
      if (name.empty()) {
        return Fail(Errc::kBadCredentials,
                    At(file_name, number) + "expected \"[profile]\"");
      }
      if (!sections.emplace(name).second) {
        return Fail(Errc::kBadCredentials, At(file_name, number) + "profile " +
                                               Section(name) +
                                               " appears twice");
      }
      current = std::string(name);
      wanted.found = wanted.found || name == profile;
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || !current) {
      return Fail(
          Errc::kBadCredentials,
          At(file_name, number) + (current ? "expected \"name = value\""
                                           : "a setting before any [profile]"));
    }
    if (*current != profile) continue;
    if (auto problem = Assign(wanted, Trim(line.substr(0, eq)),
                              Trim(line.substr(eq + 1)))) {
      return Fail(Errc::kBadCredentials,
                  At(file_name, number) + *problem + " in " + Section(profile));
    }
  }
  return FromProfile(wanted, profile, file_name);
}

LoadedCredentials LoadCredentials(const CredentialsLookup& lookup,
                                  const Getenv& given_getenv) {
  Getenv getenv = given_getenv ? given_getenv : Getenv(&std::getenv);
  std::string profile = lookup.profile;
  if (profile.empty()) profile = Env(getenv, "AWS_PROFILE");
  if (profile.empty()) profile = "default";
  if (!lookup.file.empty()) return FromFile(lookup.file, profile);

  // An explicit profile asks for the shared file: the environment's key
  // would be another identity than the one named.
  if (lookup.profile.empty()) {
    std::string id = Env(getenv, "AWS_ACCESS_KEY_ID");
    Secret secret(Env(getenv, "AWS_SECRET_ACCESS_KEY"));
    if (!id.empty() && !secret.empty()) {
      LoadedCredentials out;
      out.credentials = Credentials{std::move(id), std::move(secret),
                                    Secret(Env(getenv, "AWS_SESSION_TOKEN"))};
      out.source = "AWS_ACCESS_KEY_ID";
      return out;
    }
    if (!id.empty() || !secret.empty()) {
      return Fail(Errc::kBadCredentials,
                  id.empty() ? "AWS_SECRET_ACCESS_KEY is set but "
                               "AWS_ACCESS_KEY_ID is not"
                             : "AWS_ACCESS_KEY_ID is set but "
                               "AWS_SECRET_ACCESS_KEY is not");
    }
  }

  std::string shared = Env(getenv, "AWS_SHARED_CREDENTIALS_FILE");
  if (!shared.empty()) return FromFile(shared, profile);
  std::string home = Env(getenv, "HOME");
  std::string path = home.empty() ? "" : home + "/.aws/credentials";
  std::string error;
  int error_number = 0;
  std::optional<std::string> text;
  if (!path.empty()) text = ReadFile(path, &error, &error_number);
  if (!text && (path.empty() || error_number == ENOENT)) {
    return Fail(Errc::kNoCredentials,
                "no AWS credentials: give --s3-credentials-file, set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or write "
                "~/.aws/credentials");
  }
  if (!text) return Fail(Errc::kBadCredentials, error);
  LoadedCredentials out = ParseCredentialsFile(*text, profile, path);
  Secret wipe(std::move(*text));
  return out;
}

}  // namespace fencepost::sigv4
