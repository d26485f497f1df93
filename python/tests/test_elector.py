"""Lease and LeaderElector in this process against the real binary."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import fencepost
from conftest import Server, users_handler


def bump_later(client: fencepost.Client, key: str, token: int,
               delay: float = 0.3) -> threading.Thread:
    thread = threading.Thread(
        target=lambda: (time.sleep(delay), client.bump(key, token=token)))
    thread.start()
    return thread


def test_leadership_interrupts_the_main_thread_when_fenced(
        client: fencepost.Client) -> None:
    lost: list[tuple[int, str]] = []
    elector = fencepost.LeaderElector(
        client, "e/lead", ttl=30.0, on_lost=lambda t, r: lost.append((t, r)))
    with pytest.raises(fencepost.LeadershipLost) as raised:
        with elector.leadership(interrupt=True) as token:
            bumper = bump_later(client, "e/lead", token + 1)
            slept = time.monotonic()
            time.sleep(60)  # interrupted: the signal's handler raises
    # Within a round trip of the bump (0.3 s in), not when the sleep ends.
    assert time.monotonic() - slept < 5
    bumper.join()
    assert raised.value.token == token
    assert "went above token" in raised.value.reason
    assert lost == [(token, raised.value.reason)]
    assert not elector.is_leader
    # The handler is gone: the signal's default is back.
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


def test_leadership_leaves_sigusr1_to_the_user_by_default(
        client: fencepost.Client) -> None:
    """On the main thread, leadership() without interrupt=True installs
    no handler: the user's is there before, in and after the body, gets
    the user's signal, and the elector sends none when the term ends."""
    assert threading.current_thread() is threading.main_thread()
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    elector = fencepost.LeaderElector(client, "e/sig", ttl=30.0)
    with elector.leadership():
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    with users_handler() as got:
        handler = signal.getsignal(signal.SIGUSR1)
        with pytest.raises(fencepost.LeadershipLost):
            with elector.leadership() as token:
                assert signal.getsignal(signal.SIGUSR1) is handler
                os.kill(os.getpid(), signal.SIGUSR1)
                deadline = time.monotonic() + 5
                while got != [signal.SIGUSR1]:
                    assert time.monotonic() < deadline
                    time.sleep(0.005)
                elector.check()  # the user's signal, not a loss
                bump_later(client, "e/sig", token + 1, delay=0).join()
                elector.sleep(30)  # the watch ends the term, no signal
        assert signal.getsignal(signal.SIGUSR1) is handler
        time.sleep(0.05)  # a late signal of the elector's would land here
        assert got == [signal.SIGUSR1]


def test_leadership_sleep_stops_at_once_through_the_fence_watch(
        client: fencepost.Client) -> None:
    """The default (no interrupt): a body in elector.sleep(60) learns of
    the fence raised by another holder through the fence watch, within a
    round trip, not at the next renewal (10 s away) nor the sleep's end."""
    lost: list[str] = []
    elector = fencepost.LeaderElector(client, "e/watch", ttl=30.0,
                                      on_lost=lambda t, r: lost.append(r))
    bumped: list[float] = []

    def bump(token: int) -> None:
        time.sleep(0.3)
        client.bump("e/watch", token=token)
        bumped.append(time.monotonic())

    with pytest.raises(fencepost.LeadershipLost) as raised:
        with elector.leadership() as token:
            bumper = threading.Thread(target=bump, args=(token + 1,))
            bumper.start()
            try:
                elector.sleep(60)
            finally:
                woke = time.monotonic()
                bumper.join()
    assert bumped and woke - bumped[0] < 1.0
    assert raised.value.token == token
    assert "went above token" in raised.value.reason
    assert lost == [raised.value.reason]


def threads_of(lease: str) -> list[str]:
    """The names of the package's threads for ``lease``, sorted."""
    return sorted(t.name for t in threading.enumerate()
                  if t.name.startswith("fencepost-")
                  and t.name.endswith("-" + lease))


