"""The tests' own harness leaves nothing behind: a failing test still
stops its server and the examples it ran, the server's data directory is
deleted (its log stays), and a server that did not exit 0 on SIGTERM fails
the test. Checked by running pytest on a small suite of failing tests that
use the harness."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import PYTHON_DIR

TESTS = PYTHON_DIR / "tests"

SUITE = r"""
import os, signal
from test_examples import spawn

def test_an_assertion_fails_beside_an_example(server, tmp_path):
    # The watch follows the stream across restarts: it outlives the
    # server unless it is stopped.
    with spawn(server, "examples/python/watch.py", "h/") as process:
        assert process.stdout.readline() == "watching\n"
        (tmp_path.parent / "example.pid").write_text(str(process.pid))
        (tmp_path.parent / "data").write_text(str(server.data_dir))
        assert False, "as a test fails"

def test_the_example_is_gone_before_the_next_test(tmp_path):
    pid = int((tmp_path.parent / "example.pid").read_text())
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    assert state in ("gone", "Z"), "the example still runs"

def test_the_server_died_under_it(server):
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()

def test_the_server_stops_badly_on_sigterm(start_server, tmp_path):
    # SIGTERM is ignored until the server execs: a server that does not
    # stop, as a hung shutdown would look.
    server = start_server()
    server.process.send_signal(signal.SIGSTOP)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_failing_suite_leaves_nothing_running_or_on_disk(
        tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_failing.py").write_text(SUITE)
    basetemp = tmp_path / "basetemp"
    # The harness as the suite has it: conftest.py's fixtures (a plugin
    # here) and test_examples.py's spawn().
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join(
                   [str(TESTS)] + ([os.environ["PYTHONPATH"]]
                                   if "PYTHONPATH" in os.environ else [])))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "conftest", "--basetemp", str(basetemp), str(suite)],
        cwd=PYTHON_DIR.parent, env=env, capture_output=True, text=True,
        timeout=240)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    # The failed assertion, and the two servers that did not stop well.
    assert "as a test fails" in out, out
    assert "fencepost had exited by itself with status -9" in out, out
    assert "did not stop within 15 s of SIGTERM (killed)" in out, out
    assert "1 failed, 3 passed, 2 errors" in out, out
    pid = int((basetemp / "example.pid").read_text())
    assert not alive(pid), "the example is still running"
    data = Path((basetemp / "data").read_text())
    assert not data.exists(), "the server's data directory is still there"
    assert data.with_name(data.name + ".log").exists()
    leftovers = [p for p in basetemp.rglob("data*") if p.is_dir()]
    assert leftovers == []
