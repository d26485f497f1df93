"""A held lease kept alive: the Python twin of the C++ LeaseKeeper."""

from __future__ import annotations

import http.client
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from typing import Optional

from fencepost.client import Client, LeaseInfo, long_poll
from fencepost.errors import (BadResponse, FencepostError, LeaseHeld,
                              LeadershipLost, Problem, Unreachable)

LostCallback = Callable[[str], None]


def default_holder_id() -> str:
    """``<hostname>-<pid>-<8 random hex digits>``: unique per process, as
    the ``fencepost`` commands make it."""
    host = socket.gethostname() or "unknown"
    return f"{host}-{os.getpid()}-{random.getrandbits(32):08x}"


def jittered(period: float) -> float:
    """``period`` times a random factor from 0.5 to 1.5."""
    return max(0.001, period * random.uniform(0.5, 1.5))


def _final(problem: Problem) -> bool:
    """An answer that asking again will not change (4xx but 408, 429)."""
    return 400 <= problem.status < 500 and problem.status not in (408, 429)


def try_acquire(client: Client, name: str, holder: str, ttl: float,
                timeout: Optional[float] = None
                ) -> tuple[Optional[LeaseInfo], float, str]:
    """One acquire: (the grant, when it was sent on the monotonic clock,
    "") when ``holder`` holds the lease after it, else (None, sent, why).
    Raises the Problem of an answer that will not change (a bad name, TTL
    or holder; 401)."""
    sent = time.monotonic()
    try:
        info = client.acquire_lease(name, holder, ttl, timeout=timeout)
    except LeaseHeld as e:
        return None, sent, f"held by {e.holder}" if e.holder else "held"
    except Problem as e:
        if _final(e):
            raise
        return None, sent, str(e)
    except (Unreachable, BadResponse) as e:
        return None, sent, str(e)
    if info.holder != holder:
        return None, sent, f"answered with holder {info.holder}"
    return info, sent, ""


