"""The package installs offline as the README and the docs write it,
with Debian's Python and with any other Python >= 3.11 found here
(pyenv's), also in a fresh venv that has pip but neither wheel nor
setuptools' system copy; the install leaves nothing in the tree; the wheel
and the sdist are whole. Its annotations (and the examples') pass Debian's
mypy --strict."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO, Server


@pytest.fixture(autouse=True)
def no_venv_left(tmp_path: Path) -> Iterator[None]:
    """The venvs and archives (tens of MB each) go with the test; what
    failed is in the assertion's message."""
    yield
    shutil.rmtree(tmp_path, ignore_errors=True)

# Uses the installed package against the server, from a directory where
# the source tree is not on the path.
USE = """
import pathlib, sys
import fencepost
client = fencepost.Client(sys.argv[1], sys.argv[2])
client.put("pkg/k", "v", token=3)
assert client.get("pkg/k").text() == "v"
with fencepost.Lease.acquire(client, "pkg/lease", ttl=2.0) as lease:
    lease.check()
where = pathlib.Path(fencepost.__file__).parent
print(where, fencepost.__version__, (where / "py.typed").exists())
"""


def tree() -> set[str]:
    """python/'s files but bytecode (which .gitignore covers)."""
    return {str(p.relative_to(PYTHON_DIR)) for p in PYTHON_DIR.rglob("*")
            if "__pycache__" not in p.parts}


def offline_env(tmp_path: Path, python: Path) -> dict[str, str]:
    """No pip configuration of this machine's, an index that refuses every
    connection (any download fails), ``python3`` on the PATH being
    ``python`` (as pyenv's shims make it)."""
    shims = tmp_path / "shims"
    shims.mkdir(parents=True, exist_ok=True)
    shim = shims / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "PYTHONPATH", "PYTHONHOME",
                                "VIRTUAL_ENV"))}
    env.update(PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}",
               PIP_CONFIG_FILE=os.devnull,
               PIP_INDEX_URL="http://127.0.0.1:9/simple",
               PIP_RETRIES="0", PIP_TIMEOUT="5",
               PIP_CACHE_DIR=str(tmp_path / "pip-cache"),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def docs_install_commands() -> list[str]:
    """The install of ./python as the README, docs/python.md and
    python/README.md type it: each sh block that runs ``pip install``, its
    lines joined with &&, and each inline command that does."""
    commands = []
    for doc in (REPO / "README.md", REPO / "docs" / "python.md",
                PYTHON_DIR / "README.md"):
        text = doc.read_text()
        for block in re.findall(r"```sh\n(.*?)```", text, re.S):
            if "pip install" in block and "./python" in block:
                commands.append(" && ".join(block.strip().splitlines()))
        for span in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text):
            if "pip install" in span and "./python" in span:
                commands.append(span)
    assert commands, "the docs show no install"
    return sorted(set(commands))


def run_install(tmp_path: Path, python: Path, command: str,
                server: Server) -> None:
    """``command`` in a directory where ``./python`` is the package and
    ``python3`` is ``python``; then the installed package is used."""
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "python").exists():
        (work / "python").symlink_to(PYTHON_DIR)
    before = tree()
    done = subprocess.run(["bash", "-c", command], cwd=work,
                          env=offline_env(tmp_path, python),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}:\n{done.stdout}{done.stderr}"
    assert tree() == before, "the install left files in the tree"
    venv = work / ".venv"
    assert venv.is_dir(), f"{command} made no .venv"
    used = subprocess.run(
        [str(venv / "bin" / "python"), "-c", USE, server.data_url,
         server.admin_url], cwd=tmp_path, capture_output=True, text=True,
        env=offline_env(tmp_path, python), timeout=60)
    assert used.returncode == 0, used.stderr
    where, version, typed = used.stdout.split()
    assert where.startswith(str(venv)) and typed == "True"
    assert version == "0.1.0"


