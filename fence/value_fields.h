#pragma once

// What a stored value keeps besides its body, as every store spells it (the
// embedded one in fence/values.h, and those kept elsewhere): its entity tag
// and its Content-Type. No LMDB here.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fencepost::fence {

// The entity tag of a value stored by the log record numbered `seq`: every
// accepted write of a key is a new record with a higher number, so its tag
// changes with every write and never comes back. A value written before
// entity tags (seq 0) has the tag "0" until it is next written.
std::string TagOf(std::uint64_t seq);

// The longest Content-Type a value keeps.
inline constexpr std::size_t kMaxContentTypeBytes = 255;

// Whether `type` may be kept as a value's Content-Type and sent back in a
// header: at most kMaxContentTypeBytes of visible characters, spaces and
// tabs (no control character: it could end the header early).
bool ValidContentType(std::string_view type);
// Whether `tag` may be an entity tag between quotes: 1 to 255 of RFC 9110's
// etagc (no quote, space or control character).
bool ValidTag(std::string_view tag);

}  // namespace fencepost::fence
