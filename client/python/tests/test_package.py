"""The package: installable with pip and no package index (Debian's
python3-setuptools, --no-build-isolation), typed, documented."""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys

import pytest

from servers import ROOT

import echomq

SRC = os.path.join(ROOT, "client", "python")


def test_pip_install_without_an_index(tmp_path) -> None:
    src = tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__", ".*cache"))
    target = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                        "--disable-pip-version-check", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0 and "No module named pip" in p.stderr:
        pytest.skip("pip is not installed")
    assert p.returncode == 0, p.stdout + p.stderr
    assert (target / "echomq" / "py.typed").exists() and (target / "echomq" / "_codes.py").exists()
    code = "import echomq, sys; print(echomq.__file__); print(echomq.LeaseError.code)"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(target)), cwd=str(tmp_path),
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(target / "echomq" / "__init__.py"), "ELEASE"]


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for name in echomq.__all__:
        obj = getattr(echomq, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                    continue
                if not inspect.getdoc(member):
                    missing.append(f"{name}.{attr}")
    assert missing == []


def test_typed_strictly() -> None:
    mypy = shutil.which("mypy")
    if mypy is None:
        pytest.skip("mypy is not installed")
    p = subprocess.run([mypy, "--strict", "--python-version", "3.9", "--no-incremental", "--cache-dir", os.devnull,
                        os.path.join(SRC, "echomq")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