def version_of(python: Path) -> tuple[int, int]:
    out = subprocess.run(
        [str(python), "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return (0, 0)
    major, minor = out.stdout.split()
    return int(major), int(minor)


def other_pythons() -> list[Path]:
    """Every Python >= 3.11 with pip here that is not the one running the
    tests (Debian's): pyenv's versions."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = []
    for python in sorted(root.glob("versions/*/bin/python3")):
        if python.resolve() == Path(sys.executable).resolve():
            continue
        if version_of(python) >= (3, 11) and subprocess.run(
                [str(python), "-m", "pip", "--version"],
                capture_output=True).returncode == 0:
            found.append(python)
    return found


@pytest.mark.parametrize("command", docs_install_commands())
def test_installs_as_the_docs_write_it(command: str, tmp_path: Path,
                                       server: Server) -> None:
    run_install(tmp_path, Path(sys.executable), command, server)


def test_installs_with_every_other_python(tmp_path: Path,
                                          server: Server) -> None:
    """The docs' commands with a Python that is not Debian's: its own
    setuptools has no bdist_wheel and no wheel package, which a
    setuptools build needed."""
    pythons = other_pythons()
    if not pythons:
        pytest.skip("no Python >= 3.11 but Debian's here (pyenv's, say)")
    for python in pythons:
        for i, command in enumerate(docs_install_commands()):
            run_install(tmp_path / f"{python.parent.parent.name}-{i}",
                        python, command, server)


def test_installs_in_a_fresh_venv_without_wheel(tmp_path: Path,
                                                server: Server) -> None:
    """Debian's Python, a venv without the system's packages: pip, no
    wheel; the plain ``pip install ./python``, build isolation and all."""
    python = Path(sys.executable)
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([str(python), "-m", "venv", str(work / ".venv")],
                   check=True, env=offline_env(tmp_path, python))
    no_wheel = subprocess.run(
        [str(work / ".venv" / "bin" / "python"), "-c", "import wheel"],
        capture_output=True)
    assert no_wheel.returncode != 0, "the fresh venv has wheel"
    run_install(tmp_path, python, ".venv/bin/python -m pip install ./python",
                server)


def test_the_wheel_and_the_sdist_are_whole(tmp_path: Path,
                                           server: Server) -> None:
    """Built by the backend's hooks themselves: the wheel holds the package
    (py.typed too) and a RECORD that matches it; the sdist holds what
    building from it needs, and installs offline."""
    hooks = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "import fencepost_build as b; "
             "print(b.build_wheel(sys.argv[2]), b.build_sdist(sys.argv[2]))")
    out = tmp_path / "dist"
    out.mkdir()
    built = subprocess.run(
        [sys.executable, "-c", hooks, str(PYTHON_DIR / "backend"), str(out)],
        capture_output=True, text=True, check=True, cwd=tmp_path,
        env=offline_env(tmp_path, Path(sys.executable)))
    wheel_name, sdist_name = built.stdout.split()
    assert wheel_name == "fencepost-0.1.0-py3-none-any.whl"
    sources = {str(p.relative_to(PYTHON_DIR)) for p in
               (PYTHON_DIR / "fencepost").iterdir() if p.is_file()}
    with zipfile.ZipFile(out / wheel_name) as wheel:
        names = set(wheel.namelist())
        dist_info = "fencepost-0.1.0.dist-info/"
        assert names == sources | {dist_info + n for n in (
            "METADATA", "WHEEL", "top_level.txt", "RECORD")}
        record = wheel.read(dist_info + "RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if name == dist_info + "RECORD":
                continue
            data = wheel.read(name)
            assert size == str(len(data)), name
            assert digest == "sha256=" + base64.urlsafe_b64encode(
                hashlib.sha256(data).digest()).rstrip(b"=").decode(), name
        assert len(record) == len(names)
        metadata = wheel.read(dist_info + "METADATA").decode()
        assert "Requires-Python: >=3.11" in metadata
    with tarfile.open(out / sdist_name) as sdist:
        members = set(sdist.getnames())
    assert {"fencepost-0.1.0/pyproject.toml", "fencepost-0.1.0/PKG-INFO",
            "fencepost-0.1.0/backend/fencepost_build.py",
            "fencepost-0.1.0/fencepost/py.typed"} <= members
    assert not any("/tests/" in m for m in members)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install",
         str(out / sdist_name)], capture_output=True, text=True,
        env=offline_env(tmp_path, Path(sys.executable)), timeout=300)
    assert installed.returncode == 0, installed.stderr


def test_mypy_strict() -> None:
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--version"],
                          capture_output=True, text=True)
    if mypy.returncode != 0:
        pytest.fail("mypy is missing: scripts/deps.sh installs it")
    checked = subprocess.run(
        # No cache: the check leaves nothing in the source tree.
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", "/dev/null",
         str(PYTHON_DIR / "fencepost"), str(PYTHON_DIR / "backend"),
         str(REPO / "examples" / "python")],
        capture_output=True, text=True, cwd=PYTHON_DIR, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
