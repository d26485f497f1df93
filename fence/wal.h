#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fence/key.h"
#include "fence/token.h"

namespace fencepost::fence {

// One accepted (or observed) fence write as the log keeps it: the fence's
// new state and, for the embedded backend, the value written with it.
struct WalRecord {
  std::uint64_t seq = 0;
  std::string fence;
  // The fence after the write; unset for an observed write that did not
  // move it (observe mode never lowers a fence).
  std::optional<Token> fence_token;
  std::int64_t updated_at_ns = 0;
  // kLease: `key` is a lease's name and `body` its record (EncodeLease),
  // stored in the leases database.
  enum class Op : std::uint8_t { kNone, kPut, kDelete, kLease };
  Op op = Op::kNone;
  std::string key;
  std::string body;
  std::optional<Token> value_token;  // stored with a put's value
  // A put's Content-Type, at most kMaxContentTypeBytes (fence/values.h);
  // empty: none. The value's entity tag is `seq` (TagOf).
  std::string content_type;
  // More records of the same batch follow this one. A batch's records are
  // logged together in one group; recovery drops a batch whose last record
  // is missing (a torn group), so a batch is applied whole or not at all.
  bool batch_continues = false;
};

// The largest record payload the log writes and recovery reads back; a
// longer length in a frame is a torn or stale frame.
inline constexpr std::size_t kMaxRecordPayload = (256u << 20) + 256;
// The largest value a record holds with a key and fence name of up to
// kMaxNameBytes each: no request body the embedded backend accepts may be
// larger, or its acknowledged write would be lost at recovery.
inline constexpr std::size_t kMaxValueBytes =
    kMaxRecordPayload - 42 - 256 - 2 * kMaxNameBytes;
static_assert(kMaxValueBytes == 268433366);  // --max-body's documented cap

// CRC-32C (Castagnoli) of `data`, with SSE 4.2 when the CPU has it.
std::uint32_t Crc32c(std::string_view data);

// Appends `record` in the log's format: the payload's length and CRC-32C
// (4 bytes each, big-endian), then the payload: sequence number, flags
// (fence set, value token present, batch continues, Content-Type present),
// fence token, update time, fence name, operation, value token, key, body
// and, when the flag says so, the Content-Type (1-byte length): every field
// of the record. 42 bytes of it are fixed, and the Content-Type takes at
// most 256; kMaxValueBytes leaves room for them. A record written before
// Content-Types (format 1) is the same without that flag and field.
void EncodeRecord(const WalRecord& record, std::string* out);

// Decodes the records at the start of `bytes`: the longest prefix of intact
// records (length in bounds, CRC matching) whose sequence numbers follow one
// another, the first one being any, less a batch cut short at its end. A
// torn, corrupt or stale record (one left from an earlier lap of a reused
// segment) ends the run.
std::vector<WalRecord> DecodeRun(std::string_view bytes);

// The write-ahead log of one LMDB environment: two preallocated segment
// files, DIR/wal-0 and DIR/wal-1, written in turn from their start. A group
// of records is one pwrite and one fdatasync; overwriting blocks that are
// already allocated and written keeps the sync to the data alone (no size or
// extent change to journal).
//
// The writer switches to the other segment when the current one is full,
// but only once every record in the other segment is applied to LMDB (the
// caller says how far LMDB is applied when it writes); until then the
// current segment grows, so a checkpoint that falls behind holds up no
// write (the committer's bound on unapplied records does), and a segment
// keeps the size its load needed for the laps after. At open, each segment
// yields its run of records (DecodeRun); those above Options::applied_seq
// are kept, after a sync and a second read from the disk itself, for
// recovery to serve and apply. A log whose runs stop short of applied_seq
// throws.
//
// Thread safety: one thread appends (Append, Write); syncs in flight at the
// same time each go through their own SyncFiles. The constructor's
// records are read before it starts.
class Wal {
 public:
  struct Options {
    std::string dir;
    std::size_t segment_bytes = 16u << 20;
    // Records at or below it are in LMDB: recovery checks them (their
    // frames, CRCs and order) but does not keep them.
    std::uint64_t applied_seq = 0;
  };

  // Opens or creates the segments and reads their records. Throws
  // std::runtime_error naming the file when they cannot be used, or when
  // their runs stop short of options.applied_seq.
  explicit Wal(const Options& options);
  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Every intact record found at open, in sequence order.
  const std::vector<WalRecord>& recovered() const { return recovered_; }
  // The highest sequence number the log has held (0 for none).
  std::uint64_t last_seq() const { return last_seq_; }
  // The highest sequence number found at open in the segment the writer
  // overwrites first (the one written less recently): its records must be
  // in LMDB before the first Write.
  std::uint64_t first_overwritten_seq() const {
    return segments_[current_].last_seq;
  }

  // Once every record is applied to LMDB (a clean stop): marks both
  // segments empty, so the next open has nothing to read. Returns 0 or the
  // errno.
  int MarkApplied();
  // Writes one group (its records numbered up to `last_seq`, LMDB applied
  // up to `applied`) and syncs it. Returns 0, or the errno of a failed
  // write or sync: then nothing may be acknowledged, as the sync's failure
  // may have lost the data.
  int Append(std::string_view bytes, std::uint64_t last_seq,
             std::uint64_t applied = UINT64_MAX);
  // Append without its sync, for a writer that overlaps syncs: puts the
  // group in the page cache and says which segment (0 or 1) holds it in
  // `*segment`; a sync thread then makes it durable through its own
  // SyncFiles. Returns 0 or the errno, as Append does.
  int Write(std::string_view bytes, std::uint64_t last_seq,
            std::uint64_t applied, int* segment);
  // Whether a Write of `bytes` with LMDB applied up to `applied` goes to
  // the other segment.
  bool Switches(std::size_t bytes, std::uint64_t applied) const;

  // Its own open file of each segment, for one sync thread. Linux reports a
  // writeback error once per open file: two threads syncing through one
  // shared file could each see success while the other saw the error, and
  // answer writes that were lost.
  class SyncFiles {
   public:
    // Throws std::runtime_error naming the file when one cannot be opened.
    explicit SyncFiles(const Wal& wal);
    ~SyncFiles();
    SyncFiles(const SyncFiles&) = delete;
    SyncFiles& operator=(const SyncFiles&) = delete;
    // fdatasync of segment 0 or 1: everything written to it before the
    // call is durable when it returns 0; otherwise the errno.
    int Sync(int segment) const;
    // The open file of segment 0 or 1, for a sync submitted elsewhere
    // (io_uring) through it.
    int fd(int segment) const { return fds_[segment]; }

   private:
    int fds_[2] = {-1, -1};
  };

 private:
  struct Segment {
    std::string path;
    int fd = -1;
    std::uint64_t size = 0;      // bytes allocated and written
    std::uint64_t last_seq = 0;  // highest sequence number it holds
  };
  // Opens (creating and zero-filling if missing) segment `i`.
  void Open(int i);

  Options options_;
  Segment segments_[2];
  int current_ = 0;
  std::uint64_t offset_ = 0;
  std::uint64_t last_seq_ = 0;
  std::vector<WalRecord> recovered_;
};

}  // namespace fencepost::fence
