"""Fixtures shared by the tests of scripts/: the peer scripts loaded as modules, and mla-bench.

PyTorch is not needed to load the peer scripts: where it is not installed they are loaded with a
stand-in `torch` module (only names at import time; `have_torch` says which). mla-bench comes from
$MLA_BENCH_BIN, else the most recently built of build*/bin/mla-bench; the tests that need it skip
when there is none.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def _load(name: str):
    stand_in = None
    try:
        import torch  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("torch")
        stand_in.__getattr__ = lambda attribute: f"<torch.{attribute} stand-in>"  # module-level getattr (PEP 562)
        sys.modules["torch"] = stand_in
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_under_test", SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if stand_in is not None:
            del sys.modules["torch"]
            sys.modules.pop("peer_common", None)   # imported by the script with the stand-in
    return module


@pytest.fixture(scope="module")
def have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def peer_timing():
    return _load("peer_timing")


@pytest.fixture(scope="module")
def peer_check():
    return _load("peer_check")


@pytest.fixture(scope="module")
def mla_bench() -> str:
    if os.environ.get("MLA_BENCH_BIN"):
        path = Path(os.environ["MLA_BENCH_BIN"])
        if not path.exists():
            pytest.skip(f"MLA_BENCH_BIN={path} does not exist")
        return str(path)
    built = [p for p in [ROOT / "build" / "bin" / "mla-bench", *ROOT.glob("build-*/bin/mla-bench")] if p.exists()]
    if not built:
        pytest.skip("no mla-bench built (set MLA_BENCH_BIN)")
    return str(max(built, key=lambda p: p.stat().st_mtime))


@pytest.fixture(scope="module")
def bench(mla_bench):
    """mla-bench on the host backend; the run must succeed."""
    def run(*args) -> subprocess.CompletedProcess:
        r = subprocess.run([mla_bench, "--backend", "host", *map(str, args)], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        return r
    return run
