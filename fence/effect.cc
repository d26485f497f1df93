#include "fence/effect.h"

#include <algorithm>

#include "codec/percent.h"
#include "fence/big_endian.h"

namespace fencepost::fence {
namespace {

// version (1), state (1), token, created, deadline (8 each), status (2),
// the lengths of the fence, hash and content type (2 each), then those
// three and the body.
constexpr std::size_t kHeader = 2 + 3 * 8 + 2 + 3 * 2;
constexpr char kVersion = 1;

bool IsState(char c) {
  using State = EffectRecord::State;
  return c == static_cast<char>(State::kInFlight) ||
         c == static_cast<char>(State::kDone) ||
         c == static_cast<char>(State::kUnknown) ||
         c == static_cast<char>(State::kNotSent);
}

}  // namespace

std::string EncodeEffect(const EffectRecord& record) {
  std::string out(kHeader, '\0');
  out[0] = kVersion;
  out[1] = static_cast<char>(record.state);
  StoreBigEndian(out.data() + 2, record.token, 8);
  StoreBigEndian(out.data() + 10,
                 static_cast<std::uint64_t>(record.created_at_ns), 8);
  StoreBigEndian(out.data() + 18,
                 static_cast<std::uint64_t>(record.deadline_ns), 8);
  StoreBigEndian(out.data() + 26, static_cast<std::uint64_t>(record.status), 2);
  StoreBigEndian(out.data() + 28, record.fence.size(), 2);
  StoreBigEndian(out.data() + 30, record.request_hash.size(), 2);
  StoreBigEndian(out.data() + 32, record.content_type.size(), 2);
  out += record.fence;
  out += record.request_hash;
  out += record.content_type;
  out += record.body;
  return out;
}

bool DecodeEffect(std::string_view bytes, EffectRecord* record) {
  if (bytes.size() < kHeader || bytes[0] != kVersion || !IsState(bytes[1])) {
    return false;
  }
  const char* p = bytes.data();
  const std::size_t fence_size = LoadBigEndian(p + 28, 2);
  const std::size_t hash_size = LoadBigEndian(p + 30, 2);
  const std::size_t type_size = LoadBigEndian(p + 32, 2);
  if (bytes.size() < kHeader + fence_size + hash_size + type_size) {
    return false;
  }
  record->state = static_cast<EffectRecord::State>(p[1]);
  record->token = LoadBigEndian(p + 2, 8);
  record->created_at_ns = static_cast<std::int64_t>(LoadBigEndian(p + 10, 8));
  record->deadline_ns = static_cast<std::int64_t>(LoadBigEndian(p + 18, 8));
  record->status = static_cast<int>(LoadBigEndian(p + 26, 2));
  std::string_view rest = bytes.substr(kHeader);
  record->fence = std::string(rest.substr(0, fence_size));
  rest.remove_prefix(fence_size);
  record->request_hash = std::string(rest.substr(0, hash_size));
  rest.remove_prefix(hash_size);
  record->content_type = std::string(rest.substr(0, type_size));
  rest.remove_prefix(type_size);
  record->body = std::string(rest);
  return true;
}

bool InProgress(const EffectRecord& record, bool in_flight_here,
                std::int64_t now_ns) {
  return record.state == EffectRecord::State::kInFlight &&
         (in_flight_here || now_ns < record.deadline_ns);
}

EffectVerdict DecideEffect(const EffectRecord* record,
                           std::string_view request_hash, bool in_flight_here,
                           std::int64_t now_ns) {
  using State = EffectRecord::State;
  if (record == nullptr) return EffectVerdict::kSend;
  if (record->request_hash != request_hash) return EffectVerdict::kKeyReused;
  switch (record->state) {
    case State::kNotSent:
      return EffectVerdict::kSend;
    case State::kDone:
      return EffectVerdict::kReplay;
    case State::kInFlight:
      return InProgress(*record, in_flight_here, now_ns)
                 ? EffectVerdict::kInProgress
                 : EffectVerdict::kOutcomeUnknown;
    case State::kUnknown:
      break;
  }
  return EffectVerdict::kOutcomeUnknown;
}

bool IsIdempotencyKey(std::string_view key) {
  return !key.empty() && key.size() <= 255 &&
         std::all_of(key.begin(), key.end(),
                     [](char c) { return c > ' ' && c < 0x7f; });
}

bool IsEffectTargetName(std::string_view name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
         });
}

std::string EffectRecordKey(std::string_view target, std::string_view id) {
  std::string key(kEffectRecordPrefix);
  key += target;
  key += '/';
  key += id;
  return key;
}

bool ParseEffectRecordKey(std::string_view key, std::string* target,
                          std::string* id) {
  if (!key.starts_with(kEffectRecordPrefix)) return false;
  key.remove_prefix(kEffectRecordPrefix.size());
  const std::size_t slash = key.find('/');
  if (slash == std::string_view::npos ||
      !IsEffectTargetName(key.substr(0, slash)) ||
      !IsIdempotencyKey(key.substr(slash + 1))) {
    return false;
  }
  *target = std::string(key.substr(0, slash));
  *id = std::string(key.substr(slash + 1));
  return true;
}

bool StaysUnderTarget(std::string_view rest) {
  if (rest.empty()) return true;
  if (rest.front() != '/') return false;
  rest.remove_prefix(1);
  for (;;) {
    const std::size_t slash = rest.find('/');
    const auto segment = codec::PercentDecode(rest.substr(0, slash),
                                              codec::PercentMode::kStrict);
    if (!segment) return false;
    const bool last = slash == std::string_view::npos;
    const std::string_view name =
        std::string_view(*segment).substr(0, segment->find(';'));
    if ((segment->empty() && !last) ||
        segment->find_first_of("/\\") != std::string::npos || name == "." ||
        name == "..") {
      return false;
    }
    if (last) return true;
    rest.remove_prefix(slash + 1);
  }
}

std::string EffectRequestText(std::string_view method, std::string_view fence,
                              std::string_view rest, std::string_view query,
                              std::string_view body) {
  std::string text;
  for (std::string_view part : {method, fence, rest, query, body}) {
    text += std::to_string(part.size());
    text += ':';
    text += part;
  }
  return text;
}

std::string_view EffectStateName(const EffectRecord& record,
                                 bool in_flight_here, std::int64_t now_ns) {
  using State = EffectRecord::State;
  switch (record.state) {
    case State::kInFlight:
      return InProgress(record, in_flight_here, now_ns) ? "in-flight"
                                                        : "unknown";
    case State::kDone:
      return "done";
    case State::kNotSent:
      return "not-sent";
    case State::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace fencepost::fence
