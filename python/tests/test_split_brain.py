"""The split brain with a paused Python leader (SIGSTOP between its check
and its write): its late write is refused and its elector reports the loss.
The negative control tells the same story to fencepost in --mode observe
(stale writes stored, as without fencing): the same checks must see A's
late write land over B's.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import fencepost
from conftest import Server
from test_race import stopped


class Leader:
    """paused_leader.py in a process of its own, its lines in a queue."""

    def __init__(self, server: Server, tmp_path: Path, ttl: float,
                 interval: float = 0.05, name: str = "sb/leader",
                 key: str = "sb/data", *args: str) -> None:
        self.pause_file = tmp_path / "pause"
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).parent / "paused_leader.py"),
             "--name", name, "--key", key, "--ttl", str(ttl),
             "--pause-file", str(self.pause_file),
             "--interval", str(interval), *args],
            env=server.env(), stdout=subprocess.PIPE, text=True)
        self.lines: "queue.Queue[str]" = queue.Queue()
        stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        threading.Thread(target=lambda: [self.lines.put(line.strip())
                                         for line in stdout],
                         daemon=True).start()

    def expect(self, prefix: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if line.startswith(prefix):
                return line

    def pause(self) -> None:
        self.pause_file.touch()
        self.expect("pausing")
        deadline = time.monotonic() + 10
        while not stopped(self.process.pid):
            assert time.monotonic() < deadline
            time.sleep(0.01)

    def finish(self) -> None:
        try:
            self.process.wait(15)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def split_brain(server: Server, tmp_path: Path) -> list[str]:
    """A leads, pauses past its TTL; B is granted and writes; A is
    continued and writes with its old token. What went against the
    story: A's late write not refused, B's value not the one left, A's
    elector not reporting the loss of A's term."""
    client = server.client()
    leader = Leader(server, tmp_path, ttl=1.0)
    token_a = int(leader.expect("elected").split()[1])
    leader.pause()
    found = []
    # B campaigns as a Python leader does; it wins once A's lease ran out.
    with fencepost.Lease.acquire(client, "sb/leader", ttl=5.0, holder="B",
                                 wait=10) as b:
        assert b.token > token_a
        client.put("sb/data", f"B {b.token}", token=b.token)
        os.kill(leader.process.pid, signal.SIGCONT)
        late = leader.expect("late-write")
        if late != f"late-write refused {b.token}":
            found.append(f"A's late write: {late}")
        lost = leader.expect("lost").split(maxsplit=3)
        if int(lost[1]) != token_a:
            found.append(f"A's elector lost token {lost[1]}, not {token_a}")
        value = client.get("sb/data").text()
        if value != f"B {b.token}":
            found.append(f"the value is {value!r}, not B's")
        b.check()
    leader.finish()
    assert leader.process.returncode == 0
    return found


def test_paused_leader_is_fenced_when_the_next_leader_is_granted(
        server: Server, tmp_path: Path) -> None:
    assert split_brain(server, tmp_path) == []


def test_negative_control_without_fencing_the_late_write_lands(
        start_server: "type[Server]", tmp_path: Path) -> None:
    server = start_server("--mode", "observe")  # type: ignore[call-arg]
    found = split_brain(server, tmp_path)
    assert found == ["A's late write: late-write accepted",
                     "the value is 'A 1', not B's"], found


def test_paused_leader_learns_of_the_bump_from_the_long_poll(
        start_server: "type[Server]", tmp_path: Path) -> None:
    """With a 30 s TTL the next renewal is 10 s away and the client's
    deadline 27 s: a loss reported at once names the fence that moved. The
    lease and the data share the scope sb/, so the bump fences both."""
    server = start_server("--fence-scope", "sb/")  # type: ignore[call-arg]
    client = server.client()
    leader = Leader(server, tmp_path, ttl=30.0)
    token_a = int(leader.expect("elected").split()[1])
    leader.pause()
    client.bump("sb/leader", token=token_a + 1)  # a new leader announces itself
    continued = time.monotonic()
    os.kill(leader.process.pid, signal.SIGCONT)
    assert leader.expect("late-write") == f"late-write refused {token_a + 1}"
    lost = leader.expect("lost", timeout=8).split(maxsplit=3)
    assert int(lost[1]) == token_a
    assert "the fence sb/ (of the lease sb/leader) went above token" in lost[3], lost[3]
    print(f"loss reported {1000 * (float(lost[2]) - continued):.1f} ms after "
          "the SIGCONT")
    leader.finish()


def test_running_leader_stops_within_a_round_trip_of_the_bump(
        start_server: "type[Server]", tmp_path: Path) -> None:
    server = start_server("--fence-scope", "sb/")  # type: ignore[call-arg]
    client = server.client()
    # It writes once, then waits: the loss comes from the elector, not from
    # a refused write.
    leader = Leader(server, tmp_path, ttl=30.0, interval=60)
    token_a = int(leader.expect("elected").split()[1])
    while True:  # its write landed; it waits now
        try:
            client.get("sb/data")
            break
        except fencepost.NotFound:
            time.sleep(0.01)
    bumped = time.monotonic()
    client.bump("sb/leader", token=token_a + 1)
    lost = leader.expect("lost", timeout=8).split(maxsplit=3)
    assert "the fence sb/ (of the lease sb/leader) went above token" in lost[3], lost[3]
    print(f"loss reported {1000 * (float(lost[2]) - bumped):.1f} ms after "
          "the bump")
    leader.finish()
    with_token_a = client.get("sb/data")
    assert with_token_a.token == token_a  # no write of A after the bump


def test_leaders_paused_whole_check_nothing_past_their_deadline(
        server: Server, tmp_path: Path) -> None:
    """Ten leaders writing every 5 ms are stopped whole (SIGSTOP to the
    process, every thread) past their TTL and continued: whichever thread
    runs first, no check() that began after held_until passes. (With
    check() trusting the keeper's thread, the body went on writing for
    up to 1.9 s past its deadline in 3 of 8 such pauses.)"""
    leaders = [Leader(server, tmp_path / f"l{i}", 1.0, 0.005, f"p{i}/leader",
                      f"p{i}/data", "--log-checks") for i in range(10)]
    for leader in leaders:
        leader.expect("elected")
    time.sleep(0.2)
    for leader in leaders:
        os.kill(leader.process.pid, signal.SIGSTOP)
    time.sleep(1.6)
    for leader in leaders:
        os.kill(leader.process.pid, signal.SIGCONT)
    late = []
    for i, leader in enumerate(leaders):
        while True:
            line = leader.expect("", timeout=10)
            if line.startswith("lost"):
                break
            if line.startswith("checked"):
                began, held_until = map(float, line.split()[1:])
                if began > held_until:
                    late.append(f"leader {i}: a check {began - held_until:.3f}"
                                " s past held_until passed")
        leader.finish()
    assert late == []
