"""Fixtures: the real fencepost binary (FENCEPOST_BINARY) on 127.0.0.1 with
ephemeral ports, and a client of it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent
sys.path.insert(0, str(PYTHON_DIR))

import fencepost  # noqa: E402

STARTED = re.compile(
    r"fencepost listening event=started .*?data=127\.0\.0\.1:(\d+) "
    r"admin=127\.0\.0\.1:(\d+)")


def binary() -> str:
    path = os.environ.get("FENCEPOST_BINARY")
    if not path:
        pytest.fail("set FENCEPOST_BINARY to the fencepost binary "
                    "(build-test/proxy/fencepost)")
    path = str(Path(path).resolve())
    if not os.access(path, os.X_OK):
        pytest.fail(f"FENCEPOST_BINARY={path} is not an executable")
    return path


class Server:
    """One fencepost process; restart() keeps its ports and data. stop()
    fails the test when the process did not exit 0 on SIGTERM within 15 s
    (or had exited by itself); remove() deletes the data directory and
    keeps the log."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.extra = list(extra)
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.data_port = 0
        self.admin_port = 0
        self.scheme = "https" if "--tls-cert" in extra else "http"

    def start(self, data: str = "127.0.0.1:0", admin: str = "127.0.0.1:0"
              ) -> None:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("FENCEPOST_")}
        log = open(self.log_path, "ab")
        offset = log.tell()
        self.process = subprocess.Popen(
            [binary(), "serve", "--listen", data, "--admin-listen", admin,
             "--data-dir", str(self.data_dir), *self.extra],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[offset:].decode("utf-8", "replace")
            match = STARTED.search(text)
            if match:
                self.data_port, self.admin_port = map(int, match.groups())
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.kill()
        pytest.fail(f"fencepost did not start: {self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        problem = ""
        if process.poll() is not None:
            problem = f"had exited by itself with status {process.returncode}"
        else:
            process.send_signal(signal.SIGTERM)
            try:
                if process.wait(15) != 0:
                    problem = (f"exited with status {process.returncode} "
                               "on SIGTERM")
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                problem = "did not stop within 15 s of SIGTERM (killed)"
        if problem:
            pytest.fail(f"fencepost {problem}; its log "
                        f"({self.log_path}):\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL, whatever its state; no check."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None

    def remove(self) -> None:
        """Deletes the data directory (fences, LMDB's map: tens of MB)."""
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def restart(self) -> None:
        self.stop()
        self.start(f"127.0.0.1:{self.data_port}",
                   f"127.0.0.1:{self.admin_port}")

    @property
    def data_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.data_port}"

    @property
    def admin_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.admin_port}"

    def client(self, **options: object) -> fencepost.Client:
        return fencepost.Client(self.data_url, self.admin_url,
                                **options)  # type: ignore[arg-type]

    def env(self) -> dict[str, str]:
        """The environment of an example or a worker: the package on the
        path and the server's URLs as the docs name them."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("FENCEPOST_")}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PYTHON_DIR)] + ([env["PYTHONPATH"]] if "PYTHONPATH" in env
                                 else []))
        env["FENCEPOST_DATA"] = self.data_url
        env["FENCEPOST_ADMIN"] = self.admin_url
        env["PYTHONUNBUFFERED"] = "1"
        return env


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator["type[Server]"]:
    """A factory: start_server(*flags) -> a started Server, stopped after
    the test (its exit status checked) and its data directory deleted
    (the log stays, beside it)."""
    servers: list[Server] = []

    def start(*extra: str) -> Server:
        server = Server(tmp_path / f"data{len(servers)}", *extra)
        servers.append(server)
        server.start()
        return server

    try:
        yield start  # type: ignore[misc]
    finally:
        failures = []
        for server in servers:
            try:
                server.stop()
            except pytest.fail.Exception as e:
                failures.append(str(e))
            finally:
                server.kill()
                server.remove()
        if failures:
            pytest.fail("\n".join(failures))


@pytest.fixture
def server(start_server: "type[Server]") -> Server:
    return start_server()  # type: ignore[call-arg]


@pytest.fixture
def client(server: Server) -> Iterator[fencepost.Client]:
    with server.client(timeout=10.0) as c:
        yield c


@contextmanager
def users_handler() -> Iterator[list[int]]:
    """A SIGUSR1 handler of the user's, there before the elector's."""
    got: list[int] = []
    previous = signal.signal(signal.SIGUSR1,
                             lambda signum, frame: got.append(signum))
    try:
        yield got
    finally:
        signal.signal(signal.SIGUSR1, previous)
