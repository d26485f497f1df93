#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "client/lease_backend.h"

namespace fencepost::client {

// Leases kept in a PostgreSQL table, through libpq:
//   fencepost_leases(name text primary key, holder text,
//                    token bigint not null, expires_at timestamptz not null)
// created on first use in the connection's default schema (the first of its
// search_path) unless it exists. One row per lease name; its token starts
// at 1 and goes up by one for every new term: another holder, or the same
// holder again after the lease expired or was released. A renewal by the
// live holder keeps the token.
//
// Every decision is one statement judged on the server's clock: a lease is
// live while expires_at >= now() of the deciding statement's transaction,
// and a grant or renewal sets expires_at to that now() + ttl, which is after
// the request was sent. So the lease is held at least until sent_at + ttl
// unless the server's wall clock steps forward (or its rate differs from
// this process's steady clock by more than the caller's margin).
//
// The connection is opened on the first call and reopened on the call after
// one broke or timed out. Every call returns within its timeout, connecting
// included, except that libpq resolves a host name (getaddrinfo) without a
// bound: give an address where that matters. A call that timed out may
// still take effect on the server; its outcome is kFailed.
//
// Thread safety: calls must not overlap (LeaseBackend's contract); the
// object may move between threads between calls.
class PostgresLeases final : public LeaseBackend {
 public:
  // `url`: a libpq connection URI, "postgres://" or "postgresql://"
  // (user, password, host, port, database and libpq's query parameters such
  // as sslmode or options). Throws std::invalid_argument, naming the
  // problem, for another scheme, a URI libpq cannot parse, an empty name or
  // holder, a name or holder with a NUL byte, or a non-positive ttl.
  PostgresLeases(std::string url, LeaseSpec spec);
  ~PostgresLeases() override;
  PostgresLeases(const PostgresLeases&) = delete;
  PostgresLeases& operator=(const PostgresLeases&) = delete;

  const LeaseSpec& spec() const override { return spec_; }
  // "postgres 127.0.0.1:5432/postgres" (no user or password).
  std::string Describe() const override;

  // kRefused: `holder` and `detail` name the live holder, when the read
  // after the refusal got an answer in time.
  LeaseAttempt Acquire(std::chrono::milliseconds timeout) override;
  // kRefused: `detail` says whether the lease expired, was released, or was
  // taken by another term (its holder and token).
  LeaseAttempt Renew(std::uint64_t token,
                     std::chrono::milliseconds timeout) override;
  // Ends the term held as `token` (the row keeps its token, so the next
  // term's is higher).
  std::string Release(std::uint64_t token,
                      std::chrono::milliseconds timeout) override;

 private:
  class Session;  // one open libpq connection

  // The open session, connecting (and creating the table) when there is
  // none; nullptr with `error` set when that failed.
  Session* Connect(std::chrono::steady_clock::time_point deadline,
                   std::string& error);
  // Why the term held as `token` is no longer held, as far as a read can
  // tell by `deadline`.
  std::string WhyLost(std::uint64_t token,
                      std::chrono::steady_clock::time_point deadline);
  // Forgets the session if it is no longer usable.
  void DropIfBroken();

  std::string url_;
  LeaseSpec spec_;
  std::string describe_;
  std::unique_ptr<Session> session_;
};

}  // namespace fencepost::client
