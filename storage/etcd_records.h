#pragma once

// The records fencepost keeps in etcd (the class comments of EtcdFences,
// EtcdTurns and EtcdLeaseRecords name their keys), their text, and what a kv
// of etcd's answer holds of them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fence/lease.h"
#include "fence/token.h"
#include "storage/etcd_json.h"

namespace fencepost::storage::etcd {

// A fence: "TOKEN UPDATED_AT_NS" (decimal).
std::string FormatFence(fence::Token token, std::int64_t updated_at_ns);
bool ParseFence(std::string_view text, fence::Token* token,
                std::int64_t* updated_at_ns);

// A hold, the live lease of a fence: "TOKEN DEADLINE_NS NAME_BYTES\n" NAME
// HOLDER.
std::string FormatHold(fence::Token token, std::int64_t deadline_ns,
                       std::string_view name, std::string_view holder);
bool ParseHold(std::string_view text, fence::Token* token,
               std::int64_t* deadline_ns, std::string* name,
               std::string* holder);

// A lease record: a flag byte, '-' or 'n' (its expiry was noticed), then
// fence::EncodeLease's record.
std::string FormatLease(const fence::LeaseRecord& record, bool noticed);
bool ParseLease(std::string_view text, fence::LeaseRecord* record,
                bool* noticed);

// A value: "TOKEN CONTENT-TYPE\n" then the body; "TOKEN\n" when it has no
// Content-Type (as every value was before Content-Types were kept, so the
// records of that release read as they are), "-" for a write without a
// token. A token has no space and a Content-Type no line break:
// FormatValue keeps the Content-Type up to its first CR or LF, and at most
// fence::kMaxContentTypeBytes of it.
std::string FormatValue(std::optional<fence::Token> token,
                        std::string_view content_type, std::string_view body);
bool ParseValue(std::string_view text, std::optional<fence::Token>* token,
                std::string* content_type, std::string* body);

// The entity tag of a value: its key's mod_revision, in decimal. Every
// transaction that puts the key gives it a new, higher one (also one that
// stores the same bytes), and etcd keeps it across restarts.
std::string TagOf(std::int64_t mod_revision);

// etcd counts lease TTLs in whole seconds: `ttl_ms` rounded up, at least 1.
std::int64_t EtcdSeconds(std::uint64_t ttl_ms);

// A fence as a replica last saw it in etcd.
struct Seen {
  std::optional<fence::Token> token;  // nullopt: no record
  std::int64_t updated_at_ns = 0;
  std::int64_t mod_revision = 0;  // 0: no key
};

// A lease as etcd holds it: the hold of its fence, attached to an etcd
// lease.
struct Hold {
  fence::Token token = 0;
  std::int64_t deadline_ns = 0;  // wall clock
  std::string name, holder;
  std::int64_t etcd_lease = 0;
};

// A kv of a fence or a hold as fencepost writes them; false otherwise (a
// hold without an etcd lease is not fencepost's).
bool SeenOf(const Json& kv, Seen* seen);
bool HoldOf(const Json& kv, Hold* hold);

}  // namespace fencepost::storage::etcd
