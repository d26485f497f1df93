"""Leader election on a fencepost lease: the Python twin of the C++
LeaderElector."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Optional

from fencepost.client import Client, LeaseInfo
from fencepost.errors import FencepostError, LeadershipLost
from fencepost.lease import Lease, default_holder_id, jittered, try_acquire

ElectedCallback = Callable[[int], None]
LostCallback = Callable[[int, str], None]
ErrorCallback = Callable[[str], None]

WORK_RETURNED = "the work returned"
STOPPED = "stopped"


class NotElected(FencepostError):
    """``leadership()`` ended its campaign without a grant: its timeout
    passed, or ``stop()`` was called."""


class LeaderElector:
    """Campaigns for the lease ``name``, leads while it holds it, and
    campaigns again.

    A campaign tries to acquire the lease, retrying every ``retry_period``
    (a third of the TTL by default) jittered by ±50% while another holder
    has it; a failed try (unreachable, 5xx) is reported to ``on_error`` and
    retried the same way. Once elected, a :class:`Lease` renews the lease
    every third of the TTL on a thread of its own and watches its fence;
    the term ends:

    - at once when a renewal is refused or answered with another token;
    - at once when the lease's fence goes above the token (the long poll:
      another holder was granted the lease, or it was bumped), within a
      round trip rather than at the next renewal;
    - when no renewal succeeded before the last successful one's send time
      + ttl - safety_margin (``max(ttl/10, 50 ms)``) on this process's
      monotonic clock, before the server can grant the lease to another;
    - when ``stop()`` is called, or the work returns.

    Two ways to lead:

    ``run()`` (or ``start()``, the same on a thread of its own) calls
    ``on_elected(token)`` on a work thread of its own for each term: that
    is the work; it must return soon after the term ends, which it learns
    from ``check()`` (raises LeadershipLost) or ``sleep(s)`` (raises as
    soon as it is over). Both go by the clock too: they raise once
    ``time.monotonic()`` passes the lease's ``held_until``, even before the
    keeper's thread has noticed (after a pause of the whole process it may
    run last), and ``sleep`` waits at most until then. Its return ends the
    term too. Then the lease is released if still held, ``on_lost(token,
    reason)`` is called on the run() thread exactly once per
    ``on_elected``, and the campaign starts again (a jittered retry period
    later when the work returned by itself).

    ``with elector.leadership() as token:`` campaigns in the caller's thread
    and runs the body as the one term's work (``on_elected`` and
    ``on_lost`` are then called before and after it, on that thread). When
    the term ends before the body does, ``check()``/``sleep()`` raise
    LeadershipLost in any thread (``sleep`` wakes the moment it ends: the
    fence's long poll ends it within a round trip of another holder's
    grant or a bump), and if the body still finishes normally, leaving the
    ``with`` raises it. No signal handler is touched.

    With ``leadership(interrupt=True)`` (the main thread only) it is also
    raised at once wherever the body is, through a signal
    (``interrupt_signal``, SIGUSR1) sent to the main thread whose handler,
    installed for the body only, raises it. The handler raises only in the
    body's own code: when the signal finds the main thread inside this
    module, the lease's or ``contextlib``'s code (a lock taken, the
    ``with`` being left), it is sent again a moment later, and once the
    body is left it is dropped (leaving raises). A signal this elector did
    not send (a user's SIGUSR1) goes to the handler that was there before,
    or to the signal's default action; that handler is back when the
    ``with`` is left.

    Thread safety: ``stop()``, ``check()``, ``sleep()`` and the properties
    may be called from any thread; ``run()``/``start()``/``leadership()``
    one at a time.
    """

    def __init__(self, client: Client, name: str, *, ttl: float = 10.0,
                 holder: Optional[str] = None,
                 on_elected: Optional[ElectedCallback] = None,
                 on_lost: Optional[LostCallback] = None,
                 on_error: Optional[ErrorCallback] = None,
                 retry_period: Optional[float] = None,
                 safety_margin: Optional[float] = None,
                 interrupt_signal: int = signal.SIGUSR1) -> None:
        if not name:
            raise ValueError("the lease needs a name")
        if not 0.1 <= ttl <= 3600:
            raise ValueError("the lease TTL must be from 0.1 s to 1 h")
        self.client = client
        self.name = name
        self.ttl = ttl
        self.holder = holder or default_holder_id()
        self.retry_period = retry_period or max(ttl / 3, 0.001)
        self.safety_margin = safety_margin or max(ttl / 10, 0.05)
        if self.safety_margin >= ttl:
            raise ValueError("the safety margin must be below the TTL")
        self.on_elected = on_elected
        self.on_lost = on_lost
        self.on_error = on_error
        self.interrupt_signal = interrupt_signal
        self._cv = threading.Condition()
        self._stop_requested = False
        self._running = False
        self._lease: Optional[Lease] = None
        self._term_over = threading.Event()
        self._term_reason: Optional[str] = None
        self._armed = False  # leadership(): the signal may be sent
        self._sent = 0  # interrupts sent and not yet handled
        self._resend_due = False
        self._previous: Any = signal.SIG_DFL  # the handler it replaced
        self._thread: Optional[threading.Thread] = None
        self._own_threads: set[int] = set()  # run()'s and the work's

    # -- the current term ----------------------------------------------

    @property
    def lease(self) -> Optional[Lease]:
        """The current term's Lease, None between terms."""
        with self._cv:
            return self._lease

    @property
    def token(self) -> Optional[int]:
        lease = self.lease
        return None if lease is None else lease.token

    @property
    def is_leader(self) -> bool:
        with self._cv:
            lease, over = self._lease, self._term_over.is_set()
        return (lease is not None and not over
                and time.monotonic() < lease.held_until)

    def check(self) -> None:
        """Raises LeadershipLost when there is no term, it is over, or
        ``time.monotonic()`` has passed the lease's ``held_until``."""
        with self._cv:
            lease, over = self._lease, self._term_over.is_set()
            reason = self._term_reason
        if lease is None:
            raise LeadershipLost("not elected", 0)
        try:
            if over:
                raise LeadershipLost(reason or STOPPED, lease.token)
            lease.check()
        except LeadershipLost:
            with self._cv:  # told now: the signal would tell it twice
                if threading.main_thread() is threading.current_thread():
                    self._armed = False
            raise

    def sleep(self, seconds: float) -> None:
        """Waits ``seconds``; raises LeadershipLost as soon as the term is
        over or ``held_until`` passes (at once when it is already)."""
        end = time.monotonic() + seconds
        while True:
            self.check()
            lease = self.lease
            now = time.monotonic()
            if now >= end or lease is None:
                return
            # held_until may have moved on meanwhile: then this waits again.
            self._term_over.wait(min(end, lease.held_until) - now)

    # -- run / start / stop --------------------------------------------

    def run(self) -> None:
        """Campaigns, leads and campaigns again until stop(); returns once
        the last term has ended. Returns at once when stop() came first."""
        with self._cv:
            if self._running:
                raise RuntimeError("the elector runs already")
            if self._stop_requested:
                return
            self._running = True
            self._own_threads.add(threading.get_ident())
        try:
            while True:
                lease = self._campaign(None)
                if lease is None:
                    break
                self._lead(lease)
        finally:
            with self._cv:
                self._running = False
                self._own_threads.discard(threading.get_ident())
                self._cv.notify_all()

    def start(self) -> threading.Thread:
        """run() on a daemon thread of its own."""
        self._thread = threading.Thread(target=self.run, daemon=True,
                                        name=f"fencepost-elector-{self.name}")
        self._thread.start()
        return self._thread

    def stop(self, timeout: Optional[float] = None) -> None:
        """Ends the current term and the campaign, and waits (``timeout``
        seconds at most) until run() is about to return: the work returned
        and the lease was released. From the work, a callback or a
        leadership() body it only asks and returns at once. An acquire or
        release in flight is not cut short: it may wait for it, the
        client's timeout each."""
        with self._cv:
            self._stop_requested = True
            self._end_term_locked(STOPPED)
            self._cv.notify_all()
        with self._cv:
            if threading.get_ident() in self._own_threads:
                return
            self._cv.wait_for(lambda: not self._running, timeout)

    # -- leadership() --------------------------------------------------

    @contextmanager
    def leadership(self, timeout: Optional[float] = None,
                   interrupt: bool = False) -> Iterator[int]:
        """Campaigns until elected (NotElected when ``timeout`` seconds pass
        or stop() is called first) and yields the token; the body is the
        term's work, told of the term's end by check()/sleep() and on
        leaving. ``interrupt=True`` (the main thread only) also raises
        LeadershipLost in the main thread through ``interrupt_signal`` the
        moment the term ends, with a handler installed for the body only;
        by default no signal handler is touched."""
        if interrupt and (threading.current_thread()
                          is not threading.main_thread()):
            raise ValueError("interrupt=True needs the main thread")
        with self._cv:
            if self._running:
                raise RuntimeError("the elector runs already")
            self._running = True
            # stop() from the body asks and returns, as from run()'s work.
            self._own_threads.add(threading.get_ident())
        try:
            lease = self._campaign(
                None if timeout is None else time.monotonic() + timeout)
            if lease is None:
                raise NotElected("stopped" if self._stop_requested else
                                 f"not elected within {timeout} s")
            yield from self._lead_here(lease, interrupt)
        finally:
            with self._cv:
                self._running = False
                self._own_threads.discard(threading.get_ident())
                self._cv.notify_all()

    def _lead_here(self, lease: Lease, interrupt: bool) -> Iterator[int]:
        previous: Any = None
        if interrupt:
            with self._cv:
                self._previous = signal.getsignal(self.interrupt_signal)
                self._sent = 0
            previous = signal.signal(self.interrupt_signal, self._on_signal)
        failure: Optional[str] = None
        body_raised = False
        try:
            if interrupt:
                with self._cv:
                    self._armed = True
                    if self._term_over.is_set():
                        self._send_interrupt_locked()
            if self.on_elected is not None:
                self.on_elected(lease.token)
            yield lease.token
        except LeadershipLost:
            body_raised = True
            raise
        except BaseException as e:
            body_raised = True
            failure = f"the work threw: {e!r}"
            raise
        finally:
            try:
                if interrupt:
                    self._disarm(previous)
            finally:
                reason = self._end_lease(lease, failure)
            lost_in_body = reason not in (WORK_RETURNED, STOPPED) and (
                failure is None)
            if not body_raised and lost_in_body:
                raise LeadershipLost(reason, lease.token)

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        with self._cv:
            ours = self._sent > 0
            if ours:
                self._sent -= 1
            over = self._armed and self._term_over.is_set()
            lease, reason = self._lease, self._term_reason
            if ours and over and lease is not None:
                if _inside_the_machinery(frame):
                    self._resend_later_locked()
                    return
                self._armed = False  # once per term
                raise LeadershipLost(reason or STOPPED, lease.token)
            previous = self._previous
        if not ours:
            _chain(signum, frame, previous, self._on_signal)

    def _send_interrupt_locked(self) -> None:
        main = threading.main_thread().ident
        if self._armed and main is not None:
            self._sent += 1
            signal.pthread_kill(main, self.interrupt_signal)

    def _resend_later_locked(self) -> None:
        """The signal found the main thread in code that must not raise
        (a lock held, the ``with`` being left): sent again in 2 ms, by
        when it is out of it or disarmed."""
        if self._resend_due:
            return
        self._resend_due = True

        def resend() -> None:
            with self._cv:
                self._resend_due = False
                self._send_interrupt_locked()

        timer = threading.Timer(0.002, resend)
        timer.daemon = True
        timer.start()

    def _disarm(self, previous: Any) -> None:
        """Stops the signal for good, then restores its previous handler:
        the interrupts sent before are handled (and dropped, as disarmed)
        or taken with sigtimedwait while blocked; a user's signal taken
        that way is raised again once the previous handler is back."""
        with self._cv:
            self._armed = False
        sig = self.interrupt_signal
        users = 0
        signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
        try:
            try:
                _run_pending_handlers()  # a user's handler may raise here
            finally:
                while signal.sigtimedwait({sig}, 0) is not None:
                    with self._cv:
                        if self._sent > 0:
                            self._sent -= 1
                        else:
                            users += 1
                signal.signal(sig, previous if previous is not None
                              else signal.SIG_DFL)
                with self._cv:
                    self._sent = 0
                    self._previous = signal.SIG_DFL
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        if users:
            signal.raise_signal(sig)  # to the previous handler now

    # -- campaigns and terms -------------------------------------------

    def _campaign(self, deadline: Optional[float]) -> Optional[Lease]:
        while True:
            with self._cv:
                if self._stop_requested:
                    return None
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            grant, sent, why = try_acquire(
                self.client, self.name, self.holder, self.ttl,
                None if left is None else min(self.client.timeout, left))
            if grant is not None:
                return self._begin_term(grant, sent)
            if not why.startswith("held") and self.on_error is not None:
                self.on_error("acquire: " + why)
            pause = jittered(self.retry_period)
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            with self._cv:
                self._cv.wait_for(lambda: self._stop_requested, pause)

    def _begin_term(self, grant: LeaseInfo, sent: float) -> Lease:
        lease = Lease(self.client, self.name, self.holder, grant, sent,
                      ttl=self.ttl, safety_margin=self.safety_margin,
                      on_lost=self._on_lease_lost)
        with self._cv:
            self._lease = lease
            self._term_over.clear()
            self._term_reason = None
            if lease.lost.is_set():
                self._end_term_locked(lease.reason or "lost")
            elif self._stop_requested:
                self._end_term_locked(STOPPED)
        return lease

    def _on_lease_lost(self, reason: str) -> None:
        with self._cv:
            self._end_term_locked(reason)
            self._cv.notify_all()

    def _end_term_locked(self, reason: str) -> None:
        if self._lease is None or self._term_over.is_set():
            return
        self._term_reason = reason
        self._term_over.set()
        self._send_interrupt_locked()

    def _end_lease(self, lease: Lease, failure: Optional[str]) -> str:
        """Ends the term: stops the keeper, releases the lease if still
        held, calls on_lost; returns the reason."""
        with self._cv:
            self._end_term_locked(failure or WORK_RETURNED)
        lease.stop()
        reason = lease.reason
        if reason is None:
            try:
                lease.release()
            except FencepostError as e:
                if self.on_error is not None:
                    self.on_error(f"release: {e}")
            with self._cv:
                reason = failure or (STOPPED if self._stop_requested
                                     else WORK_RETURNED)
        with self._cv:
            self._term_reason = reason
        if self.on_lost is not None:
            self.on_lost(lease.token, reason)
        with self._cv:
            self._lease = None
        return reason

    def _lead(self, lease: Lease) -> None:
        failure: list[str] = []
        done = threading.Event()

        def work() -> None:
            with self._cv:
                self._own_threads.add(threading.get_ident())
            try:
                if self.on_elected is not None:
                    self.on_elected(lease.token)
                else:
                    self._term_over.wait()
            except LeadershipLost:
                pass
            except BaseException as e:  # the term ends as if it returned
                failure.append(f"the work threw: {e!r}")
            finally:
                done.set()
                with self._cv:
                    self._own_threads.discard(threading.get_ident())
                    self._cv.notify_all()

        worker = threading.Thread(target=work, daemon=True,
                                  name=f"fencepost-work-{self.name}")
        worker.start()
        with self._cv:
            self._cv.wait_for(lambda: done.is_set()
                              or self._term_over.is_set())
            if done.is_set() and not self._term_over.is_set():
                reason = failure[0] if failure else WORK_RETURNED
                self._end_term_locked(reason)
        worker.join()
        reason = self._end_lease(lease, failure[0] if failure else None)
        if reason == WORK_RETURNED:
            # A work that returns at once must not turn into a loop of
            # grants.
            with self._cv:
                self._cv.wait_for(lambda: self._stop_requested,
                                  jittered(self.retry_period))


def _run_pending_handlers() -> None:
    """A Python-level call: the interpreter runs the handlers of signals
    that arrived before it."""
    return None


# Code the interrupt must not raise in: a lock of this module or of the
# lease may be held there, or the ``with`` is being left (contextlib).
_MACHINERY = frozenset(
    os.path.normcase(os.path.abspath(path)) for path in
    (__file__, sys.modules[Lease.__module__].__file__ or "",
     contextlib.__file__))
_THREADING = os.path.normcase(os.path.abspath(threading.__file__))


def _inside_the_machinery(frame: Optional[FrameType]) -> bool:
    """Whether the innermost frame, below threading's own (a lock or a
    condition taken from this module's code), is in _MACHINERY."""
    while frame is not None and os.path.normcase(os.path.abspath(
            frame.f_code.co_filename)) == _THREADING:
        frame = frame.f_back
    return frame is not None and os.path.normcase(os.path.abspath(
        frame.f_code.co_filename)) in _MACHINERY


def _chain(signum: int, frame: Optional[FrameType], previous: Any,
           ours: Any) -> None:
    """A signal this elector did not send: to the handler it replaced, or
    to the signal's default action (SIGUSR1's ends the process)."""
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:
        signal.signal(signum, signal.SIG_DFL)
        try:
            signal.raise_signal(signum)
        finally:
            signal.signal(signum, ours)
