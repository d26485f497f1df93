#pragma once

#include <string>
#include <string_view>

namespace fencepost::codec {

// Standard base64 (RFC 4648 section 4: the + and / alphabet, padded to a
// multiple of 4), as JSON documents carry bytes: etcd's keys and values,
// fencepost's batch values.
std::string EncodeBase64(std::string_view bytes);

// Decodes what EncodeBase64 writes, and nothing else: no whitespace, no
// missing padding, and the bits that padding drops must be zero, so each
// value has one encoding. False when `text` is not that.
bool DecodeBase64(std::string_view text, std::string* bytes);

}  // namespace fencepost::codec
