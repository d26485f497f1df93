#include "client/postgres_leases.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Creates the table unless it exists. The advisory lock (its key spells
// "fencepos") serializes processes that all found it missing; the first
// check spares a user without CREATE on the schema when it exists.
constexpr const char* kCreateTable = R"sql(
DO $$
BEGIN
  IF to_regclass('fencepost_leases') IS NULL THEN
    PERFORM pg_advisory_xact_lock(7378424937699110771);
    CREATE TABLE IF NOT EXISTS fencepost_leases (
      name text PRIMARY KEY,
      holder text,
      token bigint NOT NULL,
      expires_at timestamptz NOT NULL);
  END IF;
END
$$)sql";

// Each statement runs alone, so it is its own transaction and now() is the
// moment the server began it: after the client took sent_at (expiry counts
// from a later instant than the caller assumes), and no later than the
// moment the row lock lets the statement decide (a lease is judged expired
// no earlier than it is). now() is also one instant for the whole
// statement, unlike clock_timestamp(). Row locks order concurrent
// statements, and each re-checks its WHERE on the row version it locked.
//
// A release leaves holder NULL; such a row is free, and every new term
// (another holder, or this one after expiry or release) increments token.
constexpr const char* kAcquire = R"sql(
INSERT INTO fencepost_leases AS l (name, holder, token, expires_at)
VALUES ($1, $2, 1, now() + $3::bigint * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE
   SET holder = excluded.holder,
       token = CASE WHEN l.holder = excluded.holder AND l.expires_at >= now()
                    THEN l.token ELSE l.token + 1 END,
       expires_at = excluded.expires_at
 WHERE l.holder IS NULL OR l.holder = excluded.holder OR l.expires_at < now()
RETURNING token)sql";

constexpr const char* kRenew = R"sql(
UPDATE fencepost_leases
   SET expires_at = now() + $4::bigint * interval '1 millisecond'
 WHERE name = $1 AND holder = $2 AND token = $3::bigint AND expires_at >= now()
RETURNING token)sql";

constexpr const char* kRelease = R"sql(
UPDATE fencepost_leases SET holder = NULL, expires_at = now()
 WHERE name = $1 AND holder = $2 AND token = $3::bigint AND expires_at >= now())sql";

// holder, token, expired, milliseconds left.
constexpr const char* kRead = R"sql(
SELECT holder, token, expires_at < now(),
       greatest(0, ceil(extract(epoch FROM expires_at - now()) * 1000))::bigint
  FROM fencepost_leases WHERE name = $1)sql";

// Tokens are bigint in the table.
constexpr std::uint64_t kMaxToken = std::numeric_limits<std::int64_t>::max();

constexpr std::string_view kDuplicateTable = "42P07";
constexpr std::string_view kUniqueViolation = "23505";

std::string Trimmed(const char* message) {
  std::string text = message ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text.empty() ? "unknown libpq error" : text;
}