class Lease:
    """A lease this process holds, renewed on a thread of its own every
    ``renew_period`` (a third of the TTL). ``lost`` is set, ``reason`` says
    why and ``on_lost(reason)`` is called once on the keeper's thread:

    - at once when a renewal is refused or answered with another holder or
      token;
    - when no renewal succeeded before ``S + ttl - safety_margin``, S being
      when the last successful acquire or renewal was sent, on this
      process's monotonic clock (``time.monotonic``). The server measures
      expiry from when it handled that request, later than S, so the lease
      is still held there at that instant unless the clocks' rates differ
      by more than the margin. A renewal with no answer is retried (every
      quarter of the renew period) until then; no request's timeout runs
      past it;
    - at once, too, when the lease's fence goes above the token (another
      holder was granted the lease, or the fence was bumped): a long poll
      (``GET /v1/fences/{name}?wait_above=TOKEN``) runs on a second thread
      and connection, asked again every 10 s, and every second after a
      failure; the renewals stay the backstop while it gets no answer.

    Writes made under the lease carry ``token``, so once another holder is
    granted it they are refused by fencepost whatever this process
    believes. ``check()`` raises LeadershipLost once lost or once
    ``time.monotonic()`` has passed ``held_until``, whether or not the
    keeper's thread has run since (after a pause of the whole process it
    may run last); ``sleep(s)`` waits at most until ``held_until`` and
    raises as soon as either is true. A renewal answered after
    ``held_until`` does not extend it: the deadline, once passed, stays
    passed.

    Thread safety: every member may be used from any thread. A Lease is a
    context manager: leaving it releases the lease.
    """

    def __init__(self, client: Client, name: str, holder: str,
                 grant: LeaseInfo, sent_at: float, *, ttl: float,
                 renew_period: Optional[float] = None,
                 safety_margin: Optional[float] = None,
                 on_lost: Optional[LostCallback] = None,
                 watch_fence: bool = True) -> None:
        if grant.holder != holder:
            raise ValueError("a Lease needs a grant to its holder")
        self.client = client
        self.name = name
        self.holder = holder
        self.token = grant.token
        # The lesser of the asked and the granted TTL.
        self.ttl = min(ttl, grant.ttl_ms / 1000) if grant.ttl_ms > 0 else ttl
        self.renew_period = renew_period or max(self.ttl / 3, 0.001)
        self.safety_margin = safety_margin or max(self.ttl / 10, 0.05)
        if self.safety_margin >= self.ttl:
            raise ValueError("the safety margin must be below the TTL")
        self._retry_interval = max(self.renew_period / 4, 0.01)
        self._on_lost = on_lost
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self.lost_at: Optional[float] = None  # monotonic, when it was noticed
        self._cv = threading.Condition()
        self._stop_requested = False
        self._released = False
        self._fenced: Optional[str] = None
        self._last_sent = sent_at
        self._next_attempt = sent_at + self.renew_period
        self._poll_conn: Optional[http.client.HTTPConnection] = None
        self._thread = threading.Thread(
            target=self._loop, name=f"fencepost-lease-{name}", daemon=True)
        self._thread.start()
        if watch_fence:
            threading.Thread(target=self._watch, daemon=True,
                             name=f"fencepost-fence-watch-{name}").start()

    @classmethod
    def acquire(cls, client: Client, name: str, *, ttl: float = 10.0,
                holder: Optional[str] = None, wait: Optional[float] = None,
                retry_period: Optional[float] = None,
                safety_margin: Optional[float] = None,
                on_lost: Optional[LostCallback] = None,
                watch_fence: bool = True) -> "Lease":
        """Acquires the lease ``name`` for ``ttl`` seconds and keeps it.
        With ``wait`` (seconds) it retries every ``retry_period`` (a third
        of the TTL, jittered by ±50%) until acquired or ``wait`` passes;
        then, or at once without ``wait``, it raises LeaseHeld when another
        holder has it, or the Unreachable or Problem of the last try.
        ``watch_fence=False`` leaves the long poll out: the renewals alone
        then keep and lose the lease."""
        holder = holder or default_holder_id()
        period = retry_period or max(ttl / 3, 0.001)
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            sent = time.monotonic()  # the TTL runs from the send, at most
            try:
                grant = client.acquire_lease(name, holder, ttl)
            except (LeaseHeld, Unreachable, BadResponse) as e:
                error: FencepostError = e
            except Problem as e:
                if _final(e):
                    raise
                error = e
            else:
                if grant.holder == holder:
                    return cls(client, name, holder, grant, sent, ttl=ttl,
                               safety_margin=safety_margin, on_lost=on_lost,
                               watch_fence=watch_fence)
                error = FencepostError(f"answered with holder {grant.holder}")
            left = None if deadline is None else deadline - time.monotonic()
            if left is None or left <= 0:
                raise error
            time.sleep(min(left, jittered(period)))

    # -- state ---------------------------------------------------------

    @property
    def held_until(self) -> float:
        """Until when (``time.monotonic``) the lease is held for sure, if
        not lost: the last successful request's send time + ttl - margin."""
        with self._cv:
            return self._deadline_locked()

    def _deadline_locked(self) -> float:
        return self._last_sent + self.ttl - self.safety_margin

    def _expired_reason(self) -> str:
        return ("no renewal succeeded within the TTL less the safety margin "
                f"({(self.ttl - self.safety_margin) * 1000:.0f} ms on the "
                "client's clock)")

    def check(self) -> None:
        """Raises LeadershipLost once the lease is lost or ``held_until``
        has passed."""
        with self._cv:
            if self.lost.is_set():
                raise LeadershipLost(self.reason or "lost", self.token)
            if time.monotonic() >= self._deadline_locked():
                raise LeadershipLost(self._expired_reason(), self.token)

    def sleep(self, seconds: float) -> None:
        """Waits ``seconds``; raises LeadershipLost as soon as the lease is
        lost or ``held_until`` passes (at once when it is already)."""
        end = time.monotonic() + seconds
        while True:
            self.check()
            now = time.monotonic()
            if now >= end:
                return
            # held_until may have moved on meanwhile: then this waits again.
            self.lost.wait(min(end, self.held_until) - now)

    # -- ending --------------------------------------------------------

    def stop(self) -> None:
        """Stops renewing (never releases). Idempotent; after it ``lost``
        is no longer set. When, by the time it was first called, the fence
        watch had seen the fence go above the token or ``held_until`` had
        passed, and the keeper's thread had not yet said so, it sets
        ``lost`` and ``reason`` itself (without calling ``on_lost``)."""
        with self._cv:
            first = not self._stop_requested
            stopped_at = time.monotonic()
            fenced = self._fenced  # the watch sets it only before the stop
            self._stop_requested = True
            conn, self._poll_conn = self._poll_conn, None
            self._cv.notify_all()
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not threading.current_thread():
            self._thread.join()
        with self._cv:
            if first and fenced is not None:
                self._lose(fenced)
            elif first and stopped_at >= self._deadline_locked():
                self._lose(self._expired_reason())

    def release(self) -> bool:
        """stop(), then, unless it was lost or released before, releases
        the lease so that another holder can take it at once. True when
        released; raises LeaseNotHeld or Unreachable when it could not be."""
        self.stop()
        with self._cv:
            if self.lost.is_set() or self._released:
                return False
            self._released = True
        self.client.release_lease(self.name, self.holder, self.token)
        return True

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.release()
        except FencepostError:
            pass  # it runs out by itself within its TTL

    # -- the keeper's threads --------------------------------------------

    def _lose(self, reason: str) -> None:
        """Called with self._cv held."""
        if self.lost.is_set():
            return
        self.reason = reason
        self.lost_at = time.monotonic()
        self.lost.set()
        call = not self._stop_requested and self._on_lost is not None
        self._cv.release()
        try:
            if call and self._on_lost is not None:
                self._on_lost(reason)
        finally:
            self._cv.acquire()

    def _loop(self) -> None:
        with self._cv:
            while not self._stop_requested:
                if self._fenced is not None:
                    self._lose(self._fenced)
                    return
                deadline = self._deadline_locked()
                now = time.monotonic()
                if now >= deadline:
                    self._lose(self._expired_reason())
                    return
                if now < self._next_attempt:
                    self._cv.wait(min(self._next_attempt, deadline) - now)
                    continue
                self._cv.release()
                try:
                    lost = self._renew(deadline)
                finally:
                    self._cv.acquire()
                if lost:
                    self._lose(lost)
                    return

    def _renew(self, deadline: float) -> str:
        """One renewal: the reason the lease is lost, or ""."""
        left = deadline - time.monotonic()
        if left <= 0:
            return ""  # the loop sees the deadline
        sent = time.monotonic()
        info: Optional[LeaseInfo] = None
        try:
            info = self.client.acquire_lease(
                self.name, self.holder, self.ttl,
                timeout=min(self.client.timeout, left))
        except LeaseHeld as e:
            return "the renewal was refused" + (
                f" (held by {e.holder})" if e.holder else "")
        except Problem as e:
            if _final(e):
                return f"the renewal was refused with {e}"
        except (Unreachable, BadResponse):
            pass
        except Exception:
            # Whatever else failed, the deadline decides, and this thread
            # lives to report the loss.
            pass
        if info is not None and info.holder != self.holder:
            return f"the renewal was answered with holder {info.holder}"
        if info is not None and info.token != self.token:
            return (f"the renewal was answered with token {info.token} "
                    f"instead of {self.token}")
        with self._cv:
            # The clock is read under the lock check() reads it under: once
            # check() saw the deadline pass, no renewal moves it.
            if info is not None and time.monotonic() < deadline:
                self._last_sent = max(self._last_sent, sent)
                self._next_attempt = sent + self.renew_period
            else:
                self._next_attempt = time.monotonic() + self._retry_interval
        return ""

    def _watch(self) -> None:
        wait, after_failure = 10.0, 1.0
        while True:
            conn = self.client._admin.connect(wait + self.client.timeout)
            with self._cv:
                if self._stop_requested or self.lost.is_set():
                    return
                self._poll_conn = conn
            try:
                fence = long_poll(self.client._admin, conn, self.name,
                                  self.token, wait)
                failed = False
            except FencepostError:
                fence, failed = None, True
            finally:
                conn.close()
            with self._cv:
                self._poll_conn = None
                if self._stop_requested or self.lost.is_set():
                    return
                if fence is not None:
                    where = (f"{fence.name} (of the lease {self.name})"
                             if fence.name != self.name else self.name)
                    self._fenced = (
                        f"the fence {where} went above token {self.token} "
                        f"(to {fence.token}): another holder was granted the "
                        "lease, or the fence was bumped")
                    self._cv.notify_all()
                    return
                if failed:
                    self._cv.wait(after_failure)
