#include "tests/testing/powercut_fs.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include "tests/testing/temp_dir.h"

namespace fencepost::testing {
namespace {

// Debian's python3-fusepy is installed for /usr/bin/python3, which may not be
// the python3 first on PATH.
std::string Python() {
  return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3"
                                                 : "python3";
}

bool Mounted(const std::string& mountpoint) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    if (point == mountpoint &&
        line.find(" - fuse.powercut ") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// Detaches the mount whatever state the file system is in (lazily, so a
// process still using it cannot keep it).
void Unmount(const std::string& mountpoint) {
  if (!Mounted(mountpoint)) return;
  const std::string quiet = " '" + mountpoint + "' >/dev/null 2>&1";
  if (std::system(("fusermount -u -z" + quiet).c_str()) != 0) {
    const int status = std::system(("umount -l" + quiet).c_str());
    if (status != 0) std::cerr << "cannot unmount " << mountpoint << "\n";
  }
}

std::vector<std::string> Argv(const std::string& dir,
                              const std::string& mountpoint,
                              const PowercutFsOptions& options) {
  std::vector<std::string> argv = {
      Python(),
      std::string(FENCEPOST_SOURCE_DIR) + "/tests/reliability/powercut_fs.py",
      "--control", dir + "/control"};
  if (options.lying == "1") argv.push_back("--ignore-sync");
  if (options.lying == "log") argv.push_back("--ignore-log-syncs");
  if (options.journal) {
    argv.insert(argv.end(), {"--journal", dir + "/journal"});
  }
  argv.push_back(dir + "/root");
  argv.push_back(mountpoint);
  return argv;
}

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

bool IsLogSegment(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string_view name =
      std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1);
  return name.size() > 4 && name.substr(0, 4) == "wal-" &&
         name.find_first_not_of("0123456789", 4) == std::string_view::npos;
}

std::vector<std::string> SwitchesAheadOfTheirSync(
    const std::vector<FsEvent>& journal, std::size_t from, std::size_t to,
    int* switches) {
  to = std::min(to, journal.size());
  // Each segment's successful syncs, as (begin, end) journal indexes; the
  // syncs of one file do not overlap (the kernel holds its inode's lock),
  // so each end pairs with the earliest open begin.
  std::map<std::string, std::vector<std::pair<std::size_t, std::size_t>>>
      synced;
  std::map<std::string, std::deque<std::size_t>> open;
  // The directory's last written segment, and each segment's last write.
  std::map<std::string, std::string> last_file;
  std::map<std::string, std::size_t> last_write;
  std::vector<std::string> early;
  if (switches != nullptr) *switches = 0;
  for (std::size_t i = from; i < to; ++i) {
    const FsEvent& e = journal[i];
    if (!IsLogSegment(e.path)) continue;
    if (e.kind == FsEvent::Kind::kFsyncBegin) {
      open[e.path].push_back(i);
      continue;
    }
    if (e.kind == FsEvent::Kind::kFsyncEnd) {
      if (open[e.path].empty()) continue;
      const std::size_t began = open[e.path].front();
      open[e.path].pop_front();
      if (e.result == "0") synced[e.path].emplace_back(began, i);
      continue;
    }
    const std::string dir = e.path.substr(0, e.path.rfind('/'));
    const std::string left = last_file[dir];
    last_file[dir] = e.path;
    last_write[e.path] = i;
    if (left.empty() || left == e.path) continue;
    if (switches != nullptr) ++*switches;
    const std::size_t wrote = last_write[left];
    bool durable = false;
    for (const auto& [began, ended] : synced[left]) {
      durable |= began > wrote && ended < i;
    }
    if (!durable) {
      early.push_back("journal line " + std::to_string(i) + ": a write to " +
                      e.path + " at offset " + std::to_string(e.offset) +
                      " before a sync of " + left +
                      " had ended that began after its last write (line " +
                      std::to_string(wrote) + ")");
    }
  }
  return early;
}

std::string PowercutFsUnsupported() {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) return "no usable /dev/fuse";
  const std::string probe =
      Python() + " -c 'from fusepy import FUSE' >/dev/null 2>&1 || " +
      Python() + " -c 'from fuse import FUSE' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    return "no fusepy for " + Python() +
           " (apt-get install -y python3-fusepy fuse)";
  }
  return "";
}

PowercutFs::PowercutFs(const std::string& dir, const PowercutFsOptions& options)
    : dir_(dir) {
  std::filesystem::create_directories(dir + "/root");
  std::filesystem::create_directories(dir + "/mnt");
  mountpoint_ = std::filesystem::canonical(dir + "/mnt").string();
  fs_ = std::make_unique<ChildProcess>(Argv(dir, mountpoint_, options),
                                       dir + "/powercut_fs.log");
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!Mounted(mountpoint_)) {
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string log = Log();
      Unmount(mountpoint_);
      fs_.reset();
      throw std::runtime_error("powercut_fs.py did not mount " + mountpoint_ +
                               ": " + log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

PowercutFs::~PowercutFs() {
  Unmount(mountpoint_);
  fs_.reset();
}

std::uint64_t PowercutFs::Cut() {
  // The kernel's dirty pages of the mount (an mmap's, LMDB's map) go to the
  // file system first, as plain writes, so the cut drops them too unless
  // they were synced: a power cut loses the page cache as well.
  const int root = ::open(mountpoint_.c_str(), O_RDONLY | O_DIRECTORY);
  if (root < 0 || ::syncfs(root) != 0) {
    if (root >= 0) ::close(root);
    throw std::runtime_error("cannot write back the mount's dirty pages");
  }
  ::close(root);
  const std::string kLine = "powercut: dropped ";
  const std::size_t before = Count(Log(), kLine);
  if (::kill(fs_->pid(), SIGUSR1) != 0) {
    throw std::runtime_error("cannot signal powercut_fs.py");
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Count(Log(), kLine) == before) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("powercut_fs.py did not cut: " + Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string log = Log();
  return std::stoull(log.substr(log.rfind(kLine) + kLine.size()));
}

std::string PowercutFs::Log() const {
  return ReadFile(dir_ + "/powercut_fs.log");
}

void PowercutFs::Control(const std::string& rules) {
  // A new file renamed over the old one: the file system sees a new inode,
  // never a half-written file.
  const std::string next = dir_ + "/control.next";
  std::ofstream(next) << rules;
  std::filesystem::rename(next, dir_ + "/control");
}

void PowercutFs::FailSyncs(const std::string& glob, int from,
                           const std::string& error) {
  Control("fail " + glob + " " + std::to_string(from) + " " + error + "\n");
}

std::vector<FsEvent> PowercutFs::Journal() const {
  std::vector<FsEvent> events;
  std::ifstream in(dir_ + "/journal");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    FsEvent e;
    std::string kind;
    fields >> e.ns >> kind >> e.path;
    if (kind == "write") {
      e.kind = FsEvent::Kind::kWrite;
      fields >> e.offset >> e.length;
    } else if (kind == "fsync-begin") {
      e.kind = FsEvent::Kind::kFsyncBegin;
    } else if (kind == "fsync-end") {
      e.kind = FsEvent::Kind::kFsyncEnd;
      fields >> e.result;
    } else {
      throw std::runtime_error("powercut_fs.py's journal: " + line);
    }
    if (!fields) throw std::runtime_error("powercut_fs.py's journal: " + line);
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace fencepost::testing