std::optional<std::uint64_t> ParseToken(
    const std::optional<std::string>& text) {
  std::uint64_t value = 0;
  if (!text) return std::nullopt;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// NOTICEs ("relation already exists, skipping") are not for stderr.
void IgnoreNotice(void*, const char*) {}

// Waits until `fd` is ready for `events`: "" when it is, else why not.
std::string WaitFor(int fd, short events, Clock::time_point deadline) {
  if (fd < 0) return "no connection";
  for (;;) {
    const auto left =
        std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return "timed out";
    pollfd entry{fd, events, 0};
    const int ready =
        poll(&entry, 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
    if (ready > 0) return "";
    if (ready < 0 && errno != EINTR) {
      return std::string("poll: ") + std::strerror(errno);
    }
  }
}

// One statement's answer.
struct Reply {
  std::string error;     // "" when the statement ran
  std::string sqlstate;  // of a server error
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::string changed;  // rows changed, as libpq says it ("1")

  bool ok() const { return error.empty(); }
};

}  // namespace

// A libpq connection in non-blocking mode, driven with poll() so that every
// wait ends at a deadline. A connection that timed out or broke mid-request
// is `broken()`: the protocol state is unknown, it must be closed.
class PostgresLeases::Session {
 public:
  // Connects by `deadline`; nullptr with `error` set when that failed.
  static std::unique_ptr<Session> Open(const std::string& url,
                                       Clock::time_point deadline,
                                       std::string& error);
  explicit Session(PGconn* conn) : conn_(conn) {}
  ~Session() { PQfinish(conn_); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs `sql` with text `params` (never spliced into the text), waiting
  // until `deadline` at most.
  Reply Run(const char* sql, const std::vector<std::string>& params,
            Clock::time_point deadline);
  bool broken() const { return broken_ || PQstatus(conn_) != CONNECTION_OK; }

 private:
  Reply Broke(std::string why) {
    broken_ = true;
    Reply reply;
    reply.error = std::move(why);
    return reply;
  }
  // Waits for the whole answer; nullptr when none came (then broken).
  PGresult* Collect(Clock::time_point deadline, std::string& error);

  PGconn* conn_;
  bool broken_ = false;
};

std::unique_ptr<PostgresLeases::Session> PostgresLeases::Session::Open(
    const std::string& url, Clock::time_point deadline, std::string& error) {
  const char* const keys[] = {"dbname", "fallback_application_name", nullptr};
  const char* const values[] = {url.c_str(), "fencepost", nullptr};
  PGconn* conn = PQconnectStartParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) {
    error = "libpq could not allocate a connection";
    return nullptr;
  }
  auto session = std::make_unique<Session>(conn);
  if (PQstatus(conn) == CONNECTION_BAD) {
    error = Trimmed(PQerrorMessage(conn));
    return nullptr;
  }
  // libpq's documented start: as if polling had asked to write.
  PostgresPollingStatusType state = PGRES_POLLING_WRITING;
  while (state != PGRES_POLLING_OK) {
    if (state == PGRES_POLLING_FAILED) {
      error = Trimmed(PQerrorMessage(conn));
      return nullptr;
    }
    if (state == PGRES_POLLING_READING || state == PGRES_POLLING_WRITING) {
      const std::string why =
          WaitFor(PQsocket(conn),
                  state == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline);
      if (!why.empty()) {
        error = why + " connecting";
        return nullptr;
      }
    }
    state = PQconnectPoll(conn);
  }
  if (PQsetnonblocking(conn, 1) != 0) {
    error = Trimmed(PQerrorMessage(conn));
    return nullptr;
  }
  PQsetNoticeProcessor(conn, IgnoreNotice, nullptr);
  return session;
}

PGresult* PostgresLeases::Session::Collect(Clock::time_point deadline,
                                           std::string& error) {
  PGresult* kept = nullptr;
  for (;;) {
    if (PQisBusy(conn_)) {
      error = WaitFor(PQsocket(conn_), POLLIN, deadline);
      if (!error.empty()) break;
      if (PQconsumeInput(conn_) == 0) {
        error = Trimmed(PQerrorMessage(conn_));
        break;
      }
      continue;
    }
    PGresult* next = PQgetResult(conn_);
    if (next == nullptr) return kept;
    // One statement gives one result; keep the first, or an error.
    if (kept == nullptr || PQresultStatus(next) == PGRES_FATAL_ERROR) {
      PQclear(kept);
      kept = next;
    } else {
      PQclear(next);
    }
  }
  PQclear(kept);
  broken_ = true;
  return nullptr;
}

Reply PostgresLeases::Session::Run(const char* sql,
                                   const std::vector<std::string>& params,
                                   Clock::time_point deadline) {
  std::vector<const char*> values;
  for (const std::string& param : params) values.push_back(param.c_str());
  if (PQsendQueryParams(conn_, sql, static_cast<int>(values.size()), nullptr,
                        values.data(), nullptr, nullptr, 0) == 0) {
    return Broke(Trimmed(PQerrorMessage(conn_)));
  }
  for (;;) {
    const int flushed = PQflush(conn_);
    if (flushed == 0) break;
    if (flushed < 0) return Broke(Trimmed(PQerrorMessage(conn_)));
    std::string why = WaitFor(PQsocket(conn_), POLLIN | POLLOUT, deadline);
    if (!why.empty()) return Broke(why + " sending");
    if (PQconsumeInput(conn_) == 0) {
      return Broke(Trimmed(PQerrorMessage(conn_)));
    }
  }
  std::string error;
  std::unique_ptr<PGresult, decltype(&PQclear)> result(Collect(deadline, error),
                                                       &PQclear);
  if (!result) {
    return Broke(error.empty() ? "the connection closed without an answer"
                               : error + " waiting for the answer");
  }
  Reply reply;
  const ExecStatusType status = PQresultStatus(result.get());
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    reply.error = Trimmed(PQresultErrorMessage(result.get()));
    const char* state = PQresultErrorField(result.get(), PG_DIAG_SQLSTATE);
    reply.sqlstate = state ? state : "";
    return reply;
  }
  reply.changed = PQcmdTuples(result.get());
  for (int row = 0; row < PQntuples(result.get()); ++row) {
    auto& cells = reply.rows.emplace_back();
    for (int column = 0; column < PQnfields(result.get()); ++column) {
      if (PQgetisnull(result.get(), row, column)) {
        cells.emplace_back();
      } else {
        cells.emplace_back(PQgetvalue(result.get(), row, column));
      }
    }
  }
  return reply;
}

