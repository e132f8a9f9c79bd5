"""mla-check as a user sees it: exit codes, error messages for bad input, injections caught,
crash isolation, the JSON report. The binary comes from $MLA_CHECK_BIN (set by CTest)."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from built_tools import skip_unless_built

BIN = os.environ.get("MLA_CHECK_BIN", "build/bin/mla-check")
REPO = Path(__file__).resolve().parents[2]
SMALL = "vllm_mixed_small"  # a shipped scenario with decodes, prefills and cached context


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=e, timeout=600)


binary_exists = skip_unless_built(BIN)


# An adapter whose scenario named HANG hangs, and whose scenario named CRASH crashes (SIGSEGV), when
# its second check begins (so that its first check's result has been reported); its one operation
# is the NumPy cache path's convert, every other runs on the host backend (--adapter-fallback).
MISBEHAVING_ADAPTER = """
import importlib.util, os, signal, time
_spec = importlib.util.spec_from_file_location("numpy_cache", {numpy_cache!r})
_numpy_cache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_numpy_cache)
DEVICE = "cpu"
HANG, CRASH = {hang!r}, {crash!r}
_begun = 0
convert = _numpy_cache.convert
def begin_check(scenario, check):
    global _begun
    _begun += 1
    if _begun == 2 and scenario == CRASH:
        os.kill(os.getpid(), signal.SIGSEGV)
    if _begun == 2 and scenario == HANG:
        while True:
            time.sleep(60)