def test_threads_per_leader(client: fencepost.Client) -> None:
    """A leadership() body runs with the lease's two threads (the keeper's
    renewals, the fence's long poll); run() adds a work thread of its
    own."""
    elector = fencepost.LeaderElector(client, "e/threads", ttl=30.0)
    with elector.leadership():
        assert threads_of("e/threads") == [
            "fencepost-fence-watch-e/threads", "fencepost-lease-e/threads"]
    seen: list[list[str]] = []

    def work(token: int) -> None:
        seen.append(threads_of("e/run-threads"))
        elector.stop()

    elector = fencepost.LeaderElector(client, "e/run-threads", ttl=30.0,
                                      on_elected=work)
    elector.start()
    deadline = time.monotonic() + 10
    while not seen:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    elector.stop(timeout=10)
    assert seen == [["fencepost-elector-e/run-threads",
                     "fencepost-fence-watch-e/run-threads",
                     "fencepost-lease-e/run-threads",
                     "fencepost-work-e/run-threads"]]


def test_interrupt_off_the_main_thread_is_refused_before_campaigning(
        client: fencepost.Client) -> None:
    elector = fencepost.LeaderElector(client, "e/offmain", ttl=5.0)
    refused: list[BaseException] = []

    def lead() -> None:
        try:
            with elector.leadership(interrupt=True):
                pass
        except ValueError as e:
            refused.append(e)

    thread = threading.Thread(target=lead)
    thread.start()
    thread.join(10)
    assert len(refused) == 1
    with pytest.raises(fencepost.NotFound):  # never acquired
        client.lease("e/offmain")
    assert threads_of("e/offmain") == []
    with elector.leadership():  # the elector is free again
        pass


def test_leadership_without_interrupt_raises_from_sleep_and_at_exit(
        client: fencepost.Client) -> None:
    elector = fencepost.LeaderElector(client, "e/quiet", ttl=30.0)
    with pytest.raises(fencepost.LeadershipLost):
        with elector.leadership(interrupt=False) as token:
            bump_later(client, "e/quiet", token + 1).join()
            elector.sleep(60)
    with pytest.raises(fencepost.LeadershipLost):
        with elector.leadership(interrupt=False) as token:
            bump_later(client, "e/quiet", token + 1).join()
            deadline = time.monotonic() + 10
            while elector.is_leader and time.monotonic() < deadline:
                time.sleep(0.01)  # the body ignores it: the exit raises


def test_leadership_releases_on_a_normal_exit(client: fencepost.Client) -> None:
    elected: list[int] = []
    lost: list[str] = []
    elector = fencepost.LeaderElector(
        client, "e/rel", ttl=5.0, holder="me", on_elected=elected.append,
        on_lost=lambda t, r: lost.append(r))
    with elector.leadership() as token:
        elector.check()
        assert client.lease("e/rel").holder == "me"
        client.put("e/data", "x", token=token)
    assert elected == [token] and lost == ["the work returned"]
    assert client.lease("e/rel").holder is None
    with pytest.raises(fencepost.LeadershipLost):
        elector.check()


def test_not_elected_within_the_timeout(client: fencepost.Client) -> None:
    client.acquire_lease("e/busy", "other", 30.0)
    elector = fencepost.LeaderElector(client, "e/busy", ttl=1.0)
    with pytest.raises(fencepost.NotElected):
        with elector.leadership(timeout=0.5):
            pass


def test_run_terms_callbacks_and_handover(client: fencepost.Client) -> None:
    events: list[str] = []
    done = threading.Event()

    def work(token: int) -> None:
        events.append(f"a elected {token}")
        first.sleep(60)

    first = fencepost.LeaderElector(
        client, "e/run", ttl=1.0, holder="a", on_elected=work,
        on_lost=lambda t, r: events.append(f"a lost {t} {r}"))
    second = fencepost.LeaderElector(
        client, "e/run", ttl=1.0, holder="b",
        on_elected=lambda t: (events.append(f"b elected {t}"), done.set()),
        on_lost=lambda t, r: events.append(f"b lost {t} {r}"))
    first.start()
    deadline = time.monotonic() + 10
    while not first.is_leader:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    second.start()
    time.sleep(1.5)  # b campaigns while a renews: a keeps it
    assert events == ["a elected 1"]
    assert first.token == 1 and second.token is None
    first.stop()
    assert events[1] == "a lost 1 stopped"
    assert done.wait(10)
    second.stop()
    assert events[2] == "b elected 2"
    assert events[3].startswith("b lost 2 ")


