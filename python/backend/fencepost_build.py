"""The package's PEP 517 build backend, standard library only.

``pip install ./python`` runs it (``pyproject.toml``: ``build-backend``,
``backend-path``, ``requires = []``), so an install needs neither
setuptools nor wheel nor a network, whatever Python >= 3.11 with pip runs
it. It makes a pure-Python wheel (``py3-none-any``) of the package
directory and an sdist, straight from the source tree, and writes nothing
but the archives it is asked for: no build/, no egg-info. The archives are
the same bytes for the same tree (entries sorted, their times fixed, or
SOURCE_DATE_EPOCH).

The hooks are PEP 517's and PEP 660's (an editable install is a wheel
whose .pth names the source directory).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any, Optional

try:
    import tomllib
except ImportError:  # pragma: no cover - Python < 3.11
    raise ImportError("fencepost needs Python 3.11 or newer") from None

ROOT = Path(__file__).resolve().parents[1]
WHEEL_TAG = "py3-none-any"
# What the sdist holds besides the package: what building from it needs.
SDIST_FILES = ("pyproject.toml", "README.md", "backend/fencepost_build.py")

ConfigSettings = Optional[dict[str, Any]]


class Project:
    """The [project] table of pyproject.toml, what this backend reads of
    it: name, version, description, readme (a Markdown file),
    requires-python, license (text), dependencies, classifiers."""

    def __init__(self, root: Path) -> None:
        with open(root / "pyproject.toml", "rb") as f:
            table = tomllib.load(f)["project"]
        self.root = root
        self.name: str = table["name"]
        self.version: str = table["version"]
        self.description: str = table.get("description", "")
        self.readme: Optional[str] = table.get("readme")
        self.requires_python: Optional[str] = table.get("requires-python")
        self.license: Optional[str] = table.get("license", {}).get("text")
        self.dependencies: list[str] = table.get("dependencies", [])
        self.classifiers: list[str] = table.get("classifiers", [])
        self.package = re.sub(r"[-.]+", "_", self.name).lower()
        if not (root / self.package / "__init__.py").is_file():
            raise ValueError(f"no package directory {self.package}/")

    @property
    def dist_name(self) -> str:
        """The name as archive file names spell it."""
        return f"{self.package}-{self.version}"

    def metadata(self) -> bytes:
        """Core metadata 2.1 (METADATA in a wheel, PKG-INFO in an sdist)."""
        lines = ["Metadata-Version: 2.1", f"Name: {self.name}",
                 f"Version: {self.version}"]
        if self.description:
            lines.append(f"Summary: {self.description}")
        if self.license:
            lines.append(f"License: {self.license}")
        if self.requires_python:
            lines.append(f"Requires-Python: {self.requires_python}")
        lines += [f"Classifier: {c}" for c in self.classifiers]
        lines += [f"Requires-Dist: {d}" for d in self.dependencies]
        body = ""
        if self.readme:
            lines.append("Description-Content-Type: text/markdown")
            body = (self.root / self.readme).read_text(encoding="utf-8")
        return ("\n".join(lines) + "\n\n" + body).encode("utf-8")

    def package_files(self) -> list[Path]:
        """The package's files, sorted, without bytecode."""
        return sorted(
            path for path in (self.root / self.package).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
            and path.suffix not in (".pyc", ".pyo"))


def _epoch() -> int:
    """The archives' file time: SOURCE_DATE_EPOCH, else 1980-01-01 (the
    earliest a zip can hold)."""
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "0")), 315532800)


class _Wheel:
    """A wheel being written: each file's hash goes into RECORD."""

    def __init__(self, path: Path, project: Project) -> None:
        self.project = project
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.records: list[str] = []
        self.date = time.gmtime(_epoch())[:6]
        self.dist_info = f"{project.dist_name}.dist-info"

    def add(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, self.date)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{name},sha256={digest},{len(data)}")

    def finish(self) -> None:
        """The .dist-info files last, RECORD the very last."""
        for name, data in _dist_info(self.project).items():
            self.add(f"{self.dist_info}/{name}", data)
        record = f"{self.dist_info}/RECORD"
        self.records.append(f"{record},,")
        info = zipfile.ZipInfo(record, self.date)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, "\n".join(self.records) + "\n")
        self.zip.close()


def _dist_info(project: Project) -> dict[str, bytes]:
    wheel = ("Wheel-Version: 1.0\nGenerator: fencepost_build\n"
             f"Root-Is-Purelib: true\nTag: {WHEEL_TAG}\n")
    return {"METADATA": project.metadata(), "WHEEL": wheel.encode(),
            "top_level.txt": f"{project.package}\n".encode()}


def _wheel_name(project: Project) -> str:
    return f"{project.dist_name}-{WHEEL_TAG}.whl"


# -- PEP 517 ---------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: ConfigSettings = None
                                 ) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None
                                 ) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: ConfigSettings = None
                                    ) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(
        metadata_directory: str, config_settings: ConfigSettings = None
        ) -> str:
    project = Project(ROOT)
    dist_info = Path(metadata_directory) / f"{project.dist_name}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    for name, data in _dist_info(project).items():
        (dist_info / name).write_bytes(data)
    return dist_info.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: ConfigSettings = None,
                metadata_directory: Optional[str] = None) -> str:
    project = Project(ROOT)
    name = _wheel_name(project)
    wheel = _Wheel(Path(wheel_directory) / name, project)
    for path in project.package_files():
        wheel.add(path.relative_to(ROOT).as_posix(), path.read_bytes())
    wheel.finish()
    return name


def build_editable(wheel_directory: str,
                   config_settings: ConfigSettings = None,
                   metadata_directory: Optional[str] = None) -> str:
    """PEP 660: the package stays where it is, a .pth puts it on the
    path."""
    project = Project(ROOT)
    name = _wheel_name(project)
    wheel = _Wheel(Path(wheel_directory) / name, project)
    wheel.add(f"__editable__.{project.dist_name}.pth",
              f"{ROOT}\n".encode())
    wheel.finish()
    return name


def build_sdist(sdist_directory: str,
                config_settings: ConfigSettings = None) -> str:
    project = Project(ROOT)
    name = f"{project.dist_name}.tar.gz"
    files = sorted(
        [ROOT / f for f in SDIST_FILES] + project.package_files())
    mtime = _epoch()

    def add(tar: tarfile.TarFile, arcname: str, data: bytes) -> None:
        info = tarfile.TarInfo(f"{project.dist_name}/{arcname}")
        info.size, info.mtime, info.mode = len(data), mtime, 0o644
        tar.addfile(info, io.BytesIO(data))

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in files:
            add(tar, path.relative_to(ROOT).as_posix(), path.read_bytes())
        add(tar, "PKG-INFO", project.metadata())
    with open(Path(sdist_directory) / name, "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=mtime,
                           filename="") as gz:
            gz.write(raw.getvalue())
    return name
