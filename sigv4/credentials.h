#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "sigv4/signer.h"

namespace fencepost::sigv4 {

// Where the s3:// backend's credentials come from (SPEC, "S3 backend"), in
// this order:
//   1. `file` when given (--s3-credentials-file), profile `profile`;
//   2. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN);
//   3. the shared-credentials file: AWS_SHARED_CREDENTIALS_FILE, else
//      $HOME/.aws/credentials, when it exists.
// The profile is `profile`, else AWS_PROFILE, else "default".
struct CredentialsLookup {
  std::string file;     // empty: none given
  std::string profile;  // empty: AWS_PROFILE or "default"
};

// What LoadCredentials found. On failure `error` is set and `message` says
// what is missing or refused, naming files, lines, profiles and variables
// but never a value from them.
struct LoadedCredentials {
  std::optional<Credentials> credentials;
  std::string source;     // "AWS_ACCESS_KEY_ID", "FILE [profile]"
  std::error_code error;  // kNoCredentials or kBadCredentials
  std::string message;
};

// A shared-credentials file larger than this is refused (kBadCredentials):
// it is read whole at start-up.
inline constexpr size_t kMaxCredentialsFileBytes = 64 * 1024;

// Reads an environment variable; nullptr when unset.
using Getenv = std::function<const char*(const char*)>;

// Looks the credentials up as described above. Reads files, but only at
// start-up; `getenv` defaults to the process environment.
LoadedCredentials LoadCredentials(const CredentialsLookup& lookup,
                                  const Getenv& getenv = nullptr);

// Parses the text of an AWS shared-credentials file (INI: "[profile]"
// sections; aws_access_key_id, aws_secret_access_key, aws_session_token
// keys; '#' and ';' comment lines; blanks and CRLF allowed; other keys
// ignored) and returns profile `profile`. `file_name` appears in messages.
// Errors: a line that is neither, a profile given twice, a key repeated in
// a profile, the profile absent or without both keys: kBadCredentials; a
// text over kMaxCredentialsFileBytes too.
LoadedCredentials ParseCredentialsFile(std::string_view text,
                                       std::string_view profile,
                                       std::string_view file_name);

}  // namespace fencepost::sigv4