def test_run_work_that_throws_or_returns_ends_the_term(
        client: fencepost.Client) -> None:
    reasons: list[str] = []
    terms: list[int] = []

    def work(token: int) -> None:
        terms.append(token)
        if len(terms) == 1:
            raise RuntimeError("boom")

    elector = fencepost.LeaderElector(
        client, "e/throw", ttl=1.0, on_elected=work, retry_period=0.05,
        on_lost=lambda t, r: reasons.append(r))
    elector.start()
    deadline = time.monotonic() + 10
    while len(reasons) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    elector.stop()
    assert reasons[0].startswith("the work threw: RuntimeError('boom')")
    assert reasons[1] == "the work returned"
    assert terms[1] == terms[0] + 1  # released, then granted again


def test_lease_renews_past_its_ttl_and_loses_on_its_own_deadline(
        server: Server) -> None:
    client = server.client(timeout=0.5)
    lost: list[str] = []
    lease = fencepost.Lease.acquire(client, "e/keep", ttl=0.6,
                                    safety_margin=0.2, on_lost=lost.append)
    time.sleep(2.0)  # three TTLs: kept by the renewals
    lease.check()
    assert client.lease("e/keep").token == lease.token
    assert lease.held_until > time.monotonic()
    server.stop()  # no renewal can succeed now
    assert lease.lost.wait(5)
    assert lease.reason is not None
    assert lease.reason.startswith("no renewal succeeded within the TTL")
    assert lost == [lease.reason]
    assert lease.lost_at is not None
    # Noticed at its own deadline, within the margin: before the server,
    # which counts the TTL from a later instant, could expire it.
    assert lease.held_until <= lease.lost_at
    assert lease.lost_at < lease.held_until + lease.safety_margin
    with pytest.raises(fencepost.LeadershipLost):
        lease.check()
    assert lease.release() is False


def test_lease_regranted_with_another_token_is_lost(
        client: fencepost.Client) -> None:
    """Released by someone with its token (an operator) and granted again
    to the same holder: another token. Without the long poll the renewal
    sees it; with it (a 30 s TTL: the renewal is 10 s away) the fence
    that moved does, at once."""
    lease = fencepost.Lease.acquire(client, "e/ref", ttl=1.5, holder="x",
                                    watch_fence=False)
    client.release_lease("e/ref", "x", lease.token)
    again = client.acquire_lease("e/ref", "x", 30.0)
    assert again.token == lease.token + 1
    assert lease.lost.wait(5)
    assert lease.reason == (f"the renewal was answered with token "
                            f"{again.token} instead of {lease.token}")
    lease.stop()

    watched = fencepost.Lease.acquire(client, "e/ref3", ttl=30.0,
                                      holder="x")
    client.release_lease("e/ref3", "x", watched.token)
    client.acquire_lease("e/ref3", "x", 30.0)
    assert watched.lost.wait(5)
    assert watched.reason is not None
    assert watched.reason.startswith(
        f"the fence e/ref3 went above token {watched.token}")
    watched.stop()


def test_lease_acquire_waits_and_releases_on_exit(
        client: fencepost.Client) -> None:
    held = fencepost.Lease.acquire(client, "e/ref2", ttl=1.0, holder="x")
    with pytest.raises(fencepost.LeaseHeld) as refused:
        fencepost.Lease.acquire(client, "e/ref2", ttl=1.0, holder="z",
                                wait=0.3)
    assert refused.value.holder == "x"
    held.release()
    with fencepost.Lease.acquire(client, "e/ref2", ttl=1.0, holder="z") as z:
        z.check()
    assert client.lease("e/ref2").holder is None  # released on exit


def test_lease_lost_when_another_holder_is_granted(client: fencepost.Client
                                                   ) -> None:
    lease = fencepost.Lease.acquire(client, "e/other", ttl=0.5, holder="x")
    lease.stop()  # stops renewing, as a paused process would
    other = fencepost.Lease.acquire(client, "e/other", ttl=5.0, holder="y",
                                    wait=5)
    assert other.token == lease.token + 1
    with pytest.raises(fencepost.StaleToken):
        client.put("e/other", "late", token=lease.token)
    other.release()


def test_bad_arguments(client: fencepost.Client) -> None:
    for kwargs in ({"ttl": 0.05}, {"ttl": 1.0, "safety_margin": 2.0}):
        with pytest.raises(ValueError):
            fencepost.LeaderElector(client, "x", **kwargs)  # type: ignore
    with pytest.raises(ValueError):
        fencepost.LeaderElector(client, "")
    holder = fencepost.default_holder_id()
    assert holder.count("-") >= 2 and len(holder.rsplit("-", 1)[1]) == 8
