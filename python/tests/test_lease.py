"""Lease and LeaderElector against a scripted lease server: a Client whose
acquire_lease answers as each test says (refuses, answers late, answers
with another token, never answers while the test holds it), so each rule
of the keeper is seen alone, without the long poll that would hide it.
Every test here failed against the keeper before its rule was kept."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Optional

import pytest

import fencepost
from conftest import users_handler

TTL = 1.0
MARGIN = 0.1
RENEW = TTL / 3


def grant(token: int = 7, holder: str = "me") -> fencepost.LeaseInfo:
    return fencepost.LeaseInfo("l", holder, token, int(TTL * 1000),
                               int(TTL * 1000), "", "", 1)


class ScriptedServer(fencepost.Client):
    """acquire_lease: the first call is granted (token 7); each later one
    (a renewal) runs ``renewal(sent)`` (``sent``: when it was called, on
    the monotonic clock), default a renewal granted at once. Nothing
    listens at its URLs: the long poll, when on, fails and waits."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9", "http://127.0.0.1:9",
                         timeout=0.5)
        self.renewal: Callable[[float], fencepost.LeaseInfo] = (
            lambda sent: grant())
        self.sent: list[float] = []
        self.answered: list[float] = []
        self.released: list[int] = []
        self.gate = threading.Event()  # hold_renewals() waits on it
        self.grant_delay = 0.0  # before the first call's answer

    def acquire_lease(self, name: str, holder: str, ttl: float, *,
                      timeout: Optional[float] = None
                      ) -> fencepost.LeaseInfo:
        sent = time.monotonic()
        first = not self.sent
        self.sent.append(sent)
        if first:
            time.sleep(self.grant_delay)
        info = grant() if first else self.renewal(sent)
        self.answered.append(time.monotonic())
        return info

    def release_lease(self, name: str, holder: str, token: int, *,
                      timeout: Optional[float] = None) -> None:
        self.released.append(token)

    def hold_renewals(self) -> None:
        """Renewals wait, whatever their timeout, until ``gate`` is set,
        then succeed: a keeper that runs late, as after a pause of the
        whole process when its thread is scheduled last."""
        def held(sent: float) -> fencepost.LeaseInfo:
            self.gate.wait(30)
            return grant()
        self.renewal = held


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer()
    yield s
    s.gate.set()


def keep(server: ScriptedServer, **options: Any) -> fencepost.Lease:
    return fencepost.Lease.acquire(server, "l", ttl=TTL, holder="me",
                                   safety_margin=MARGIN, watch_fence=False,
                                   **options)