"""


def misbehaving_backend(tmp_path, hang="", crash=""):
    """--backend and --adapter-fallback for the misbehaving adapter; skips where the build has no
    Python backend (it needs the Python development files, pybind11, DLPack and NumPy)."""
    path = tmp_path / "misbehaving.py"
    path.write_text(MISBEHAVING_ADAPTER.format(numpy_cache=str(REPO / "adapters" / "numpy_cache.py"),
                                               hang=hang, crash=crash))
    probe = run("--backend", f"python:{path}", "--adapter-fallback", "--scenario", "gather_block_size_1")
    if "has no Python backend" in probe.stderr:
        pytest.skip(probe.stderr.strip())
    return ["--backend", f"python:{path}", "--adapter-fallback"]


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_help_and_version():
    assert run("--help").returncode == 0
    r = run("--version")
    assert r.returncode == 0 and "mla-check" in r.stdout


def test_list_shows_shipped_scenarios():
    r = run("--list")
    assert r.returncode == 0
    assert SMALL in r.stdout


# The CUDA backend's kernel policy is read from the MLA_* variables once, before any backend is
# made, whatever the backend: a value no launcher knows is a usage error naming the variable.
@pytest.mark.parametrize("var,value", [("MLA_SPARSE_MQA_IMPL", "fastest"), ("MLA_DENSE_WGMMA_SCHEDULE", "gird"),
                                       ("MLA_DENSE_WGMMA_MAX_CTAS", "many"), ("MLA_CUDA_SYNC_EACH", "yes")])
def test_a_bad_kernel_policy_variable_is_a_usage_error(var, value):
    r = run("--backend", "host", "--scenario", SMALL, "--quiet", env={var: value})
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{var}='{value}'" in r.stderr


def test_malformed_json_exits_2_naming_the_file(tmp_path):
    f = write(tmp_path, "broken.json", '{"name": "x", "batch": {')
    r = run("--scenario", f, "--backend", "host")
    assert r.returncode == 2
    assert "broken.json" in r.stderr


def test_wrong_type_names_the_field(tmp_path):
    f = write(tmp_path, "wrongtype.json", '{"name": "x", "batch": {"seq_lens": "many", "query_lens": [1]}}')
    r = run("--scenario", f, "--backend", "host")
    assert r.returncode == 2
    assert "wrongtype.json" in r.stderr and "/batch/seq_lens" in r.stderr


def test_impossible_shape_names_the_element(tmp_path):
    f = write(tmp_path, "shape.json", '{"name": "x", "batch": {"seq_lens": [4, 8], "query_lens": [1, 9]}}')
    r = run("--scenario", f, "--backend", "host")
    assert r.returncode == 2
    assert "/batch/query_lens/1" in r.stderr


def test_unknown_scenario_and_injection_exit_2():
    assert run("--scenario", "no_such_scenario_anywhere").returncode == 2
    r = run("--inject", "no-such-bug", "--scenario", SMALL)
    assert r.returncode == 2 and "unbounded-convert" in r.stderr


def test_cuda_backend_without_gpu_is_a_clear_usage_error():
    r = run("--backend", "cuda", "--scenario", SMALL, "--quiet")
    if "backend cuda (" in r.stdout:
        pytest.skip("a CUDA device is present")
    assert r.returncode == 2
    assert "cuda" in r.stderr.lower()


def test_an_injection_the_selection_cannot_exercise_is_bad_usage():
    r = run("--backend", "host", "--scenario", SMALL, "--inject", "split-mismatch", "--quiet")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "NOT EXERCISED" in r.stdout


def test_bad_timeout_is_bad_usage():
    assert run("--timeout", "0", "--scenario", SMALL).returncode == 2
    r = run("--timeout", "nan", "--scenario", SMALL)  # CLI11's range check lets NaN through
    assert r.returncode == 2 and "--timeout" in r.stderr


@pytest.mark.parametrize("seed", ["-1", "18446744073709551616", "12x"])
def test_a_seed_outside_uint64_is_bad_usage_not_wrapped(seed):
    r = run("--seed", seed, "--scenario", SMALL)
    assert r.returncode == 2
    assert "--seed" in r.stderr and seed in r.stderr


def test_a_directory_or_fifo_as_scenario_is_refused_without_reading(unreadable_inputs):
    for path, problem in unreadable_inputs:
        r = run("--scenario", path)
        assert r.returncode == 2 and problem in r.stderr, r.stderr


def test_an_unwritable_report_is_refused_before_the_run(tmp_path):
    for path, problem in ((tmp_path / "missing-dir" / "r.json", "cannot create"), (tmp_path, "is a directory")):
        r = run("--backend", "host", "--scenario", SMALL, "--report", str(path))
        assert r.returncode == 2, r.stdout + r.stderr
        assert "--report" in r.stderr and str(path) in r.stderr and problem in r.stderr, r.stderr
        assert SMALL not in r.stdout  # refused before any scenario ran


def test_a_hanging_scenario_is_killed_and_loses_no_other_result(tmp_path):
    out = tmp_path / "r.json"
    r = run(*misbehaving_backend(tmp_path, hang=SMALL), "--scenario", SMALL, "--scenario", "vllm_small_prefill",
            "--timeout", "2", "--report", str(out))
    assert r.returncode == 3, r.stdout + r.stderr
    by_name = {s["name"]: s for s in load_report(out)["scenarios"]}
    assert by_name[SMALL]["verdict"] == "ERROR" and "timed out" in by_name[SMALL]["error"]
    assert [c["verdict"] for c in by_name[SMALL]["checks"]] == ["PASS"]
    assert by_name["vllm_small_prefill"]["verdict"] == "PASS"


def reject_constant(name):
    raise AssertionError(f"bare {name} in the report (must be null)")


def load_report(path):
    return json.loads(Path(path).read_text(), parse_constant=reject_constant)


def test_clean_run_passes_and_report_is_complete(tmp_path):
    out = tmp_path / "r.json"
    r = run("--backend", "host", "--scenario", SMALL, "--report", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    rep = load_report(out)
    assert rep["schema"] == "mla-harness.report/1"
    assert rep["summary"]["verdict"] == "PASS"
    prov = rep["provenance"]
    for key in ("version", "git_revision", "argv", "backend", "device", "host", "started_at", "kernels"):
        assert key in prov
    assert prov["kernels"] == ""  # host: no attention kernel choice
    (scen,) = rep["scenarios"]
    assert scen["name"] == SMALL and SMALL in scen["repro"]
    checks = {c["check"] for c in scen["checks"]}
    assert {"pack", "gather", "convert", "layout"} <= checks
    assert all(c["metrics"]["bit_exact"] for c in scen["checks"] if c["verdict"] == "PASS")


def test_check_option_runs_only_the_named_checks_and_repro_keeps_them(tmp_path):
    out = tmp_path / "r.json"
    r = run("--backend", "host", "--scenario", SMALL, "--check", "layout", "--check", "pack", "--report", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    (scen,) = load_report(out)["scenarios"]
    # The scenario's own order (pack before layout), sub-checks named after their check.
    assert [c["check"].split("/")[0] for c in scen["checks"]] == ["pack", "layout"]
    assert scen["repro"].endswith(" --check layout --check pack --scenario " + scen["file"]), scen["repro"]


def test_check_option_selects_scenarios_that_have_the_check():
    full = run("--list").stdout.splitlines()
    with_sparse = [line.split()[0] for line in full if "sparse_mqa" in line.split()[1].split(",")]
    r = run("--list", "--check", "sparse_mqa")
    assert r.returncode == 0
    rows = [line.split() for line in r.stdout.splitlines()]
    assert [row[0] for row in rows] == with_sparse and with_sparse
    assert all(row[1] == "sparse_mqa" for row in rows)


def test_unknown_check_or_no_scenario_with_it_is_bad_usage():
    r = run("--list", "--check", "nonsense")
    assert r.returncode == 2
    assert "nonsense" in r.stderr and "sparse_mqa" in r.stderr
    r = run("--backend", "host", "--scenario", SMALL, "--check", "dcp")
    assert r.returncode == 2
    assert "--check" in r.stderr


INJECTIONS = [
    ("unbounded-convert", "convert", "OOB", SMALL),
    ("ignore-seq-starts", "gather", "FAIL", SMALL),
    ("flat-fp8-gather", "gather", "FAIL", SMALL),
    ("page-size-576", "layout", "FAIL", SMALL),
    ("full-batch-metadata", "forward", "OOB", "attn_mixed_small_k128"),
    ("split-mismatch", "forward", "FAIL", "attn_decode_lengths_nonuniform"),
]


@pytest.mark.parametrize("name,check,verdict,scenario", INJECTIONS)
def test_each_injection_exits_1_with_the_expected_verdict(tmp_path, name, check, verdict, scenario):
    out = tmp_path / "r.json"
    r = run("--backend", "host", "--scenario", scenario, "--inject", name, "--report", str(out), "--quiet")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"injection {name}: caught" in r.stdout
    rep = load_report(out)
    assert rep["provenance"]["injection"] == name
    verdicts = {c["verdict"] for s in rep["scenarios"] for c in s["checks"] if c["check"] == check}
    assert verdict in verdicts, verdicts


def test_a_crashing_scenario_loses_no_other_result(tmp_path):
    out = tmp_path / "r.json"
    r = run(*misbehaving_backend(tmp_path, crash=SMALL), "--scenario", SMALL, "--scenario", "vllm_small_prefill",
            "--report", str(out))
    assert r.returncode == 3, r.stdout + r.stderr
    rep = load_report(out)
    by_name = {s["name"]: s for s in rep["scenarios"]}
    assert by_name[SMALL]["verdict"] == "ERROR" and "signal" in by_name[SMALL]["error"]
    # The check that finished before the crash is kept.
    assert [c["verdict"] for c in by_name[SMALL]["checks"]] == ["PASS"]
    assert by_name["vllm_small_prefill"]["verdict"] == "PASS"


# A selection whose completion order differs from its order with --jobs > 1: the hanging scenario
# comes early and ends last (at --timeout), the crashing one ends first.
JOBS_SELECTION = ["vllm_large_q_pure_prefill", SMALL, "gather_block_size_1", "vllm_small_prefill",
                  "gpu_attn_mixed_small_k128"]


def without_timings(value):
    """A report (or part of one) without what may differ between two runs of the same selection."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in ("duration_s", "started_at", "argv")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def table_without_times(stdout):
    """The table and summary with the TIME cells and the run's total time blanked out."""
    return [" ".join(re.sub(r"\b\d+(\.\d+)? m?s\b", "T", line).split()) for line in stdout.splitlines()]


