"""mla-bench's handling of bad input (flags and sweep files): exit 2 with a message naming the
problem, never an abort or a hang. The binary comes from $MLA_BENCH_BIN (set by CTest when
mla-bench is built); nothing here runs a benchmark."""
import os
import subprocess
from pathlib import Path

import pytest

BIN = os.environ.get("MLA_BENCH_BIN", "build/bin/mla-bench")


@pytest.fixture(scope="module", autouse=True)
def binary_exists():
    if not Path(BIN).exists():
        pytest.skip(f"mla-bench not built at {BIN}")


def run(*args):
    return subprocess.run([BIN, "--backend", "host", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("flag", ["--benchmark_repetitions=0", "--benchmark_repetitions=-1",
                                  "--benchmark_min_time=nan", "--benchmark_min_time=abc"])
def test_google_benchmark_flags_it_would_abort_or_hang_on_are_refused(flag):
    r = run("--sweep", "quick", flag)
    assert r.returncode == 2
    assert flag.split("=")[0] in r.stderr


SCHEMA = '"schema": 1, "name": "t"'


@pytest.mark.parametrize("text, where, problem", [
    ('{' + SCHEMA + ', "pack": {"tokens": [1024]}, "pack": {"tokens": [2048]}}', "/pack", "given twice"),
    ('{' + SCHEMA + ', "min_time_s": 1e400}', "", "number overflow"),
    ('{' + SCHEMA + ', "repetitions": 18446744073709551615}', "/repetitions", "18446744073709551615"),
    ('{' + SCHEMA + '}', "/", "defines no benchmark"),
    ('{' + SCHEMA + ', "pack": {"tokens": []}}', "/", "defines no benchmark"),
    ('{' + SCHEMA + ', "attention": {"forward": {"batches": ['
     '{"name": "b", "heads": [16], "topk": [128], "seq_lens": [64], "query_lens": [1]},'
     '{"name": "b", "heads": [16], "topk": [128], "seq_lens": [128], "query_lens": [2]}]}}}',
     "/attention/forward/batches/1/name", "earlier batch"),
])
def test_bad_sweep_files_exit_2_naming_the_field(tmp_path, text, where, problem):
    f = tmp_path / "sweep.json"
    f.write_text(text)
    r = run("--sweep", str(f))
    assert r.returncode == 2, r.stderr
    assert str(f) in r.stderr and problem in r.stderr, r.stderr
    if where:
        assert f"at {where}:" in r.stderr, r.stderr


def test_a_directory_or_fifo_as_sweep_is_refused_without_reading(unreadable_inputs):
    for path, problem in unreadable_inputs:
        r = run("--sweep", path)
        assert r.returncode == 2 and problem in r.stderr, r.stderr
