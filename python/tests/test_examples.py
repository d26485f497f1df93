"""examples/python/ run as docs/python.md shows them."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

import fencepost
from conftest import REPO, Server

EXAMPLES = REPO / "examples" / "python"


def run(server: Server, *args: str, timeout: float = 60
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO, env=server.env(),
                          capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def spawn(server: Server, *args: str) -> Iterator["subprocess.Popen[str]"]:
    """An example running beside the test, its stdout piped; killed when
    the test leaves it running (an assertion failed)."""
    process = subprocess.Popen([sys.executable, *args], cwd=REPO,
                               env=server.env(), stdout=subprocess.PIPE,
                               text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_leader_example_writes_with_its_token(server: Server) -> None:
    done = run(server, "examples/python/leader.py", "orders/leader",
               "orders/state", "--writes", "3", "--period", "0.05")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("elected with token 1 as ")
    assert lines[1:] == ["wrote 1: fence at 1", "wrote 2: fence at 1",
                         "wrote 3: fence at 1", "resigned"]
    client = server.client()
    assert client.get("orders/state").text().endswith("wrote 3 with token 1")
    assert client.lease("orders/leader").holder is None


def test_leader_example_stops_when_fenced(server: Server) -> None:
    with spawn(server, "examples/python/leader.py", "orders/leader",
               "orders/state", "--ttl", "30") as process:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("elected with token 1")
        server.client().bump("orders/leader", token=2)
        out, _ = process.communicate(timeout=30)
    assert process.returncode == 75
    assert "lost leadership: the fence orders/leader went above token 1" in out


def test_counter_example_loses_no_increment(server: Server) -> None:
    with contextlib.ExitStack() as stack:
        runs = [stack.enter_context(spawn(
            server, "examples/python/counter.py", "counters/visits", "25"))
            for _ in range(3)]
        for process in runs:
            process.communicate(timeout=60)
            assert process.returncode == 0
    assert server.client().get("counters/visits").text() == "75"


def test_watch_example_prints_a_line_per_event(server: Server) -> None:
    with spawn(server, "examples/python/watch.py", "orders/", "--count",
               "4") as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "watching\n"
        client = server.client()
        client.put("orders/1", "x", token=5)
        try:
            client.put("orders/1", "y", token=4)
        except fencepost.StaleToken:
            pass
        client.acquire_lease("orders/leader", "h", 1.0)
        out, _ = process.communicate(timeout=30)
    assert out.splitlines() == [
        "fence     orders/1 -> token 5",
        "rejected  PUT orders/1 token 4 < 5",
        "fence     orders/leader -> token 1",
        "lease     orders/leader granted holder=h token 1"]


def test_the_readmes_python_block_runs_as_written(server: Server) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## From Python\n", 1)[1]
    block = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    code = (block
            .replace("http://127.0.0.1:7400",
                     f"http://127.0.0.1:{server.data_port}")
            .replace("http://127.0.0.1:7401",
                     f"http://127.0.0.1:{server.admin_port}"))
    assert code != block, "the README's block names no server"
    done = run(server, "-c", code)
    assert done.returncode == 0, done.stderr
    client = server.client()
    state = client.get("orders/state")
    assert state.value == b"..." and state.token == 1
    assert client.lease("orders/leader").holder is None
