#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fencepost::testing {

// --max-leases 1 under concurrent grants, over HTTP: in each of `rounds`
// rounds, 16 acquires of distinct new leases (PREFIX-ROUND-I, TTL 60 s),
// each on a connection of its own opened beforehand and sent together,
// spread over `admin_ports` in turn. Expects exactly one 200 and 507
// too-many-leases for every other, calls `granted` (if set) while the one
// lease is held, then releases it. Fails the test through gtest.
void ExpectOneGrantPerRound(const std::vector<std::uint16_t>& admin_ports,
                            const std::string& prefix, int rounds = 10,
                            const std::function<void()>& granted = {});

}  // namespace fencepost::testing