PostgresLeases::PostgresLeases(std::string url, LeaseSpec spec)
    : url_(std::move(url)), spec_(std::move(spec)) {
  if (!url_.starts_with("postgres://") && !url_.starts_with("postgresql://")) {
    throw std::invalid_argument(
        "PostgresLeases: the URL must start with postgres:// or "
        "postgresql://");
  }
  char* parse_error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url_.c_str(), &parse_error);
  if (options == nullptr) {
    const std::string why = parse_error ? Trimmed(parse_error) : "no memory";
    PQfreemem(parse_error);
    throw std::invalid_argument("PostgresLeases: a bad URL: " + why);
  }
  std::string host, port, dbname;
  for (const PQconninfoOption* option = options; option->keyword; ++option) {
    const std::string_view keyword = option->keyword;
    const std::string value = option->val ? option->val : "";
    if (keyword == "host" || (keyword == "hostaddr" && host.empty())) {
      if (!value.empty()) host = value;
    } else if (keyword == "port") {
      port = value;
    } else if (keyword == "dbname") {
      dbname = value;
    }
  }
  PQconninfoFree(options);
  describe_ = "postgres " + (host.empty() ? "localhost" : host) + ":" +
              (port.empty() ? "5432" : port) + "/" + dbname;

  if (spec_.name.empty()) {
    throw std::invalid_argument("PostgresLeases: an empty lease name");
  }
  if (spec_.holder.empty()) {
    throw std::invalid_argument("PostgresLeases: an empty holder");
  }
  if (spec_.name.find('\0') != std::string::npos ||
      spec_.holder.find('\0') != std::string::npos) {
    throw std::invalid_argument(
        "PostgresLeases: a NUL byte in the lease name or holder");
  }
  if (spec_.ttl.count() <= 0) {
    throw std::invalid_argument("PostgresLeases: the ttl must be above 0");
  }
}

PostgresLeases::~PostgresLeases() = default;

std::string PostgresLeases::Describe() const { return describe_; }

PostgresLeases::Session* PostgresLeases::Connect(Clock::time_point deadline,
                                                 std::string& error) {
  if (session_) return session_.get();
  std::unique_ptr<Session> session = Session::Open(url_, deadline, error);
  if (!session) return nullptr;
  const Reply created = session->Run(kCreateTable, {}, deadline);
  // Kept for a server that lets two creators past each other anyway.
  if (!created.ok() && created.sqlstate != kDuplicateTable &&
      created.sqlstate != kUniqueViolation) {
    error = "creating the table fencepost_leases: " + created.error;
    return nullptr;
  }
  session_ = std::move(session);
  return session_.get();
}

