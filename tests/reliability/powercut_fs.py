#!/usr/bin/python3
"""powercut_fs: a FUSE file system that loses unsynced writes on demand.

A model of LazyFS (a FUSE file system that drops unsynced data), small enough to read
in one sitting, for the power-cut test (tests/reliability/power_loss_test.cc).

    powercut_fs.py [--ignore-sync | --ignore-log-syncs] [--journal FILE]
                   [--control FILE] ROOT MOUNTPOINT
                                          (foreground; stop with SIGTERM)

MOUNTPOINT shows ROOT's tree. What it models:

- File data given to write() (and dirty pages of a shared writable mmap,
  which the kernel writes back as writes) is kept in memory, per file (per
  backing inode, so a rename keeps it), and served to reads, including the
  page faults of an mmap. Only fsync/fdatasync of that file (any descriptor
  of it), or a write on a descriptor opened with O_SYNC/O_DSYNC (LMDB's
  meta page), writes all of the file's unsynced data to the backing file and
  os.fsync()s it. close() (FUSE `flush`) and
  `release` do NOT sync.
- SIGUSR1 is a power cut: every unsynced write of every file is dropped, a
  line "powercut: dropped N writes" goes to stderr, and the file system keeps
  serving, so a program can be restarted on it to see what survived.
  Whoever holds a file open across a "power cut" may still see its old pages
  in the kernel's cache; a file opened afterwards does not (the mount does
  not use keep_cache, so every open drops the inode's cached pages, and
  attr_timeout=0 makes sizes come from here).

The mount must not use direct_io: the kernel then refuses MAP_SHARED mmaps
(ENODEV; libfuse2 cannot ask for FUSE_DIRECT_IO_ALLOW_MMAP), and LMDB's
shared mmaps of data.mdb and lock.mdb need them. In page-cache mode both
work, pthread mutexes in lock.mdb included (checked on Linux 6.18, libfuse
2.9.9).

--ignore-sync makes it a disk that lies: fsync succeeds and syncs nothing,
so a cut drops everything written since the mount. A test run with it must
fail; that shows the test can see a missing sync. --ignore-log-syncs lies
only about fencepost's write-ahead log (files named wal-*), and only after
each one's first sync (the one that makes a new segment whole): the log's
group syncs are missing and nothing else is, so what fails is the history
check, not the start.

--journal FILE appends one line per event to FILE as it happens (one
write(2) per line, so a reader sees every line the moment its event is done):

    NS write PATH OFFSET LENGTH      a write() reached this file system
    NS fsync-begin PATH              an fsync/fdatasync of the file arrived
    NS fsync-end PATH RESULT         ... and is answered: RESULT is 0 or an
                                     errno's name (EIO); logged before the
                                     reply goes back to the kernel

NS is time.time_ns(), CLOCK_REALTIME in nanoseconds, the clock of
`strace -ttt` and `strace --timestamps=unix,ns`, so the journal joins with a
trace of the same run; lines are in the order of their NS. PATH is the
file's path from the mount's root (/data/shard-0/wal-0; fencepost's tests
use no spaces in names). Whatever issued the call (a syscall, an io_uring
write or IORING_OP_FSYNC, the kernel's writeback of an mmap) is the same
event here: the journal shows what the disk was asked for, not how.

--control FILE names a file of rules, one per line, read again whenever
FILE changes (write it elsewhere and rename it over FILE); a missing or
empty FILE means no rule. Each (re)reading starts the rules' counts again:

    fail GLOB N ERRNO    the N-th and every later fsync/fdatasync of a file
                         whose PATH matches GLOB (fnmatch: */shard-0/wal-0)
                         fails with ERRNO (EIO, ENOSPC) and syncs nothing,
                         so its unsynced writes stay unsynced; each such
                         failure is logged to stderr ("... (injected)")
    delay GLOB MS        each fsync/fdatasync of a matching file waits MS
                         milliseconds (after its fsync-begin) before it syncs

The rules apply to fsync and fdatasync calls only, not to O_SYNC writes.
Lines starting with # are comments.

Simplifications (what a real power cut can do and this model cannot):

- Metadata is durable at once: create, mkdir, rename, unlink, link,
  symlink, truncate, chmod, chown, utimens and extended attributes go
  straight to ROOT. A file
  created and never synced survives the cut (with its synced bytes); a
  rename or unlink is never undone; a truncate is never undone, and a file
  extended by truncate keeps its (zero) size.
- A cut drops all of a file's unsynced writes, never a part of them: no
  torn writes, no reordering among unsynced writes, no sector-level
  corruption.
- Only writes that reached this process are dropped. Dirty mmap pages the
  kernel has not written back yet stay in the kernel's page cache, unless
  the cut is preceded by a syncfs(2) of the mount (which writes them here
  and syncs nothing, as FUSE_SYNCFS goes unanswered): the harness's Cut
  (tests/testing/powercut_fs.h) does that, so LMDB's map is cut too.
- The "disk" is ROOT's file system, which is not itself cut: a write that
  was os.fsync()ed here counts as durable, and so does ROOT's page cache.

Needs Debian's python3-fusepy (module `fusepy`; the PyPI package names it
`fuse`) and libfuse2 (package `fuse`).
"""