def run_selection(tmp_path, tag, *jobs_args):
    out = tmp_path / f"{tag}.json"
    # --timeout 4: well above the slowest scenario here (~0.3 s) also on a loaded 2-core CI machine.
    args = [*misbehaving_backend(tmp_path, hang=SMALL, crash="vllm_small_prefill"), "--timeout", "4",
            "--report", str(out), *jobs_args]
    for name in JOBS_SELECTION:
        args += ["--scenario", name]
    r = run(*args)
    assert r.returncode == 3, r.stdout + r.stderr  # the crash and the hang are ERRORs, nothing failed
    return r.stdout.replace(str(out), "REPORT"), load_report(out)


@pytest.mark.parametrize("jobs_args", [("--jobs", "3"), ("-j", "0")])
def test_jobs_report_and_table_equal_a_serial_run_apart_from_timings(tmp_path, jobs_args):
    serial, serial_report = run_selection(tmp_path, "serial")
    parallel, parallel_report = run_selection(tmp_path, "parallel", *jobs_args)
    assert [s["name"] for s in parallel_report["scenarios"]] == JOBS_SELECTION
    assert without_timings(parallel_report) == without_timings(serial_report)
    assert table_without_times(parallel) == table_without_times(serial)
    by_name = {s["name"]: s for s in parallel_report["scenarios"]}
    hung, crashed = by_name[SMALL], by_name["vllm_small_prefill"]
    assert hung["verdict"] == "ERROR" and "timed out" in hung["error"] and hung["duration_s"] >= 1.0
    assert crashed["verdict"] == "ERROR" and "signal" in crashed["error"]
    # Each keeps the check it finished before it died; the others are unaffected.
    assert [c["verdict"] for c in hung["checks"]] == ["PASS"]
    assert [c["verdict"] for c in crashed["checks"]] == ["PASS"]
    assert by_name["vllm_large_q_pure_prefill"]["verdict"] == "PASS"
    assert by_name["gather_block_size_1"]["verdict"] == "PASS"


