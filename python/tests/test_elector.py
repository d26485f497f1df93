"""Lease and LeaderElector in this process against the real binary."""

from __future__ import annotations

import threading
import time

import pytest

import fencepost
from conftest import Server


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
        with elector.leadership() as token:
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
    import signal
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


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
