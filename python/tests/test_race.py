"""The lease tutorial's race in Python: eight processes with a
LeaderElector each race for one lease; four of them pause (SIGSTOP) in the
middle of a read-modify-write, past the lease's TTL.

Exactly one holder at a time: the terms, from election to the earlier of
the work's end and the lease's held_until (the client's own deadline), do
not overlap on the machine's monotonic clock (CLOCK_MONOTONIC is one clock
for all processes). Every accepted write carries the highest token so far:
the log the writes built (If-Match, so no write is lost) has non-decreasing
tokens, each token of one holder only, and holds every write a worker saw
accepted; the paused workers' late writes are refused.

The negative control runs the same race with both protections taken away
(fencepost in --mode observe, which stores stale writes; workers whose
deadline is half a TTL past the server's expiry): the same checks must
report the late writes not refused and terms that overlap.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import fencepost
from conftest import Server

WORKERS = 8
TTL = 1.0
ENTRIES = 40


def stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


@dataclass
class Race:
    chain: list[list[str]]  # the log's "TOKEN HOLDER" lines
    outs: list[Path]  # each worker's events


def race(server: Server, tmp_path: Path, *worker_args: str) -> Race:
    client = server.client()
    stop_file = tmp_path / "stop"
    outs = [tmp_path / f"worker{i}.log" for i in range(WORKERS)]
    workers = [subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "race_worker.py"),
         "--name", "race/leader", "--key", "race/log", "--out", str(out),
         "--stop-file", str(stop_file), "--ttl", str(TTL), *worker_args]
        + (["--pause-once"] if i % 2 == 0 else []),
        env=server.env()) for i, out in enumerate(outs)]
    paused_since: dict[int, float] = {}
    continued: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            for worker in workers:
                assert worker.poll() is None, "a worker died"
                if worker.pid in continued:
                    continue
                if stopped(worker.pid):
                    since = paused_since.setdefault(worker.pid,
                                                    time.monotonic())
                    if time.monotonic() - since > 1.6 * TTL:
                        os.kill(worker.pid, signal.SIGCONT)
                        continued.add(worker.pid)
            try:
                entries = client.get("race/log").text().splitlines()
            except fencepost.NotFound:
                entries = []
            if len(entries) >= ENTRIES and len(continued) == WORKERS // 2:
                break
            time.sleep(0.02)
        else:
            raise AssertionError(f"the race did not finish: {len(entries)} "
                                 f"entries, {len(continued)} pauses")
    finally:
        stop_file.touch()
        for worker in workers:
            if worker.pid in paused_since and worker.pid not in continued:
                os.kill(worker.pid, signal.SIGCONT)
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    assert all(worker.returncode == 0 for worker in workers)
    return Race([line.split() for line in client.get("race/log").text()
                 .splitlines()], outs)


def violations(result: Race) -> list[str]:
    """What went against the claims above, one line each."""
    found = []
    tokens = [int(token) for token, _ in result.chain]
    if tokens != sorted(tokens):
        found.append("a write with a lower token landed")
    holders: dict[int, str] = {}
    for token, holder in result.chain:
        if holders.setdefault(int(token), holder) != holder:
            found.append(f"token {token} wrote for two holders")
    if len(set(holders.values())) < 2:
        found.append("fewer than two holders wrote")
    terms: dict[int, list[float]] = {}
    accepted = stale = 0
    for out in result.outs:
        for line in out.read_text().splitlines():
            kind, *rest = line.split()
            if kind == "elected":
                if int(rest[0]) in terms:
                    found.append(f"token {rest[0]}: two terms")
                terms[int(rest[0])] = [float(rest[1]), float("inf")]
            elif kind == "end":
                terms[int(rest[0])][1] = float(rest[1])
            elif kind == "write":
                accepted += 1
            elif kind == "stale":
                stale += 1
                if int(rest[1]) <= int(rest[0]):
                    found.append(f"a refusal of {rest[0]} names {rest[1]}")
    if accepted != len(result.chain):
        found.append(f"{accepted} writes accepted, {len(result.chain)} "
                     "in the log")
    if stale < 1:
        found.append("no paused worker's late write was refused")
    ordered = sorted(terms.items())
    for (token, (start, end)), (later, (next_start, _)) in zip(
            ordered, ordered[1:]):
        if end > next_start:
            found.append(f"term {token} ({start}..{end}) overlaps term "
                         f"{later} (from {next_start})")
    print(f"{len(terms)} terms, {accepted} accepted writes, {stale} refused "
          f"late writes")
    return found


def test_eight_processes_race_for_one_lease(server: Server,
                                            tmp_path: Path) -> None:
    assert violations(race(server, tmp_path)) == []


def test_negative_control_without_fencing_or_a_safe_deadline(
        start_server: "type[Server]", tmp_path: Path) -> None:
    server = start_server("--mode", "observe")  # type: ignore[call-arg]
    found = violations(race(server, tmp_path, "--safety-margin",
                            str(-TTL / 2)))
    print("\n".join(found))
    assert "no paused worker's late write was refused" in found
    assert any(" overlaps term " in line for line in found), found
