"""Tests of kernels/cmake/ptxas_wgmma_launcher.sh, the compiler launcher of the sm_90a kernels: a
compile in which ptxas reports a performance loss (serialized wgmma, an ignored setmaxnreg) fails; the dense kernels' C7519 advisory is
dropped; everything else passes through. The "compiler" here is a shell command that prints what
ptxas would and exits with a chosen status."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "kernels" / "cmake" / "ptxas_wgmma_launcher.sh"

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX sh")

SERIALIZED = ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
              "to non wgmma instructions defining accumulator registers of a wgmma between start and end of the "
              "pipeline stage in the function '_ZN3mla16sparse_crossover6kernelE'")
DENSE_C7519 = ("ptxas info    : (C7519) warpgroup.arrive is injected in around line 1445 by compiler to allow use of "
               "registers in GMMA in function '_ZN3mla11dense_wgmma6kernelE'")
OTHER_C7519 = DENSE_C7519.replace("_ZN3mla11dense_wgmma6kernelE", "_ZN3mla16sparse_crossover6kernelE")
SPILLS = "ptxas info    : Used 168 registers, 0 bytes spill stores, 0 bytes spill loads"


def compile_with(tmp_path: Path, lines: list[str], status: int = 0, stdout: str = "") -> subprocess.CompletedProcess:
    """Runs the launcher in front of a fake compiler that writes `lines` to standard error,
    `stdout` to standard output, and exits with `status`."""
    (tmp_path / "stderr.txt").write_text("".join(line + "\n" for line in lines))
    (tmp_path / "stdout.txt").write_text(stdout)
    script = f'cat "{tmp_path}/stderr.txt" >&2; cat "{tmp_path}/stdout.txt"; exit {status}'
    return subprocess.run(["sh", str(LAUNCHER), "sh", "-c", script], capture_output=True, text=True, timeout=60)


def test_serialized_wgmma_fails_the_compile_and_shows_the_message(tmp_path: Path):
    r = compile_with(tmp_path, [SPILLS, SERIALIZED])
    assert r.returncode == 1
    assert SERIALIZED in r.stderr and SPILLS in r.stderr
    assert "error: ptxas reported a performance loss in an sm_90a kernel" in r.stderr


@pytest.mark.parametrize("message", [
    "(C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern "
    "calls in the function '_ZN3mla6kernelE'",
    "(C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register "
    "resources for the wgmma pipeline in the function '_ZN3mla6kernelE'",
    "(C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to ill formed pipeline "
    "stage in the function '_ZN3mla6kernelE'",
    "(C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry",
])
def test_every_performance_loss_message_fails(tmp_path: Path, message: str):
    r = compile_with(tmp_path, ["ptxas info    : " + message])
    assert r.returncode == 1
    assert message in r.stderr and "error: ptxas reported a performance loss" in r.stderr


def test_a_failed_compile_keeps_the_compiler_status(tmp_path: Path):
    r = compile_with(tmp_path, [SERIALIZED, "ptxas fatal   : Unresolved extern function"], status=2)
    assert r.returncode == 2
    assert "ptxas fatal" in r.stderr


def test_the_dense_kernels_c7519_advisory_is_dropped_and_nothing_else(tmp_path: Path):
    r = compile_with(tmp_path, [DENSE_C7519, OTHER_C7519, SPILLS], stdout="object written")
    assert r.returncode == 0
    assert DENSE_C7519 not in r.stderr
    assert OTHER_C7519 in r.stderr and SPILLS in r.stderr
    assert r.stdout == "object written"


def test_a_clean_compile_passes_unchanged(tmp_path: Path):
    r = compile_with(tmp_path, [SPILLS], stdout="ok")
    assert (r.returncode, r.stdout, r.stderr.strip()) == (0, "ok", SPILLS)
