"""The package installs offline as the README says, and its annotations
(and the examples') pass Debian's mypy --strict."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO


def test_installs_offline_into_a_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                    str(venv)], check=True)
    source = tmp_path / "src"  # a copy: the build leaves files behind
    shutil.copytree(PYTHON_DIR, source,
                    ignore=shutil.ignore_patterns("tests", "__pycache__",
                                                  "build", "*.egg-info"))
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-build-isolation",
         "--no-index", "--quiet", str(source)],
        capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    shown = subprocess.run(
        [str(python), "-c", "import fencepost, pathlib; "
         "p = pathlib.Path(fencepost.__file__).parent; "
         "print(p, fencepost.__version__, (p / 'py.typed').exists())"],
        cwd=tmp_path, capture_output=True, text=True, check=True)
    where, version, typed = shown.stdout.split()
    assert where.startswith(str(venv)) and typed == "True"
    assert version == "0.1.0"


def test_mypy_strict() -> None:
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--version"],
                          capture_output=True, text=True)
    if mypy.returncode != 0:
        pytest.fail("mypy is missing: scripts/deps.sh installs it")
    checked = subprocess.run(
        # No cache: the check leaves nothing in the source tree.
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", "/dev/null",
         str(PYTHON_DIR / "fencepost"), str(REPO / "examples" / "python")],
        capture_output=True, text=True, cwd=PYTHON_DIR, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
