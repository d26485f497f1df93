#include "proxy/elections.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <stdexcept>

#include "fence/election.h"
#include "fence/lease.h"
#include "fence/rules.h"
#include "proxy/logging.h"
#include "proxy/route_context.h"
#include "storage/async_commit.h"

namespace fencepost::proxy {

namespace asio = boost::asio;

namespace {

// How often an election is read when its source tells nothing: a watch
// may be cut off without a word (a member paused, say).
constexpr std::chrono::seconds kPollEvery(1);
// How soon a raise that failed is tried again.
constexpr std::chrono::milliseconds kRetryRaise(100);
// How often a write waiting for an election's first read looks again.
constexpr std::chrono::milliseconds kFirstReadStep(20);

std::string TokenText(std::optional<fence::Token> token) {
  return token ? std::to_string(*token) : std::string("none");
}

}  // namespace

// One read of an election's holder for the writes that need it, shared by
// every write that waits for it.
struct Elections::Check {
  explicit Check(asio::io_context& io) : done(io) {
    done.expires_at(asio::steady_timer::time_point::max());
  }
  asio::steady_timer done;  // cancelled when the read is answered
  bool finished = false;
  storage::ElectionHolder holder;
};

struct Elections::Election {
  explicit Election(asio::io_context& io) : wake(io) {}
  std::string scope;  // as configured
  std::string fence;  // the fence it names (a scope's prefix, or a key)
  std::string url;
  std::unique_ptr<storage::ElectionSource> source;
  asio::steady_timer wake;  // cancelled when a read is due at once
  bool due = true;          // a read is due (a change was told)
  bool retry_soon = false;  // the last raise failed
  bool stopped = false;
  bool read_once = false;  // the holder was read, and the fence raised to it
  std::optional<bool> up;  // nullopt: not read yet
  std::optional<fence::Token> holder;  // as last read; nullopt: none
  // The highest token the source named as a holder's (by any read), and
  // that holder's ID: the fence goes there before a lower token is judged.
  std::optional<fence::Token> confirmed;
  std::string confirmed_id;
  // At most the fence's token (fences only go up): what a token at or
  // below needs no source for.
  std::optional<fence::Token> floor;
  std::optional<fence::Token> behind_told;  // the holder last logged behind
  // The writes' read of the holder in flight, and the one queued after it.
  std::shared_ptr<Check> running, queued;

