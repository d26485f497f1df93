#pragma once

// Reading etcd's JSON answers (its gRPC gateway's encoding): 64-bit
// integers spelled as strings, bytes in base64, and fields at their zero
// value left out (an empty range has no "kvs", a failed transaction no
// "succeeded", a put without a previous value no "prev_kv").

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/json.h"

namespace fencepost::storage::etcd {

using Json = http::JsonValue;

// An integer field's value: 0 when absent, -1 when not an integer.
std::int64_t Int64Of(const Json* value);

// The bytes of a kv's "key" or "value" (absent: empty); false when they are
// not base64.
bool BytesOf(const Json& kv, std::string_view field, std::string* out);

// The kvs of a range response ({"kvs": [...]}, absent: none); nullptr when
// "kvs" is not an array.
const std::vector<Json>* KvsOf(const Json& range);

// The kvs of the `i`th response of a transaction's `responses`, which must
// be a range; nullptr when it is not one.
const std::vector<Json>* RangeKvsAt(const Json& responses, std::size_t i);

// The "count" of the `i`th response of a transaction's `responses`, which
// must be a range; -1 when it is not one.
std::int64_t RangeCountAt(const Json& responses, std::size_t i);

// A transaction's "responses" when it is an array of `count` items, else
// nullptr (absent counts as empty).
const Json* ResponsesOf(const Json& answer, std::size_t count);

// Whether a transaction's answer says its compares held.
bool Succeeded(const Json& answer);

// The revision of an answer's header (0: none).
std::int64_t RevisionOf(const Json& answer);

// Whether a range answer says there are more keys than it returned.
bool More(const Json& answer);

}  // namespace fencepost::storage::etcd