void PostgresLeases::DropIfBroken() {
  if (session_ && session_->broken()) session_.reset();
}

LeaseAttempt PostgresLeases::Acquire(milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  LeaseAttempt attempt;
  Session* session = Connect(deadline, attempt.detail);
  if (session == nullptr) return attempt;

  attempt.sent_at = Clock::now();
  const Reply granted = session->Run(
      kAcquire, {spec_.name, spec_.holder, std::to_string(spec_.ttl.count())},
      deadline);
  if (!granted.ok()) {
    attempt.detail = granted.error;
    DropIfBroken();
    return attempt;
  }
  if (!granted.rows.empty()) {
    const auto token = ParseToken(granted.rows[0][0]);
    if (!token) {
      attempt.detail = "the server returned no token";
      return attempt;
    }
    attempt.outcome = LeaseAttempt::Outcome::kHeld;
    attempt.token = *token;
    attempt.ttl = spec_.ttl;
    return attempt;
  }

  attempt.outcome = LeaseAttempt::Outcome::kRefused;
  attempt.detail = "held by another holder";
  const Reply read = session->Run(kRead, {spec_.name}, deadline);
  DropIfBroken();
  if (read.ok() && !read.rows.empty() && read.rows[0][0]) {
    const auto& row = read.rows[0];
    attempt.holder = *row[0];
    attempt.detail = "held by '" + attempt.holder + "' with token " +
                     row[1].value_or("?") + " for another " +
                     row[3].value_or("?") + " ms";
  }
  return attempt;
}

LeaseAttempt PostgresLeases::Renew(std::uint64_t token, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  LeaseAttempt attempt;
  if (token > kMaxToken) {
    attempt.outcome = LeaseAttempt::Outcome::kRefused;
    attempt.detail = "token " + std::to_string(token) + " was never granted";
    return attempt;
  }
  Session* session = Connect(deadline, attempt.detail);
  if (session == nullptr) return attempt;

  attempt.sent_at = Clock::now();
  const Reply renewed =
      session->Run(kRenew,
                   {spec_.name, spec_.holder, std::to_string(token),
                    std::to_string(spec_.ttl.count())},
                   deadline);
  if (!renewed.ok()) {
    attempt.detail = renewed.error;
    DropIfBroken();
    return attempt;
  }
  if (!renewed.rows.empty()) {
    attempt.outcome = LeaseAttempt::Outcome::kHeld;
    attempt.token = token;
    attempt.ttl = spec_.ttl;
    return attempt;
  }
  attempt.outcome = LeaseAttempt::Outcome::kRefused;
  attempt.detail = WhyLost(token, deadline);
  return attempt;
}

std::string PostgresLeases::Release(std::uint64_t token, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  if (token > kMaxToken) {
    return "token " + std::to_string(token) + " was never granted";
  }
  std::string error;
  Session* session = Connect(deadline, error);
  if (session == nullptr) return error;
  const Reply released = session->Run(
      kRelease, {spec_.name, spec_.holder, std::to_string(token)}, deadline);
  if (!released.ok()) {
    DropIfBroken();
    return released.error;
  }
  if (released.changed == "1") return "";
  return WhyLost(token, deadline);
}

std::string PostgresLeases::WhyLost(std::uint64_t token,
                                    Clock::time_point deadline) {
  const Reply read = session_->Run(kRead, {spec_.name}, deadline);
  DropIfBroken();
  if (!read.ok()) return "no longer held (" + read.error + ")";
  if (read.rows.empty()) return "the lease no longer exists";
  const auto& row = read.rows[0];
  const std::uint64_t current = ParseToken(row[1]).value_or(0);
  if (current > token) {
    return "taken over: token " + std::to_string(current) +
           (row[0] ? " held by '" + *row[0] + "'" : ", since released");
  }
  if (current < token) {
    return "token " + std::to_string(token) + " was never granted";
  }
  if (!row[0]) return "released";
  if (*row[0] != spec_.holder) return "held by '" + *row[0] + "'";
  return "expired";
}

}  // namespace fencepost::client
