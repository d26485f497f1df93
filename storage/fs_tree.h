#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "fence/token.h"
#include "fence/write.h"

namespace fencepost::storage {

struct FsValue {
  bool found = false;
  std::string body;  // empty for a HEAD
  std::size_t size = 0;
  std::optional<fence::Token> token;  // from the user.fencepost.token xattr
  std::string etag;                   // see FsTree (Entity tags)
  std::string content_type;  // user.fencepost.content-type; empty: none
};

// The files of the fs: backend: key "a/b/c" is the file DIR/a/b/c, so other
// programs can read them. Keys arrive validated (see fence/key.h); this adds
// what only the file system can say.
//
// Confinement: every path is opened relative to DIR's descriptor one segment
// at a time with O_NOFOLLOW, so no symlink met on the way is followed (400),
// and `..`, absolute paths and NUL cannot occur in a valid key. A segment
// over 255 bytes is 400; a key whose file would be a directory, or whose
// directory is a file, is a collision (409). Reads and deletes of such keys
// find nothing.
//
// Atomicity: a write goes to a temp file `.fencepost-tmp.<random>` in the
// target's directory, which is fsynced, renamed over the target, and the
// directory fsynced: a reader sees the old or the new value, and after a
// crash the file holds one of them (a temp file may be left behind). New
// directories are fsynced into their parents. Keys whose last segment starts
// with `.fencepost-tmp.` are refused (400).
//
// Entity tags: each write stores a new random 64-bit tag in the file's
// user.fencepost.etag attribute, beside the file's inode number, size and
// modification time (and the Content-Type in user.fencepost.content-type).
// The value's tag is that stored tag and the file's change time, while the
// inode, size and modification time still match; so a rewrite in place by
// another program changes it, also one that restores the modification time.
// A file without a stored tag that matches (written by another program, or
// before entity tags) has a tag made from everything fstat says of it
// (device, inode, size, modification and change times), which a write by
// fencepost replaces. The
// directory's user.fencepost.format attribute records the format (2); a
// directory without one (format 1) is marked at open, its files kept as
// they are; a newer format is refused.
//
// Thread safety: all methods may run concurrently; callers serialize writes
// to one key (the backend holds the key's fence).
class FsTree {
 public:
  // Opens DIR, creating it if missing, checks that a file can be made in
  // it, and, when `exclusive`, locks it (flock on DIR) for this object's
  // life. (Not exclusive: replicas sharing DIR, whose writes to one fence
  // are ordered by turns in the shared fence store.)
  // Throws std::runtime_error naming the reason.
  explicit FsTree(const std::string& dir, bool exclusive = true);
  ~FsTree();
  FsTree(const FsTree&) = delete;
  FsTree& operator=(const FsTree&) = delete;

  // What a write or delete of `key` would meet, without changing anything:
  // 400-class errors and collisions, so a refused write leaves the fence as
  // it was.
  std::error_code Check(std::string_view key, bool remove) const;
  std::error_code Read(std::string_view key, bool head, FsValue* value) const;
  // Whether `key` has a value now, and its tag.
  std::error_code Current(std::string_view key, fence::ValueNow* now) const;
  // Writes the value with a new tag (into `*etag`).
  std::error_code Write(std::string_view key, std::string_view body,
                        std::optional<fence::Token> token,
                        std::string_view content_type, bool* created,
                        std::string* etag) const;
  // Removes the file; a missing file (or a directory) is not an error.
  std::error_code Remove(std::string_view key) const;
  // Whether DIR is still there and a file can still be made in it.
  bool Usable() const;

 private:
  // Creates and removes a reserved file in DIR; 0 or the errno.
  int ProbeWrite() const;
  // Checks and records DIR's format (see Entity tags); throws when newer.
  void CheckFormat(const std::string& dir) const;

  int dir_fd_ = -1;
};

}  // namespace fencepost::storage