@pytest.mark.parametrize("jobs", ["2", "0"])
def test_no_isolate_with_jobs_is_bad_usage(jobs):
    r = run("--backend", "host", "--scenario", SMALL, "--no-isolate", "--jobs", jobs)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--no-isolate" in r.stderr and "--jobs" in r.stderr
    assert r.stdout == ""  # refused before anything ran


def test_negative_jobs_is_bad_usage():
    assert run("--jobs", "-1", "--scenario", SMALL).returncode == 2


def test_exclude_tag_leaves_out_gpu_only_scenarios():
    everything = run("--list").stdout
    assert "gpu_attn_mixed_small_k128" in everything
    r = run("--list", "--exclude-tag", "gpu-only")
    assert r.returncode == 0
    assert "gpu_attn_mixed_small_k128" not in r.stdout and "attn_mixed_small_k128" in r.stdout


def test_gpu_only_scenario_is_skipped_with_a_reason_on_the_host(tmp_path):
    out = tmp_path / "r.json"
    r = run("--backend", "host", "--scenario", "gpu_attn_mixed_small_k128", "--report", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    (scen,) = load_report(out)["scenarios"]
    assert scen["verdict"] == "SKIP"
    assert all(c["verdict"] == "SKIP" and "gpu-only" in c["reason"] for c in scen["checks"])


def summary_line(stdout):
    (line,) = [l for l in stdout.splitlines() if " scenarios: " in l]
    return line


def test_summary_counts_a_gpu_only_scenario_on_the_host_as_skipped_not_passed(tmp_path):
    out = tmp_path / "r.json"
    r = run("--backend", "host", "--scenario", SMALL, "--scenario", "gpu_attn_mixed_small_k128", "--quiet",
            "--report", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert summary_line(r.stdout).startswith("PASS: 2 scenarios: 1 passed, 1 skipped (gpu-only), 0 failed; checks: ")
    summary = load_report(out)["summary"]
    assert (summary["scenarios_passed"], summary["scenarios_skipped"], summary["scenarios_failed"]) == (1, 1, 0)
    assert summary["skipped_by_reason"] == {"gpu-only": 1}


def test_a_run_of_skipped_scenarios_only_reads_as_skipped():
    r = run("--backend", "host", "--scenario", "gpu_attn_mixed_small_k128", "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    assert summary_line(r.stdout).startswith("SKIP: 1 scenarios: 0 passed, 1 skipped (gpu-only), 0 failed; ")


def test_summary_counts_a_failed_scenario_as_failed():
    r = run("--backend", "host", "--scenario", SMALL, "--inject", "ignore-seq-starts", "--quiet")
    assert r.returncode == 1, r.stdout + r.stderr
    assert summary_line(r.stdout).startswith("FAIL: 1 scenarios: 0 passed, 0 skipped, 1 failed; ")