def wait_for(predicate: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# -- the keeper's rules, one at a time -----------------------------------

def test_a_refused_renewal_is_a_loss_at_once(server: ScriptedServer) -> None:
    def refused(sent: float) -> fencepost.LeaseInfo:
        raise fencepost.LeaseHeld(409, {"type": "lease-held",
                                        "holder": "other"})
    server.renewal = refused
    lease = keep(server)
    assert lease.lost.wait(5)
    assert lease.reason == "the renewal was refused (held by other)"
    assert lease.lost_at is not None
    # At the first renewal, not at the deadline.
    assert lease.lost_at < lease.held_until


def test_a_renewal_refused_for_good_otherwise_is_a_loss_at_once(
        server: ScriptedServer) -> None:
    """A final refusal other than 409 (here a 404) ends the lease at the
    first renewal too, not at the deadline."""
    def gone(sent: float) -> fencepost.LeaseInfo:
        raise fencepost.Problem(404, {"type": "not-found",
                                      "detail": "no such lease"})
    server.renewal = gone
    lease = keep(server)
    assert lease.lost.wait(5)
    assert lease.reason == ("the renewal was refused with "
                            "404 not-found: no such lease")
    assert lease.lost_at is not None and lease.lost_at < lease.held_until


def test_a_renewal_with_another_token_is_a_loss(server: ScriptedServer
                                                ) -> None:
    server.renewal = lambda sent: grant(token=8)
    lease = keep(server)
    assert lease.lost.wait(5)
    assert lease.reason == ("the renewal was answered with token 8 "
                            "instead of 7")
    assert lease.lost_at is not None and lease.lost_at < lease.held_until


def test_the_ttl_runs_from_the_renewals_send(server: ScriptedServer) -> None:
    def slow(sent: float) -> fencepost.LeaseInfo:
        time.sleep(0.3)
        return grant()
    server.renewal = slow
    lease = keep(server)
    wait_for(lambda: len(server.answered) >= 2)
    wait_for(lambda: lease.held_until > server.sent[0] + TTL - MARGIN)
    sent, answered = server.sent[1], server.answered[1]
    assert answered - sent >= 0.3
    # From the send: the server may have renewed it as the request left.
    assert lease.held_until == pytest.approx(sent + TTL - MARGIN, abs=0.1)
    lease.stop()


def test_the_ttl_runs_from_the_acquires_send(server: ScriptedServer
                                             ) -> None:
    """Lease.acquire's and the elector's: a grant answered 0.3 s after it
    was sent is held until the send + TTL - margin."""
    # Renewals wait: held_until is the grant's alone, however late this
    # thread reads it.
    server.grant_delay = 0.3
    server.hold_renewals()
    lease = keep(server)
    assert lease.held_until == pytest.approx(
        server.sent[0] + TTL - MARGIN, abs=0.1)
    server.gate.set()
    lease.stop()
    server2 = ScriptedServer()
    server2.grant_delay = 0.3
    server2.hold_renewals()
    e = elector(server2)
    try:
        with e.leadership(interrupt=False):
            elected = e.lease
            assert elected is not None
            assert elected.held_until == pytest.approx(
                server2.sent[0] + TTL - MARGIN, abs=0.1)
            server2.gate.set()
    finally:
        server2.gate.set()


def test_a_renewal_answered_after_the_deadline_does_not_extend_it(
        server: ScriptedServer) -> None:
    server.hold_renewals()
    lost: list[str] = []
    lease = keep(server, on_lost=lost.append)
    until = lease.held_until
    wait_for(lambda: time.monotonic() > until + 0.1)
    server.gate.set()  # the answer comes now, after the deadline
    assert lease.lost.wait(5)
    assert lease.held_until == until
    assert lease.reason is not None
    assert lease.reason.startswith("no renewal succeeded within the TTL")
    assert lost == [lease.reason]


# -- check() and sleep() go by the clock, not by the keeper ----------------

def test_lease_check_raises_at_held_until_while_the_keeper_is_late(
        server: ScriptedServer) -> None:
    server.hold_renewals()
    lease = keep(server)
    lease.check()
    wait_for(lambda: time.monotonic() >= lease.held_until)
    assert not lease.lost.is_set()  # the keeper has not run
    with pytest.raises(fencepost.LeadershipLost) as lost:
        lease.check()
    assert lost.value.reason.startswith("no renewal succeeded")
    # Stopped while the keeper is still late: it never notices the loss,
    # so stop() says so itself; then there is nothing to release.
    stopping = threading.Thread(target=lease.stop)
    stopping.start()
    wait_for(lambda: lease._stop_requested)
    server.gate.set()
    stopping.join()
    assert lease.lost.is_set()
    assert lease.reason is not None
    assert lease.reason.startswith("no renewal succeeded")
    assert lease.release() is False
    assert server.released == []


def test_lease_sleep_waits_at_most_until_held_until(
        server: ScriptedServer) -> None:
    server.hold_renewals()
    lease = keep(server)
    with pytest.raises(fencepost.LeadershipLost):
        lease.sleep(30)
    assert time.monotonic() - lease.held_until < 5  # not 30 s
    assert not lease.lost.is_set()


def elector(server: ScriptedServer, **options: Any
            ) -> fencepost.LeaderElector:
    return fencepost.LeaderElector(server, "l", ttl=TTL, holder="me",
                                   safety_margin=MARGIN, **options)


def test_elector_check_and_sleep_go_by_the_clock(server: ScriptedServer
                                                 ) -> None:
    server.hold_renewals()
    lost: list[str] = []
    e = elector(server, on_lost=lambda t, r: lost.append(r))
    with pytest.raises(fencepost.LeadershipLost):
        with e.leadership(interrupt=False):
            lease = e.lease
            assert lease is not None
            e.check()
            with pytest.raises(fencepost.LeadershipLost) as slept:
                e.sleep(30)
            assert time.monotonic() - lease.held_until < 5  # not 30 s
            assert slept.value.reason.startswith("no renewal succeeded")
            with pytest.raises(fencepost.LeadershipLost):
                e.check()
            assert not e.is_leader
            server.gate.set()
    assert len(lost) == 1 and lost[0].startswith("no renewal succeeded")


def test_run_work_sees_the_deadline_while_the_keeper_is_late(
        server: ScriptedServer) -> None:
    server.hold_renewals()
    wrote_late: list[float] = []
    reasons: list[str] = []
    e: fencepost.LeaderElector

    def work(token: int) -> None:
        lease = e.lease
        assert lease is not None
        try:
            while True:
                e.check()  # raises by held_until: no write after it
                if time.monotonic() > lease.held_until:
                    wrote_late.append(time.monotonic() - lease.held_until)
                time.sleep(0.005)
        finally:
            stopped.set()

    stopped = threading.Event()
    e = elector(server, on_elected=work,
                on_lost=lambda t, r: (reasons.append(r), e.stop()))
    e.start()
    assert stopped.wait(10)
    server.gate.set()  # the keeper runs now
    wait_for(lambda: bool(reasons))
    e.stop(timeout=10)
    assert wrote_late == []
    assert reasons[0].startswith("no renewal succeeded")


# -- the interrupt and the user's own signal handler ----------------------

def test_a_users_sigusr1_in_the_body_reaches_the_users_handler(
        server: ScriptedServer) -> None:
    with users_handler() as got:
        handler = signal.getsignal(signal.SIGUSR1)
        e = elector(server)
        with e.leadership(interrupt=True) as token:
            assert signal.getsignal(signal.SIGUSR1) != handler
            os.kill(os.getpid(), signal.SIGUSR1)
            wait_for(lambda: got == [signal.SIGUSR1])
            e.check()  # still the leader: the signal was the user's
        assert token == 7
        assert signal.getsignal(signal.SIGUSR1) == handler
        assert got == [signal.SIGUSR1]


def test_the_term_ending_as_the_body_is_left_still_ends_it_whole(
        server: ScriptedServer) -> None:
    """The term ends (the keeper's callback, and the signal it sends) the
    moment the ``with`` starts to be left, before the elector has disarmed
    the signal: leaving still raises LeadershipLost once, calls on_lost,
    stops the keeper and puts the user's handler back."""
    lost: list[tuple[int, str]] = []
    with users_handler() as got:
        handler = signal.getsignal(signal.SIGUSR1)
        e = elector(server, on_lost=lambda t, r: lost.append((t, r)))
        injected: list[str] = []

        def at_exit(frame: FrameType, event: str, arg: Any) -> None:
            if (not injected and event == "call"
                    and frame.f_code.co_name == "__exit__"
                    and frame.f_code.co_filename == contextlib.__file__):
                injected.append("term over")
                with lease._cv:  # as the keeper ends it: lost, on_lost
                    lease._lose("the fence went above token 7")

        with pytest.raises(fencepost.LeadershipLost) as raised:
            with e.leadership(interrupt=True):
                lease = e.lease
                assert lease is not None
                sys.setprofile(at_exit)
        sys.setprofile(None)
        assert injected
        assert raised.value.reason == "the fence went above token 7"
        assert lost == [(7, "the fence went above token 7")]
        assert signal.getsignal(signal.SIGUSR1) == handler
        assert got == []  # the elector's signal is not the user's
        assert not lease._thread.is_alive()
        with pytest.raises(fencepost.LeadershipLost):
            e.check()


def test_stop_from_a_leadership_body_asks_and_returns(
        server: ScriptedServer) -> None:
    lost: list[str] = []
    e = elector(server, on_lost=lambda t, r: lost.append(r))
    raised: list[str] = []

    def lead() -> None:
        with e.leadership(interrupt=False):
            e.stop()  # from the body: it cannot wait for the body's end
            try:
                e.check()
            except fencepost.LeadershipLost as ended:
                raised.append(ended.reason)

    leader = threading.Thread(target=lead, daemon=True)
    leader.start()
    leader.join(5)
    assert not leader.is_alive(), "stop() waits for the body it runs in"
    assert raised == ["stopped"] and lost == ["stopped"]
    assert server.released == [7]


def test_a_lease_stopped_in_time_is_not_lost_later(server: ScriptedServer
                                                   ) -> None:
    lease = keep(server)
    lease.stop()
    wait_for(lambda: time.monotonic() > lease.held_until)
    lease.stop()  # again, past the deadline: it was stopped, not lost
    assert not lease.lost.is_set() and lease.reason is None
    assert lease.release() is True and server.released == [7]


def test_a_fence_seen_before_the_stop_is_a_loss(server: ScriptedServer
                                                ) -> None:
    """The watch saw the fence go above the token and the keeper has not
    run since (its next renewal is a third of the TTL away): stop() says
    the lease was lost, with the fence's reason, whichever thread ran
    first, and release() sends nothing."""
    lost: list[str] = []
    lease = keep(server, on_lost=lost.append)
    why = "the fence l went above token 7 (to 8)"
    with lease._cv:  # as the watch leaves it, the keeper not yet woken
        lease._fenced = why
    lease.stop()
    assert lease.lost.is_set() and lease.reason == why
    assert lost == []  # stopped: on_lost is not called, as at held_until
    assert lease.release() is False and server.released == []
