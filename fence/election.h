#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fence/token.h"

namespace fencepost::fence {

// The rules of a fence that follows an election held elsewhere (SPEC
// "Elections watched at their source"): an elector outside fencepost (etcd,
// ZooKeeper) elects holders, each with a token the source itself numbers,
// and fencepost raises the fence to each new holder's token and refuses
// tokens the source never handed out.

// What a token presented to an elected fence needs before the accept rule
// (fence::Decide) may take it, given the fence's highest token (nullopt: no
// fence yet) and the holder's token as the source last told it (nullopt:
// not known, or nobody holds the election).
enum class ElectedToken {
  // At or below the fence: the accept rule decides (equal: taken, lower:
  // stale), as on any fence. A token that moves nothing needs no source.
  kDecidedByFence,
  // Above the fence, and the source already said it is the holder's.
  kConfirmed,
  // Above the fence and not known as the holder's: the source must confirm
  // it (one linearizable read) before the fence may move; otherwise it is
  // refused and nothing moves, so a token nobody was elected with (a bug,
  // a typo, 2^64-1) cannot lock the scope out.
  kAskSource,
};
ElectedToken CheckElectedToken(std::optional<Token> fence, Token token,
                               std::optional<Token> holder);

// What fencepost does when the source names `holder` (its token) as the
// election's holder, with the fence at `fence`.
enum class HolderVerdict {
  kRaise,    // above the fence (or no fence yet): raise it to the holder's
  kAtFence,  // the fence is there already (a raise by a write, a replica)
  // Below the fence: the holder's writes are all stale. Never obeyed (a
  // fence never goes down); logged and counted: a source restored from an
  // old backup, or a fence raised by a bump past the election's numbers.
  kBehind,
};
HolderVerdict JudgeHolder(std::optional<Token> fence, Token holder);

// The holder among the children of a ZooKeeper election node: the name with
// the lowest sequence suffix (the last 10 characters, all digits, as
// ZooKeeper appends to a sequential node's name), whatever comes before it
// (kazoo's "<id>__lock__", Curator's "_c_<id>-latch-", fencepost's "n_").
// Names without such a suffix are not candidates. Index into `children`,
// nullopt when none is a candidate.
std::optional<std::size_t> LowestSequence(
    const std::vector<std::string_view>& children);

}  // namespace fencepost::fence