import bisect
import errno
import fcntl
import fnmatch
import os
import signal
import sys
import threading
import time

try:
    from fusepy import FUSE, FuseOSError, Operations
except ImportError:  # fusepy from PyPI
    from fuse import FUSE, FuseOSError, Operations


O_DIRECT = getattr(os, 'O_DIRECT', 0)


def log(text):
    print(text, file=sys.stderr, flush=True)


class Unsynced:
    """One file's writes not yet synced: sorted, disjoint extents."""

    def __init__(self):
        self.lock = threading.Lock()
        self.starts = []  # extent start offsets, sorted
        self.datas = []  # bytearray per extent
        self.writes = 0  # write() calls since the last sync
        self.bytes = 0  # bytes written since the last sync

    def end(self):
        return self.starts[-1] + len(self.datas[-1]) if self.starts else 0

    def add(self, offset, data):
        end = offset + len(data)
        self.writes += 1
        self.bytes += len(data)
        starts, datas = self.starts, self.datas
        # Extents [i, j) overlap or touch [offset, end).
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0 or starts[i] + len(datas[i]) < offset:
            i += 1
        j = bisect.bisect_right(starts, end)
        if i == j:
            starts.insert(i, offset)
            datas.insert(i, bytearray(data))
            return
        first_start = starts[i]
        if j - i == 1 and first_start <= offset and \
                end <= first_start + len(datas[i]):
            datas[i][offset - first_start:end - first_start] = data
            return
        last_start, last = starts[j - 1], datas[j - 1]
        tail = last[end - last_start:] if last_start + len(last) > end else b''
        if first_start <= offset:
            buf = datas[i]
            del buf[offset - first_start:]
            buf += data
        else:
            first_start, buf = offset, bytearray(data)
        buf += tail
        starts[i:j] = [first_start]
        datas[i:j] = [buf]

    def overlay(self, buf, offset):
        """Copies the extents over buf, which holds the file from offset."""
        end = offset + len(buf)
        k = max(0, bisect.bisect_right(self.starts, offset) - 1)
        while k < len(self.starts) and self.starts[k] < end:
            s, d = self.starts[k], self.datas[k]
            lo, hi = max(s, offset), min(s + len(d), end)
            if lo < hi:
                buf[lo - offset:hi - offset] = d[lo - s:hi - s]
            k += 1

    def clip(self, length):
        """A truncate to length: drops what lies at or beyond it."""
        k = bisect.bisect_left(self.starts, length)
        del self.starts[k:], self.datas[k:]
        if self.starts and self.end() > length:
            del self.datas[-1][length - self.starts[-1]:]

    def clear(self):
        self.starts, self.datas = [], []
        self.writes = self.bytes = 0


class Journal:
    """The --journal file: one line per event, in time order."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND
                          | os.O_CLOEXEC, 0o644) if path else None

    def add(self, *fields):
        if self.fd is None:
            return
        with self.lock:  # the time is taken inside: lines keep its order
            line = '%d %s\n' % (time.time_ns(), ' '.join(map(str, fields)))
            os.write(self.fd, line.encode('utf-8', 'surrogateescape'))


class Control:
    """The --control file's rules (see the top of this file)."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.seen = None  # (st_ino, st_size, st_mtime_ns) of the rules read
        self.fails = []  # [glob, from, errno, calls so far]
        self.delays = []  # (glob, seconds)

    def reload(self):
        """Reads the rules again if the file changed. Call with lock held."""
        try:
            st = os.stat(self.path)
            seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            seen = None
        if seen == self.seen:
            return
        self.seen, self.fails, self.delays = seen, [], []
        try:
            with open(self.path) as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            words = line.split()
            if not words or words[0].startswith('#'):
                continue
            if words[0] == 'fail' and len(words) == 4:
                self.fails.append([words[1], int(words[2]),
                                   getattr(errno, words[3]), 0])
            elif words[0] == 'delay' and len(words) == 3:
                self.delays.append((words[1], int(words[2]) / 1000.0))
            else:
                log('powercut: ignoring control line %r' % line)
        log('powercut: control: %d fail and %d delay rules' %
            (len(self.fails), len(self.delays)))

    def on_sync(self, path):
        """An fsync of path: (seconds to wait, errno to fail with or 0)."""
        if not self.path:
            return 0, 0
        with self.lock:
            self.reload()
            wait = sum(s for g, s in self.delays if fnmatch.fnmatch(path, g))
            error = 0
            for rule in self.fails:
                if fnmatch.fnmatch(path, rule[0]):
                    rule[3] += 1
                    if not error and rule[3] >= rule[1]:
                        error = rule[2]
            return wait, error