  void Floor(std::optional<fence::Token> at_least) {
    if (at_least && (!floor || *at_least > *floor)) floor = at_least;
  }
  void Confirm(const storage::ElectionHolder& holder) {
    if (holder.token && (!confirmed || *holder.token > *confirmed)) {
      confirmed = holder.token;
      confirmed_id = holder.id;
    }
  }
};

Elections::Elections(asio::io_context& io, RouteContext& context,
                     const std::vector<ElectionConfig>& elections,
                     std::chrono::milliseconds timeout)
    : io_(io), context_(context), timeout_(timeout) {
  for (const ElectionConfig& spec : elections) {
    auto election = std::make_shared<Election>(io);
    election->scope = spec.scope;
    election->fence = std::string(context.scopes().FenceFor(spec.scope));
    election->url = spec.source.url;
    election->source = storage::MakeElectionSource(io, spec.source, timeout);
    context.metrics().AddElection(spec.scope);
    elections_.push_back(std::move(election));
  }
}

Elections::~Elections() { Stop(); }

void Elections::Start() {
  for (const std::shared_ptr<Election>& election : elections_) {
    Election* e = election.get();
    election->source->Start([e] {
      e->due = true;
      e->wake.cancel();
    });
    asio::co_spawn(io_, Follow(election), asio::detached);
  }
}

void Elections::Stop() {
  stopped_ = true;
  for (const std::shared_ptr<Election>& election : elections_) {
    election->stopped = true;
    election->wake.cancel();
    election->source->Stop();
  }
}

Awaitable<std::string> Elections::RefuseLeases() {
  storage::Fences& fences = context_.fences();
  std::string after;
  while (true) {
    storage::Fences::LeaseList page =
        co_await fences.ListLeases("", after, 1000);
    if (page.error) {
      throw std::runtime_error(page.error.message() + " " +
                               fences.last_error());
    }
    for (const auto& [name, entry] : page.leases) {
      if (fence::IsLive(entry, page.now_ns) && Elected(entry.record.fence)) {
        co_return "the lease " + name + " of fencepost's own holds the fence " +
            entry.record.fence +
            ", which --election hands to an election held elsewhere: "
            "release the lease (fencepost lease release) or let it run out "
            "first";
      }
    }
    if (!page.next) co_return std::string();
    after = *page.next;
  }
}

bool Elections::Ready() const {
  return std::all_of(elections_.begin(), elections_.end(),
                     [](const auto& e) { return e->read_once; });
}

bool Elections::Elected(const std::string& fence) const {
  return Find(fence) != nullptr;
}

Elections::Election* Elections::Find(const std::string& fence) const {
  for (const std::shared_ptr<Election>& election : elections_) {
    if (election->fence == fence) return election.get();
  }
  return nullptr;
}

Awaitable<void> Elections::Follow(std::shared_ptr<Election> election) {
  while (!election->stopped) {
    if (!election->due) {
      election->wake.expires_after(election->retry_soon ? kRetryRaise
                                                        : kPollEvery);
      election->retry_soon = false;
      boost::system::error_code ec;
      co_await election->wake.async_wait(
          asio::redirect_error(kUseAwaitable, ec));
      if (election->stopped) co_return;
    }
    election->due = false;
    co_await ReadAndRaise(*election);
  }
}

Awaitable<void> Elections::ReadAndRaise(Election& election) {
  const storage::ElectionHolder holder = co_await election.source->ReadHolder();
  if (election.stopped) co_return;
  NoteUp(election, holder.error.empty(), holder.error);
  if (!holder.error.empty()) co_return;
  const std::optional<fence::Token> before = election.holder;
  if (!holder.token) {
    election.holder = std::nullopt;
    election.read_once = true;  // nobody holds it: nothing to raise
    co_return;
  }
  election.Confirm(holder);
  const Raised raised = co_await Raise(election, *holder.token, holder.id);
  if (raised == Raised::kFailed) {
    election.retry_soon = true;  // counted as a change once it is made
    co_return;
  }
  election.holder = holder.token;
  // A holder seen for the first time since start is counted when it moved
  // the fence (it was elected while this process was away).
  if ((before && *before != *holder.token) ||
      (!before && raised == Raised::kRaised)) {
    context_.metrics().ElectionHolderChanged(election.scope);
  }
  election.read_once = true;
}

Awaitable<Elections::Raised> Elections::Raise(Election& election,
                                              fence::Token token,
                                              const std::string& id) {
  if (!election.floor || *election.floor < token) {
    const storage::Fences::Read read =
        co_await context_.fences().Get(election.fence);
    if (read.error) {
      LogEvent(spdlog::level::err, "election_raise_failed",
               "cannot read the elected fence",
               {{"scope", election.scope},
                {"fence", election.fence},
                {"error", read.error.message()}});
      co_return Raised::kFailed;
    }
    if (read.fence) election.Floor(read.fence->token);
  }
  switch (fence::JudgeHolder(election.floor, token)) {
    case fence::HolderVerdict::kAtFence:
      co_return Raised::kUnchanged;
    case fence::HolderVerdict::kBehind:
      if (election.behind_told != token) {
        election.behind_told = token;
        context_.metrics().ElectionBehind(election.scope);
        LogEvent(spdlog::level::warn, "election_holder_behind",
                 "the election's holder has a token below the fence; the "
                 "fence stays (its writes are refused as stale)",
                 {{"scope", election.scope},
                  {"fence", election.fence},
                  {"holder", id},
                  {"token", std::to_string(token), true},
                  {"current_token", TokenText(election.floor), true},
                  {"source", election.url}});
      }
      co_return Raised::kUnchanged;
    case fence::HolderVerdict::kRaise:
      break;
  }
  fence::FencedWrite write;
  write.fence = election.fence;
  write.token = token;
  write.cause = "election";
  const fence::WriteOutcome outcome =
      co_await storage::AsyncCommit(context_.fences(), std::move(write));
  if (outcome.verdict == fence::WriteOutcome::Verdict::kFailed) {
    LogEvent(spdlog::level::err, "election_raise_failed",
             "cannot raise the elected fence to its new holder's token",
             {{"scope", election.scope},
              {"fence", election.fence},
              {"token", std::to_string(token), true},
              {"error", outcome.error.message()},
              {"detail", context_.fences().last_error()}});
    co_return Raised::kFailed;
  }
  election.Floor(outcome.current);
  if (outcome.verdict == fence::WriteOutcome::Verdict::kRejected) {
    // Raised past it meanwhile: judged again against the fence as it is.
    const Raised again = co_await Raise(election, token, id);
    co_return again == Raised::kFailed ? again : Raised::kUnchanged;
  }
  context_.Accepted(outcome);
  if (!fence::RaisesFence(outcome)) co_return Raised::kUnchanged;
  LogEvent(spdlog::level::info, "election_raised",
           "the election has a new holder: its fence is raised to its token",
           {{"scope", election.scope},
            {"fence", election.fence},
            {"holder", id},
            {"token", std::to_string(token), true},
            {"previous_token", TokenText(outcome.previous), true},
            {"source", election.url}});
  co_return Raised::kRaised;
}

void Elections::NoteUp(Election& election, bool up, const std::string& error) {
  context_.metrics().SetElectionUp(election.scope, up);
  if (election.up == up) return;
  election.up = up;
  if (up) {
    LogEvent(spdlog::level::info, "election_source_up",
             "the election's source answers",
             {{"scope", election.scope}, {"source", election.url}});
  } else {
    LogEvent(spdlog::level::warn, "election_source_down",
             "the election's source does not answer; writes at the fence's "
             "token go on, higher tokens wait for it",
             {{"scope", election.scope},
              {"source", election.url},
              {"error", error}});
  }
}

Awaitable<std::optional<Problem>> Elections::Admit(const std::string& fence,
                                                   fence::Token token,
                                                   const std::string& key) {
  Election* found = Find(fence);
  if (found == nullptr) co_return std::nullopt;
  Election& election = *found;  // lives as long as this object
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  asio::steady_timer step(io_);
  while (!election.read_once && !stopped_ &&
         std::chrono::steady_clock::now() < deadline) {
    step.expires_after(kFirstReadStep);
    boost::system::error_code ec;
    co_await step.async_wait(asio::redirect_error(kUseAwaitable, ec));
  }
  auto unavailable = [&](const std::string& why) {
    Problem problem(
        ProblemType::kElectionUnavailable,
        "the election of " + election.scope + " at " + election.url + " " + why,
        key, token, election.floor);
    problem.retry_after = 1;
    return problem;
  };
  if (!election.read_once) co_return unavailable("was not read yet");
  using fence::ElectedToken;
  ElectedToken need =
      fence::CheckElectedToken(election.floor, token, election.confirmed);
  if (need == ElectedToken::kAskSource) {
    // The floor may be behind the fence (a write of the holder raised it).
    const storage::Fences::Read read = co_await context_.fences().Get(fence);
    if (!read.error && read.fence) election.Floor(read.fence->token);
    need = fence::CheckElectedToken(election.floor, token, election.confirmed);
  }
  if (need == ElectedToken::kAskSource) {
    const storage::ElectionHolder holder = co_await ReadForWrites(election);
    NoteUp(election, holder.error.empty(), holder.error);
    if (!holder.error.empty()) {
      co_return unavailable("did not answer: " + holder.error);
    }
    if (holder.token != election.holder) {
      election.due = true;  // the follower raises the fence to it
      election.wake.cancel();
    }
    election.Confirm(holder);
    if (holder.token != token) {
      co_return RefuseUnverified(election, key, token, holder.token);
    }
  }
  // A holder above the token was read (by the follower, or by a read that
  // finished first): the fence goes to its token before this one is
  // judged, so no write of an older holder lands after its successor was
  // seen, whichever coroutine saw it.
  if (election.confirmed && token < *election.confirmed &&
      (!election.floor || *election.floor < *election.confirmed)) {
    const Raised raised =
        co_await Raise(election, *election.confirmed, election.confirmed_id);
    if (raised == Raised::kFailed) {
      co_return unavailable(
          "has a new holder whose token the fence could "
          "not be raised to");
    }
  }
  co_return std::nullopt;
}

Awaitable<storage::ElectionHolder> Elections::ReadForWrites(
    Election& election) {
  // A read already in flight may have been sent before this write's token
  // was elected, so it cannot answer it: the next one can, and every write
  // that arrives meanwhile shares it. The source sees at most two reads of
  // the writes at once, however many come.
  std::shared_ptr<Check> mine;
  if (!election.running) {
    mine = std::make_shared<Check>(io_);
    election.running = mine;
    for (const std::shared_ptr<Election>& held : elections_) {
      if (held.get() == &election) {
        asio::co_spawn(io_, RunChecks(held), asio::detached);
      }
    }
  } else {
    if (!election.queued) election.queued = std::make_shared<Check>(io_);
    mine = election.queued;
  }
  if (!mine->finished) {
    boost::system::error_code ec;
    co_await mine->done.async_wait(asio::redirect_error(kUseAwaitable, ec));
  }
  co_return mine->holder;
}

Awaitable<void> Elections::RunChecks(std::shared_ptr<Election> election) {
  while (election->running) {
    const std::shared_ptr<Check> check = election->running;
    check->holder = co_await election->source->ReadHolder();
    check->finished = true;
    check->done.cancel();
    election->running = std::move(election->queued);
  }
}

Problem Elections::RefuseUnverified(Election& election, const std::string& key,
                                    fence::Token token,
                                    std::optional<fence::Token> holder) {
  context_.metrics().UnverifiedToken();
  if (context_.AdmitLog(election.fence)) {
    LogEvent(spdlog::level::warn, "unverified_token_refused",
             "refused a token the election's source did not confirm",
             {{"key", key},
              {"fence", election.fence},
              {"presented_token", std::to_string(token), true},
              {"holder_token", TokenText(holder), true},
              {"source", election.url}});
  }
  return Problem(ProblemType::kUnverifiedToken,
                 "token " + std::to_string(token) +
                     " is not the token of the holder of the election at " +
                     election.url + " (its holder's is " + TokenText(holder) +
                     ")",
                 key, token, election.floor);
}

}  // namespace fencepost::proxy
