#include "sigv4/credentials.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "sigv4/errc.h"

namespace fencepost::sigv4 {
namespace {

constexpr char kSecretText[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

constexpr char kFile[] =
    "# fencepost's store\r\n"
    "[default]\r\n"
    "aws_access_key_id = AKIDDEFAULT\r\n"
    "aws_secret_access_key = default-secret\r\n"
    "\n"
    "; another profile\n"
    "[  fenced ]\n"
    "  aws_access_key_id=AKIAIOSFODNN7EXAMPLE\n"
    "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
    "aws_session_token = token=with/signs+\n"
    "region = eu-west-1\n";

// The message of a failure, checked to hold no secret on the way.
std::string Message(const LoadedCredentials& loaded) {
  EXPECT_FALSE(loaded.credentials);
  EXPECT_TRUE(loaded.error);
  EXPECT_EQ(loaded.message.find("wJalr"), std::string::npos) << "leaks";
  EXPECT_EQ(loaded.message.find("secret-value"), std::string::npos) << "leaks";
  return loaded.message;
}

TEST(CredentialsFileTest, ReadsTheNamedProfile) {
  LoadedCredentials d = ParseCredentialsFile(kFile, "default", "creds");
  ASSERT_TRUE(d.credentials) << d.message;
  EXPECT_EQ(d.credentials->access_key_id, "AKIDDEFAULT");
  EXPECT_EQ(d.credentials->secret_access_key.Reveal(), "default-secret");
  EXPECT_TRUE(d.credentials->session_token.empty());
  EXPECT_EQ(d.source, "creds [default]");

  LoadedCredentials f = ParseCredentialsFile(kFile, "fenced", "creds");
  ASSERT_TRUE(f.credentials) << f.message;
  EXPECT_EQ(f.credentials->access_key_id, "AKIAIOSFODNN7EXAMPLE");
  EXPECT_EQ(f.credentials->secret_access_key.Reveal(), kSecretText);
  EXPECT_EQ(f.credentials->session_token.Reveal(), "token=with/signs+");
}

TEST(CredentialsFileTest, ErrorsNameTheLineButNeverItsContent) {
  EXPECT_EQ(Message(ParseCredentialsFile(kFile, "missing", "creds")),
            "no profile [missing] in creds");
  EXPECT_EQ(Message(ParseCredentialsFile(
                "[default]\naws_secret_access_key secret-value\n", "default",
                "creds")),
            "creds:2: expected \"name = value\"");
  EXPECT_EQ(Message(ParseCredentialsFile("aws_secret_access_key=secret-value",
                                         "default", "creds")),
            "creds:1: a setting before any [profile]");
  EXPECT_EQ(Message(ParseCredentialsFile("[default\n", "default", "creds")),
            "creds:1: expected \"[profile]\"");
  EXPECT_EQ(Message(ParseCredentialsFile("[a]\n[b]\n[a]\n", "a", "creds")),
            "creds:3: profile [a] appears twice");
  EXPECT_EQ(Message(ParseCredentialsFile(
                "[default]\naws_secret_access_key=secret-value\n"
                "aws_secret_access_key=secret-value\n",
                "default", "creds")),
            "creds:3: aws_secret_access_key is given twice in [default]");
  EXPECT_EQ(Message(ParseCredentialsFile(
                "[default]\naws_secret_access_key=secret-value\n", "default",
                "creds")),
            "profile [default] in creds has no aws_access_key_id");
  EXPECT_EQ(Message(ParseCredentialsFile(
                "[default]\naws_access_key_id=A\naws_secret_access_key=\n",
                "default", "creds")),
            "profile [default] in creds has no aws_secret_access_key");
  std::string big = "[default]\n" + std::string(kMaxCredentialsFileBytes, '#');
  EXPECT_EQ(Message(ParseCredentialsFile(big, "default", "creds")),
            "creds is over 65536 bytes");
}

// A temporary directory for credentials files, removed after the test.
class CredentialsLoadTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "sigv4-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::filesystem::path path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }

  LoadedCredentials Load(const CredentialsLookup& lookup = {}) {
    return LoadCredentials(lookup, [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(CredentialsLoadTest, TheEnvironmentComesBeforeTheSharedFile) {
  env_["HOME"] = dir_.string();
  Write(".aws/credentials", kFile);
  env_["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  env_["AWS_SECRET_ACCESS_KEY"] = kSecretText;
  env_["AWS_SESSION_TOKEN"] = "env-token";
  LoadedCredentials env = Load();
  ASSERT_TRUE(env.credentials) << env.message;
  EXPECT_EQ(env.source, "AWS_ACCESS_KEY_ID");
  EXPECT_EQ(env.credentials->access_key_id, "AKIDENV");
  EXPECT_EQ(env.credentials->session_token.Reveal(), "env-token");

  env_.erase("AWS_ACCESS_KEY_ID");
  EXPECT_EQ(Message(Load()),
            "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not");
  env_.erase("AWS_SECRET_ACCESS_KEY");
  LoadedCredentials home = Load();
  ASSERT_TRUE(home.credentials) << home.message;
  EXPECT_EQ(home.credentials->access_key_id, "AKIDDEFAULT");
  env_["AWS_PROFILE"] = "fenced";
  home = Load();
  ASSERT_TRUE(home.credentials) << home.message;
  EXPECT_EQ(home.credentials->access_key_id, "AKIAIOSFODNN7EXAMPLE");
}

TEST_F(CredentialsLoadTest, AGivenFileOrProfileWinsOverTheEnvironment) {
  env_["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  env_["AWS_SECRET_ACCESS_KEY"] = kSecretText;
  std::string file = Write("given", kFile);
  LoadedCredentials given = Load({file, "fenced"});
  ASSERT_TRUE(given.credentials) << given.message;
  EXPECT_EQ(given.credentials->access_key_id, "AKIAIOSFODNN7EXAMPLE");
  EXPECT_EQ(given.source, file + " [fenced]");

  env_["AWS_SHARED_CREDENTIALS_FILE"] = file;
  LoadedCredentials profile = Load({"", "default"});
  ASSERT_TRUE(profile.credentials) << profile.message;
  EXPECT_EQ(profile.credentials->access_key_id, "AKIDDEFAULT");
}

TEST_F(CredentialsLoadTest, NothingFoundOrUnreadableIsAClearError) {
  env_["HOME"] = dir_.string();
  LoadedCredentials none = Load();
  EXPECT_EQ(none.error, Errc::kNoCredentials);
  EXPECT_NE(Message(none).find("AWS_ACCESS_KEY_ID"), std::string::npos);

  std::string missing = (dir_ / "nope").string();
  LoadedCredentials unreadable = Load({missing, ""});
  EXPECT_EQ(unreadable.error, Errc::kBadCredentials);
  EXPECT_EQ(Message(unreadable),
            "cannot read " + missing + ": No such file or directory");
  env_["AWS_SHARED_CREDENTIALS_FILE"] = missing;
  EXPECT_EQ(Load().error, Errc::kBadCredentials);
}

}  // namespace
}  // namespace fencepost::sigv4
