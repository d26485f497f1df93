#include "storage/fs_tree.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "storage/errc.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::storage {
namespace {

namespace fs = std::filesystem;

class FsTreeTest : public ::testing::Test {
 protected:
  FsTreeTest() {
    fs::create_directories(outside_);
    std::ofstream(outside_ / "secret") << "outside";
  }
  std::error_code Put(const std::string& key, const std::string& body,
                      std::optional<fence::Token> token = 1) {
    bool created = false;
    std::string etag;
    return tree_.Write(key, body, token, "", &created, &etag);
  }
  // Nothing but `secret` is ever in the directory beside the store.
  void ExpectOutsideUntouched() {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(outside_)) {
      names.push_back(entry.path().filename());
    }
    EXPECT_EQ(names, std::vector<std::string>{"secret"});
    EXPECT_EQ(testing::ReadFile(outside_ / "secret"), "outside");
  }
  std::vector<std::string> StoreFiles() {
    std::vector<std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(root_)) {
      out.push_back(fs::relative(entry.path(), root_).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  testing::TempDir dir_;
  fs::path root_ = fs::path(dir_.path()) / "store";
  fs::path outside_ = fs::path(dir_.path()) / "outside";
  FsTree tree_{root_.string()};
};

TEST_F(FsTreeTest, RoundTripWithTokenAndAtomicReplace) {
  bool created = false;
  std::string etag;
  ASSERT_FALSE(tree_.Write("orders/1", "from A", 33, "", &created, &etag));
  EXPECT_TRUE(created);
  ASSERT_FALSE(tree_.Write("orders/1", "from B", 34, "", &created, &etag));
  EXPECT_FALSE(created);
  EXPECT_EQ(testing::ReadFile(root_ / "orders/1"), "from B");

  FsValue value;
  ASSERT_FALSE(tree_.Read("orders/1", false, &value));
  EXPECT_TRUE(value.found);
  EXPECT_EQ(value.body, "from B");
  EXPECT_EQ(value.token, fence::Token{34});
  ASSERT_FALSE(tree_.Read("orders/1", true, &value));
  EXPECT_EQ(value.size, 6u);
  EXPECT_TRUE(value.body.empty());
  // The temp file was renamed away: only the directory and the file remain.
  EXPECT_EQ(StoreFiles(), (std::vector<std::string>{"orders", "orders/1"}));

  ASSERT_FALSE(tree_.Remove("orders/1"));
  ASSERT_FALSE(tree_.Read("orders/1", false, &value));
  EXPECT_FALSE(value.found);
  EXPECT_FALSE(tree_.Remove("orders/1")) << "a missing value is no error";
  EXPECT_FALSE(tree_.Remove("never/was"));
}

TEST_F(FsTreeTest, CollisionsBetweenFilesAndDirectories) {
  ASSERT_FALSE(Put("x", "file"));
  EXPECT_EQ(tree_.Check("x/y", false), Errc::kCollision);
  EXPECT_EQ(Put("x/y", "under a file"), Errc::kCollision);
  ASSERT_FALSE(Put("d/y", "in a dir"));
  EXPECT_EQ(tree_.Check("d", false), Errc::kCollision);
  EXPECT_EQ(Put("d", "over a dir"), Errc::kCollision);
  // Reads and deletes of such keys find nothing and remove nothing.
  FsValue value;
  ASSERT_FALSE(tree_.Read("x/y", false, &value));
  EXPECT_FALSE(value.found);
  ASSERT_FALSE(tree_.Read("d", false, &value));
  EXPECT_FALSE(value.found);
  EXPECT_FALSE(tree_.Check("d", true));
  EXPECT_FALSE(tree_.Remove("d"));
  EXPECT_FALSE(tree_.Remove("x/y"));
  EXPECT_EQ(testing::ReadFile(root_ / "x"), "file");
  EXPECT_EQ(testing::ReadFile(root_ / "d/y"), "in a dir");
}

TEST_F(FsTreeTest, SymlinksAreNeverFollowed) {
  fs::create_directories(root_);
  fs::create_directory_symlink(outside_, root_ / "link");
  fs::create_symlink(outside_ / "secret", root_ / "leaf");
  FsValue value;
  EXPECT_EQ(Put("link/x", "escape"), Errc::kSymlink);
  EXPECT_EQ(Put("link/secret", "overwrite"), Errc::kSymlink);
  EXPECT_EQ(tree_.Check("link/secret", false), Errc::kSymlink);
  EXPECT_EQ(tree_.Read("link/secret", false, &value), Errc::kSymlink);
  EXPECT_EQ(Put("leaf", "through a leaf link"), Errc::kSymlink);
  EXPECT_EQ(tree_.Read("leaf", false, &value), Errc::kSymlink);
  EXPECT_EQ(tree_.Remove("leaf"), Errc::kSymlink);
  EXPECT_EQ(tree_.Remove("link/secret"), Errc::kSymlink);
  ExpectOutsideUntouched();
  EXPECT_TRUE(fs::is_symlink(root_ / "leaf"));
}

TEST_F(FsTreeTest, LongSegmentsAndReservedNames) {
  const std::string long_segment(256, 'a');
  EXPECT_EQ(Put(long_segment, "x"), Errc::kSegmentTooLong);
  EXPECT_EQ(Put("a/" + long_segment + "/b", "x"), Errc::kSegmentTooLong);
  EXPECT_FALSE(Put(std::string(255, 'a'), "x"));
  EXPECT_EQ(Put("a/.fencepost-tmp.0123", "x"), Errc::kReservedName);
  EXPECT_FALSE(Put(".fencepost-tmp.dir/x", "x")) << "only the file name";
}

TEST_F(FsTreeTest, EmptyBodyAndNoToken) {
  ASSERT_FALSE(Put("empty", "", std::nullopt));
  FsValue value;
  ASSERT_FALSE(tree_.Read("empty", false, &value));
  EXPECT_TRUE(value.found);
  EXPECT_EQ(value.size, 0u);
  EXPECT_FALSE(value.token);
}

TEST_F(FsTreeTest, EachWriteHasANewTagKeptWithTheFileAndItsContentType) {
  bool created = false;
  std::string first, second;
  ASSERT_FALSE(tree_.Write("doc", "same", 7, "text/plain", &created, &first));
  ASSERT_FALSE(tree_.Write("doc", "same", 7, "text/csv", &created, &second));
  EXPECT_FALSE(first.empty());
  EXPECT_NE(first, second);  // the same body and token: still a new tag
  FsValue value;
  ASSERT_FALSE(tree_.Read("doc", false, &value));
  EXPECT_EQ(value.etag, second);
  EXPECT_EQ(value.content_type, "text/csv");
  fence::ValueNow now;
  ASSERT_FALSE(tree_.Current("doc", &now));
  EXPECT_TRUE(now.exists);
  EXPECT_EQ(now.tag, second);
  ASSERT_FALSE(tree_.Current("nothing/here", &now));
  EXPECT_FALSE(now.exists);
}

TEST_F(FsTreeTest, AFileWrittenByAnotherProgramHasATagFromItsStat) {
  std::ofstream(root_ / "foreign") << "written elsewhere";
  fence::ValueNow before;
  ASSERT_FALSE(tree_.Current("foreign", &before));
  ASSERT_TRUE(before.exists);
  EXPECT_EQ(before.tag.front(), 's');
  FsValue value;
  ASSERT_FALSE(tree_.Read("foreign", true, &value));
  EXPECT_EQ(value.etag, before.tag);  // stable while the file is
  ASSERT_FALSE(Put("foreign", "rewritten"));
  fence::ValueNow after;
  ASSERT_FALSE(tree_.Current("foreign", &after));
  EXPECT_NE(after.tag, before.tag);
}

// The identity fencepost stores beside a tag: inode, size, mtime (hex).
std::string IdentityOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  char text[64];
  std::snprintf(
      text, sizeof text, "%llx-%llx-%llx",
      static_cast<unsigned long long>(st.st_ino),
      static_cast<unsigned long long>(st.st_size),
      static_cast<unsigned long long>(st.st_mtim.tv_sec) * 1000000000ull +
          static_cast<unsigned long long>(st.st_mtim.tv_nsec));
  return text;
}

// A file another program rewrites in place keeps its attributes, fencepost's
// tag among them: that tag must not stand for the new contents.
TEST_F(FsTreeTest, AFileRewrittenInPlaceByAnotherProgramHasANewTag) {
  ASSERT_FALSE(Put("doc", "aaaa"));
  FsValue before;
  ASSERT_FALSE(tree_.Read("doc", true, &before));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(root_ / "doc", std::ios::trunc) << "bbbb";  // same size
  FsValue after;
  ASSERT_FALSE(tree_.Read("doc", false, &after));
  EXPECT_EQ(after.body, "bbbb");
  EXPECT_NE(after.etag, before.etag);
  EXPECT_EQ(after.etag.front(), 's');
}

// Attributes another program set are never sent on as they are: a tag or
// Content-Type with a CR LF would end the answer's header early.
TEST_F(FsTreeTest, AttributesThatCouldSplitAHeaderAreNotSentOn) {
  ASSERT_FALSE(Put("doc", "body"));
  const std::string path = (root_ / "doc").string();
  const std::string evil = "x\r\nSet-Cookie: a=b";
  // With the file's identity, as fencepost stores its own tags.
  const std::string tag = evil + " " + IdentityOf(path);
  ASSERT_EQ(::setxattr(path.c_str(), "user.fencepost.etag", tag.data(),
                       tag.size(), 0),
            0);
  ASSERT_EQ(::setxattr(path.c_str(), "user.fencepost.content-type", evil.data(),
                       evil.size(), 0),
            0);
  FsValue value;
  ASSERT_FALSE(tree_.Read("doc", false, &value));
  EXPECT_EQ(value.etag.find_first_of("\r\n\" "), std::string::npos)
      << value.etag;
  EXPECT_EQ(value.etag.front(), 's');  // the one made from its stat
  EXPECT_EQ(value.content_type, "");
}

TEST_F(FsTreeTest, ADirectoryOfANewerFormatIsRefused) {
  const fs::path dir = root_.parent_path() / "newer";
  fs::create_directories(dir);
  ASSERT_EQ(::setxattr(dir.c_str(), "user.fencepost.format", "3", 1, 0), 0);
  EXPECT_THROW(FsTree{dir.string()}, std::runtime_error);
  // One of the previous release (no format recorded) is marked as 2.
  const fs::path old = root_.parent_path() / "older";
  fs::create_directories(old);
  { FsTree tree{old.string()}; }
  char format[8] = {};
  ASSERT_EQ(
      ::getxattr(old.c_str(), "user.fencepost.format", format, sizeof format),
      1);
  EXPECT_EQ(std::string(format), "2");
}

}  // namespace
}  // namespace fencepost::storage