class PowercutFS(Operations):
    use_ns = True

    def __init__(self, root, ignore_sync=False, ignore_log_syncs=False,
                 journal=None, control=None):
        self.root = os.path.realpath(root)
        self.journal = Journal(journal)
        self.control = Control(control)
        self.ignore_sync = ignore_sync
        self.ignore_log_syncs = ignore_log_syncs
        self.synced_logs = set()  # keys of wal-* files synced once
        self.table_lock = threading.Lock()
        self.files = {}  # (st_dev, st_ino) of the backing file -> Unsynced
        self.handles = {}  # fh -> (key, open flags)
        self.stats = {'writes': 0, 'bytes': 0, 'syncs': 0, 'dropped': 0}

    # -- helpers --------------------------------------------------------------

    def full(self, path):
        return os.path.join(self.root, path.lstrip('/'))

    def unsynced(self, key, create=False):
        with self.table_lock:
            u = self.files.get(key)
            if u is None and create:
                u = self.files[key] = Unsynced()
            return u

    def forget(self, full):
        """The file at full is about to lose a name: if it is its last, its
        unsynced data goes with it (and its inode number may be reused)."""
        try:
            st = os.lstat(full)
        except OSError:
            return None
        return (st.st_dev, st.st_ino) if st.st_nlink <= 1 else None

    def drop(self, key):
        if key is not None:
            with self.table_lock:
                self.files.pop(key, None)

    def sync(self, key, fd, path):
        """fsync: the file's unsynced writes go to ROOT, then os.fsync."""
        if self.ignore_sync:
            return
        if self.ignore_log_syncs and os.path.basename(path).startswith('wal-'):
            with self.table_lock:
                if key in self.synced_logs:
                    return
                self.synced_logs.add(key)
        u = self.unsynced(key)
        if u is None:
            os.fsync(fd)
            return
        with u.lock:
            if u.starts:
                self.write_back(u, fd)
            os.fsync(fd)
            u.clear()
        with self.table_lock:
            self.stats['syncs'] += 1

    @staticmethod
    def write_back(u, fd):
        for start, data in zip(u.starts, u.datas):
            view = memoryview(data)
            done = 0
            while done < len(view):
                done += os.pwrite(fd, view[done:], start + done)

    def powercut(self):
        with self.table_lock:
            files = list(self.files.values())
        writes = nbytes = nfiles = 0
        for u in files:
            with u.lock:
                if u.writes or u.starts:
                    nfiles += 1
                writes += u.writes
                nbytes += u.bytes
                u.clear()
        with self.table_lock:
            self.stats['dropped'] += writes
        log('powercut: dropped %d writes' % writes)
        log('powercut: (%d bytes in %d files; %d writes, %d syncs so far)' %
            (nbytes, nfiles, self.stats['writes'], self.stats['syncs']))

    # -- life -----------------------------------------------------------------

    def init(self, path):
        log('powercut: serving %s%s' % (
            self.root, ' (ignoring every sync)' if self.ignore_sync else
            ' (ignoring the log\'s syncs)' if self.ignore_log_syncs else ''))

    def destroy(self, path):
        log('powercut: unmounted (%d writes, %d syncs, %d writes dropped)' %
            (self.stats['writes'], self.stats['syncs'], self.stats['dropped']))

    # -- metadata: straight to ROOT -------------------------------------------

    def getattr(self, path, fip=None):
        if fip:  # fgetattr: a fuse_file_info (a NULL pointer is false)
            st = os.fstat(fip.fh)
        else:
            st = os.lstat(self.full(path))
        attrs = {k: getattr(st, k) for k in (
            'st_mode', 'st_nlink', 'st_uid', 'st_gid', 'st_size', 'st_blocks',
            'st_ino', 'st_dev', 'st_rdev', 'st_blksize')}
        attrs['st_atime'] = st.st_atime_ns
        attrs['st_mtime'] = st.st_mtime_ns
        attrs['st_ctime'] = st.st_ctime_ns
        u = self.unsynced((st.st_dev, st.st_ino))
        if u is not None:
            with u.lock:
                attrs['st_size'] = max(st.st_size, u.end())
        return attrs

    def access(self, path, amode):
        if not os.access(self.full(path), amode):
            raise FuseOSError(errno.EACCES)

    def readlink(self, path):
        return os.readlink(self.full(path))

    def readdir(self, path, fip):
        return ['.', '..'] + os.listdir(self.full(path))

    def mkdir(self, path, mode):
        os.mkdir(self.full(path), mode)

    def rmdir(self, path):
        os.rmdir(self.full(path))

    def mknod(self, path, mode, dev):
        os.mknod(self.full(path), mode, dev)

    def symlink(self, target, source):
        os.symlink(source, self.full(target))

    def link(self, target, source):
        os.link(self.full(source), self.full(target))

    def unlink(self, path):
        key = self.forget(self.full(path))
        os.unlink(self.full(path))
        self.drop(key)

    def rename(self, old, new):
        key = self.forget(self.full(new))
        try:
            src = os.lstat(self.full(old))
            if key == (src.st_dev, src.st_ino):
                key = None  # two names of one file: nothing dies
        except OSError:
            pass
        os.rename(self.full(old), self.full(new))
        self.drop(key)

    def chmod(self, path, mode):
        os.chmod(self.full(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self.full(path), uid, gid)

    # Extended attributes (the fs: backend keeps a value's token in one)
    # are metadata too.

    def getxattr(self, path, name, position=0):
        return os.getxattr(self.full(path), name, follow_symlinks=False)

    def setxattr(self, path, name, value, options, position=0):
        os.setxattr(self.full(path), name, value, options,
                    follow_symlinks=False)

    def listxattr(self, path):
        return os.listxattr(self.full(path), follow_symlinks=False)

    def removexattr(self, path, name):
        os.removexattr(self.full(path), name, follow_symlinks=False)

    def utimens(self, path, times=None):
        if times is None:
            os.utime(self.full(path))
        else:
            os.utime(self.full(path), ns=(int(times[0]), int(times[1])))

    def statfs(self, path):
        sv = os.statvfs(self.full(path))
        return {k: getattr(sv, k) for k in (
            'f_bavail', 'f_bfree', 'f_blocks', 'f_bsize', 'f_favail',
            'f_ffree', 'f_files', 'f_flag', 'f_frsize', 'f_namemax')}

    def truncate(self, path, length, fip=None):
        if fip:  # ftruncate
            os.ftruncate(fip.fh, length)
            st = os.fstat(fip.fh)
        else:
            os.truncate(self.full(path), length)
            st = os.stat(self.full(path))
        u = self.unsynced((st.st_dev, st.st_ino))
        if u is not None:
            with u.lock:
                u.clip(length)

    def fsyncdir(self, path, datasync, fip):
        fd = os.open(self.full(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- files ----------------------------------------------------------------

    # Flags this side handles (or that must not reach the backing descriptor:
    # O_APPEND would make pwrite ignore its offset).
    STRIP = (os.O_ACCMODE | os.O_APPEND | os.O_TRUNC | os.O_CREAT | os.O_EXCL
             | os.O_SYNC | os.O_DSYNC | O_DIRECT
             | os.O_NOCTTY)

    def _open(self, path, fi, extra, mode=0o644):
        full = self.full(path)
        rest = (fi.flags & ~self.STRIP) | extra | os.O_CLOEXEC
        try:
            # Read-write whatever was asked: a sync may come on any descriptor.
            fd = os.open(full, rest | os.O_RDWR, mode)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EISDIR,
                               errno.EROFS, errno.ETXTBSY):
                raise
            fd = os.open(full, rest | (fi.flags & os.O_ACCMODE), mode)
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with self.table_lock:
            self.handles[fd] = (key, fi.flags)
        fi.fh = fd
        return key, fd

    def create(self, path, mode, fi):
        existed = os.path.lexists(self.full(path))
        key, fd = self._open(path, fi, os.O_CREAT | (fi.flags & os.O_EXCL),
                             mode)
        if not existed:
            self.drop(key)  # a reused inode number: nothing of it is ours
        if fi.flags & os.O_TRUNC:
            self.truncate(path, 0, fi)
        return 0

    def open(self, path, fi):
        self._open(path, fi, 0)
        if fi.flags & os.O_TRUNC:
            self.truncate(path, 0, fi)
        return 0

    def read(self, path, size, offset, fi):
        fd = fi.fh
        key = self.handles[fd][0]
        u = self.unsynced(key)
        if u is None:
            return os.pread(fd, size, offset)
        with u.lock:
            if not u.starts:
                return os.pread(fd, size, offset)
            length = max(os.fstat(fd).st_size, u.end())
            size = max(0, min(size, length - offset))
            buf = bytearray(size)
            have = os.pread(fd, size, offset)
            buf[:len(have)] = have  # beyond the backing file: zeros
            u.overlay(buf, offset)
            return bytes(buf)

    def write(self, path, data, offset, fi):
        fd = fi.fh
        key, flags = self.handles[fd]
        u = self.unsynced(key, create=True)
        with u.lock:
            u.add(offset, data)
        with self.table_lock:
            self.stats['writes'] += 1
            self.stats['bytes'] += len(data)
        self.journal.add('write', path, offset, len(data))
        if flags & (os.O_SYNC | os.O_DSYNC):
            self.sync(key, fd, path)
        return len(data)

    def flush(self, path, fi):
        return 0  # close() is not a sync

    def fsync(self, path, datasync, fi):
        self.journal.add('fsync-begin', path)
        result = 0
        try:
            wait, error = self.control.on_sync(path)
            if wait:
                time.sleep(wait)
            if error:
                log('powercut: fsync of %s failed with %s (injected)' %
                    (path, errno.errorcode[error]))
                raise FuseOSError(error)
            return self.fsync_file(path, fi)
        except OSError as e:
            result = errno.errorcode.get(e.errno, e.errno)
            raise
        finally:  # before fusepy replies to the kernel
            self.journal.add('fsync-end', path, result)

    def fsync_file(self, path, fi):
        fd = fi.fh
        key = self.handles[fd][0]
        if self.read_only(fd):
            # The descriptor may be read-only (fsync on O_RDONLY is legal):
            # write back through a writable one of the same inode.
            try:
                wfd = os.open('/proc/self/fd/%d' % fd, os.O_WRONLY)
            except OSError:
                wfd = fd
            try:
                self.sync(key, wfd, path)
            finally:
                if wfd != fd:
                    os.close(wfd)
            return 0
        self.sync(key, fd, path)
        return 0

    @staticmethod
    def read_only(fd):
        return (fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE) == os.O_RDONLY

    def release(self, path, fi):
        with self.table_lock:
            self.handles.pop(fi.fh, None)
        os.close(fi.fh)
        return 0


def main():
    args = sys.argv[1:]
    ignore_sync = '--ignore-sync' in args
    ignore_log_syncs = '--ignore-log-syncs' in args
    args = [a for a in args if a not in ('--ignore-sync', '--ignore-log-syncs')]
    files = {'--journal': None, '--control': None}
    for flag in files:
        if flag in args[:-1]:
            at = args.index(flag)
            files[flag] = os.path.abspath(args[at + 1])
            del args[at:at + 2]
    if len(args) != 2:
        sys.exit('usage: powercut_fs.py [--ignore-sync | --ignore-log-syncs] '
                 '[--journal FILE] [--control FILE] ROOT MOUNTPOINT')
    root, mountpoint = args
    os.umask(0)  # the kernel has applied the caller's umask to every mode
    fs = PowercutFS(root, ignore_sync, ignore_log_syncs, files['--journal'],
                    files['--control'])

    # The power cut comes from a thread in sigwait: a Python signal handler
    # would only run on the main thread, which sits inside fuse_main. That
    # thread blocks every signal (so SIGTERM and SIGINT reach libfuse's
    # handlers on the main thread); the main thread blocks SIGUSR1 alone, and
    # libfuse's workers block everything.
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())

    def waiter():
        while True:
            signal.sigwait({signal.SIGUSR1})
            fs.powercut()

    threading.Thread(target=waiter, daemon=True).start()
    signal.pthread_sigmask(signal.SIG_SETMASK, {signal.SIGUSR1})

    FUSE(fs, mountpoint, raw_fi=True, foreground=True, fsname='powercut',
         subtype='powercut', big_writes=True, max_write=131072,
         attr_timeout=0, entry_timeout=0, negative_timeout=0)


if __name__ == '__main__':
    main()
