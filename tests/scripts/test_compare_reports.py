"""Tests of scripts/compare_reports.py, run as CI runs it: a subprocess on two JSON files."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_reports.py"
SCHEMA = "mla-harness.report/1"
VERDICT_ORDER = ("PASS", "SKIP", "FAIL", "NONFINITE", "OOB", "ERROR")


# ---------------------------------------------------------------------------------------------
# Builders


def make_check(check_id: str, verdict: str = "PASS", reason: str | None = None, **metrics: Any) -> dict:
    base_metrics = {
        "elements": 4096,
        "mismatches": 0,
        "bit_exact": None,
        "max_abs_err": 1e-3,
        "max_rel_err": 2e-3,
        "cos_diff": 1e-7,
        "worst_index": 17,
        "worst_ref": 0.5,
        "worst_got": 0.501,
        "nonfinite_mismatches": 0,
        "guard_bytes_changed": 0,
        "untouched_bytes_changed": 0,
        "inputs_modified": False,
    }
    base_metrics.update(metrics)
    return {
        "id": check_id,
        "check": check_id.split("/")[0],
        "verdict": verdict,
        "reason": reason,
        "duration_s": 0.01,
        "metrics": base_metrics,
    }


def worst(verdicts: list[str]) -> str:
    return max(verdicts, key=VERDICT_ORDER.index, default="PASS")


def make_scenario(name: str, checks: list[dict], verdict: str | None = None, error: str | None = None) -> dict:
    return {
        "name": name,
        "file": f"scenarios/suite/{name}.json",
        "verdict": verdict or worst([c["verdict"] for c in checks]),
        "error": error,
        "repro": f"mla-check --scenario scenarios/suite/{name}.json",
        "duration_s": 0.1,
        "checks": checks,
    }


def make_report(scenarios: list[dict], backend: str = "host") -> dict:
    by_verdict: dict[str, int] = {}
    for scenario in scenarios:
        for check in scenario["checks"]:
            by_verdict[check["verdict"]] = by_verdict.get(check["verdict"], 0) + 1
    return {
        "schema": SCHEMA,
        "provenance": {
            "tool": "mla-check",
            "version": "0.1.0",
            "git_revision": "0123456789ab",
            "argv": ["mla-check", "--backend", backend],
            "backend": backend,
            "device": "cpu",
            "runtime": "none",
            "host": "ci-runner",
            "started_at": "2025-01-01T00:00:00Z",
            "duration_s": 1.5,
            "injection": None,
            "seed_override": None,
        },
        "summary": {
            "verdict": worst([s["verdict"] for s in scenarios]),
            "scenarios": len(scenarios),
            "checks": sum(len(s["checks"]) for s in scenarios),
            "by_verdict": by_verdict,
        },
        "scenarios": scenarios,
    }


def standard_report() -> dict:
    return make_report(
        [
            make_scenario("decode_small", [make_check("pack"), make_check("gather/chunks[1]"), make_check("sparse_mqa")]),
            make_scenario("prefill_fp8", [make_check("convert/decode/rank1"), make_check("forward")]),
        ]
    )


def find_check(report: dict, scenario: str, check_id: str) -> dict:
    for s in report["scenarios"]:
        if s["name"] == scenario:
            for c in s["checks"]:
                if c["id"] == check_id:
                    return c
    raise KeyError((scenario, check_id))


def set_verdict(report: dict, scenario: str, check_id: str, verdict: str, reason: str | None = None) -> dict:
    """A copy of report with one check's verdict changed (scenario and run verdicts follow)."""
    report = copy.deepcopy(report)
    check = find_check(report, scenario, check_id)
    check["verdict"], check["reason"] = verdict, reason
    for s in report["scenarios"]:
        s["verdict"] = worst([c["verdict"] for c in s["checks"]])
    report["summary"]["verdict"] = worst([s["verdict"] for s in report["scenarios"]])
    return report


def bench_entries(name: str, median_ns: float, stddev_ns: float, unit: str = "ns", repetitions: int = 3) -> list[dict]:
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6}[unit]
    common = {"run_name": name, "family_index": 0, "per_family_instance_index": 0, "threads": 1,
              "repetitions": repetitions, "iterations": 100, "time_unit": unit}
    entries = [
        {**common, "name": name, "run_type": "iteration", "repetition_index": i,
         "real_time": median_ns / scale, "cpu_time": 1000.0 / scale, "bytes_per_second": 1e12}
        for i in range(repetitions)
    ]
    for aggregate, value in (("mean", median_ns), ("median", median_ns), ("stddev", stddev_ns)):
        entries.append({**common, "name": f"{name}_{aggregate}", "run_type": "aggregate",
                        "aggregate_name": aggregate, "aggregate_unit": "time",
                        "real_time": value / scale, "cpu_time": value / scale})
    entries.append({**common, "name": f"{name}_cv", "run_type": "aggregate", "aggregate_name": "cv",
                    "aggregate_unit": "percentage", "real_time": stddev_ns / median_ns, "cpu_time": 0.01})
    return entries


def make_bench(timings: dict[str, tuple[float, float]], unit: str = "ns") -> dict:
    """timings: run_name -> (median ns, stddev ns)."""
    entries: list[dict] = []
    for name, (median_ns, stddev_ns) in timings.items():
        entries += bench_entries(name, median_ns, stddev_ns, unit)
    return {
        "context": {"date": "2025-01-01T00:00:00+00:00", "host_name": "gpu-box", "executable": "./mla-bench",
                    "num_cpus": 16, "library_build_type": "release"},
        "benchmarks": entries,
    }


def run_compare(tmp_path: Path, base: Any, new: Any, *args: str) -> subprocess.CompletedProcess:
    """Writes base/new (dicts as JSON, str as raw text, None for no file) and runs the script."""
    paths = []
    for role, document in (("base", base), ("new", new)):
        path = tmp_path / f"{role}.json"
        if isinstance(document, str):
            path.write_text(document)
        elif document is not None:
            path.write_text(json.dumps(document))
        paths.append(str(path))
    return subprocess.run(
        [sys.executable, str(SCRIPT), *paths, *args], capture_output=True, text=True, timeout=60
    )


def finding_lines(result: subprocess.CompletedProcess, severity: str) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(severity + " ")]


# ---------------------------------------------------------------------------------------------
# Reports: verdicts


def test_equal_reports_exit_0_and_say_no_changes(tmp_path):
    result = run_compare(tmp_path, standard_report(), standard_report())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No changes." in result.stdout
    assert "2 scenarios and 5 checks compared" in result.stdout
    assert "0 regressions" in result.stdout


def test_pass_to_fail_is_a_regression(tmp_path):
    new = set_verdict(standard_report(), "decode_small", "sparse_mqa", "FAIL", "max_abs_err 0.5 > atol 0.01")
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 1
    [line] = finding_lines(result, "REGRESSION")
    assert "decode_small" in line and "sparse_mqa" in line and "PASS -> FAIL" in line
    assert "max_abs_err 0.5 > atol 0.01" in line
    assert "run verdict PASS -> FAIL" in result.stdout


def test_pass_to_oob_is_a_regression(tmp_path):
    new = set_verdict(standard_report(), "decode_small", "gather/chunks[1]", "OOB", "12 guard bytes changed")
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 1
    [line] = finding_lines(result, "REGRESSION")
    assert "gather/chunks[1]" in line and "PASS -> OOB" in line


@pytest.mark.parametrize("base_verdict,new_verdict", [("FAIL", "OOB"), ("NONFINITE", "ERROR"), ("SKIP", "NONFINITE")])
def test_worsening_into_or_within_failing_verdicts_is_a_regression(tmp_path, base_verdict, new_verdict):
    base = set_verdict(standard_report(), "prefill_fp8", "forward", base_verdict)
    new = set_verdict(standard_report(), "prefill_fp8", "forward", new_verdict)
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 1
    assert f"{base_verdict} -> {new_verdict}" in finding_lines(result, "REGRESSION")[0]


def test_fail_to_pass_is_an_improvement(tmp_path):
    base = set_verdict(standard_report(), "prefill_fp8", "forward", "FAIL", "out of tolerance")
    result = run_compare(tmp_path, base, standard_report())
    assert result.returncode == 0
    [line] = finding_lines(result, "IMPROVED")
    assert "forward" in line and "FAIL -> PASS" in line
    assert "was: out of tolerance" in line
    assert "1 improvement" in result.stdout


def test_pass_to_skip_is_a_warning_unless_strict_skip(tmp_path):
    new = set_verdict(standard_report(), "decode_small", "pack", "SKIP", "backend cannot run pack")
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 0
    assert "PASS -> SKIP" in finding_lines(result, "WARNING")[0]

    strict = run_compare(tmp_path, standard_report(), new, "--strict-skip")
    assert strict.returncode == 1
    assert "PASS -> SKIP" in finding_lines(strict, "REGRESSION")[0]


def test_only_changes_are_listed(tmp_path):
    new = set_verdict(standard_report(), "decode_small", "pack", "FAIL")
    result = run_compare(tmp_path, standard_report(), new)
    assert "prefill_fp8" not in result.stdout.split("\n\n")[1]  # the table
    assert "sparse_mqa" not in result.stdout


# ---------------------------------------------------------------------------------------------
# Reports: missing and added


def test_missing_scenario_is_a_regression_unless_allowed(tmp_path):
    new = copy.deepcopy(standard_report())
    new["scenarios"] = [s for s in new["scenarios"] if s["name"] != "prefill_fp8"]
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 1
    [line] = finding_lines(result, "REGRESSION")
    assert "prefill_fp8" in line and "missing in NEW" in line

    allowed = run_compare(tmp_path, standard_report(), new, "--allow-missing")
    assert allowed.returncode == 0
    assert "missing in NEW" in finding_lines(allowed, "WARNING")[0]


def test_missing_check_is_a_regression_unless_allowed(tmp_path):
    new = copy.deepcopy(standard_report())
    new["scenarios"][0]["checks"].pop()  # decode_small / sparse_mqa
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 1
    assert "sparse_mqa" in finding_lines(result, "REGRESSION")[0]
    assert run_compare(tmp_path, standard_report(), new, "--allow-missing").returncode == 0


def test_added_scenario_and_check_are_info(tmp_path):
    new = copy.deepcopy(standard_report())
    new["scenarios"].append(make_scenario("mixed_batch", [make_check("forward")]))
    new["scenarios"][0]["checks"].append(make_check("determinism"))
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 0
    info = finding_lines(result, "INFO")
    assert any("mixed_batch" in line and "added in NEW" in line for line in info)
    assert any("determinism" in line and "added in NEW" in line for line in info)


def test_crashed_scenario_shows_its_error(tmp_path):
    new = copy.deepcopy(standard_report())
    new["scenarios"][1] = make_scenario("prefill_fp8", [], verdict="ERROR", error="process killed by SIGSEGV")
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 1
    regressions = finding_lines(result, "REGRESSION")
    assert any("(scenario)" in line and "PASS -> ERROR" in line and "SIGSEGV" in line for line in regressions)


# ---------------------------------------------------------------------------------------------
# Reports: metrics


def with_metric(report: dict, scenario: str, check_id: str, **metrics: Any) -> dict:
    report = copy.deepcopy(report)
    find_check(report, scenario, check_id)["metrics"].update(metrics)
    return report


def test_metric_drift_is_a_warning_or_with_fail_on_drift_a_regression(tmp_path):
    new = with_metric(standard_report(), "prefill_fp8", "forward", max_abs_err=5e-3)  # 1e-3 -> 5e-3
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 0
    [line] = finding_lines(result, "WARNING")
    assert "forward" in line and "max_abs_err 0.001 -> 0.005" in line

    failing = run_compare(tmp_path, standard_report(), new, "--fail-on-drift")
    assert failing.returncode == 1
    assert "max_abs_err" in finding_lines(failing, "REGRESSION")[0]


def test_drift_applies_to_any_err_metric(tmp_path):
    base = with_metric(standard_report(), "prefill_fp8", "forward", lse_err=1e-4)
    new = with_metric(standard_report(), "prefill_fp8", "forward", lse_err=1e-2)
    result = run_compare(tmp_path, base, new)
    assert "lse_err" in finding_lines(result, "WARNING")[0]


def test_drift_within_relative_factor_is_not_reported(tmp_path):
    new = with_metric(standard_report(), "prefill_fp8", "forward", max_abs_err=2.5e-3)  # x2.5 < x3
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 0
    assert "No changes." in result.stdout


def test_small_drift_under_the_absolute_floor_is_not_reported(tmp_path):
    # cos_diff 1e-7 -> 9e-7: x9, but only 8e-7 more, under the 1e-6 floor.
    new = with_metric(standard_report(), "prefill_fp8", "forward", cos_diff=9e-7)
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 0
    assert "WARNING" not in result.stdout and "No changes." in result.stdout
    # A lower floor makes it count.
    lowered = run_compare(tmp_path, standard_report(), new, "--drift-abs", "1e-7")
    assert "cos_diff" in finding_lines(lowered, "WARNING")[0]


def test_null_metrics_are_handled(tmp_path):
    nulls = {"max_abs_err": None, "max_rel_err": None, "cos_diff": None, "worst_index": None,
             "worst_ref": None, "worst_got": None, "bit_exact": None}
    base = with_metric(standard_report(), "prefill_fp8", "forward", **nulls)
    new = with_metric(standard_report(), "decode_small", "pack", **nulls)
    for a, b in ((base, new), (new, base), (base, base)):
        result = run_compare(tmp_path, a, b)
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr


def test_mismatches_from_zero_is_a_regression(tmp_path):
    new = with_metric(standard_report(), "decode_small", "pack", mismatches=3)
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 1
    assert "mismatches 0 -> 3" in finding_lines(result, "REGRESSION")[0]


def test_regressed_verdict_does_not_repeat_as_metric_lines(tmp_path):
    new = set_verdict(standard_report(), "decode_small", "pack", "FAIL")
    new = with_metric(new, "decode_small", "pack", mismatches=40, max_abs_err=0.5)
    result = run_compare(tmp_path, standard_report(), new)
    assert len(finding_lines(result, "REGRESSION")) == 1
    assert finding_lines(result, "WARNING") == []


# ---------------------------------------------------------------------------------------------
# Bad invocations


def test_schema_mismatch_exits_3(tmp_path):
    new = standard_report()
    new["schema"] = "mla-harness.report/2"
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 3
    assert "schema mismatch" in result.stderr


def test_unsupported_schema_exits_3(tmp_path):
    old = standard_report()
    old["schema"] = "something-else/9"
    result = run_compare(tmp_path, old, old)
    assert result.returncode == 3
    assert "unsupported schema" in result.stderr


def test_missing_file_exits_3(tmp_path):
    result = run_compare(tmp_path, standard_report(), None)
    assert result.returncode == 3
    assert "not found" in result.stderr


def test_invalid_json_exits_3(tmp_path):
    result = run_compare(tmp_path, standard_report(), '{"schema": "mla-harness.report/1", ')
    assert result.returncode == 3
    assert "not valid JSON" in result.stderr


def test_unknown_verdict_exits_3(tmp_path):
    new = standard_report()
    find_check(new, "decode_small", "pack")["verdict"] = "MAYBE"
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 3
    assert "unknown verdict" in result.stderr


def test_bad_option_exits_3_not_2(tmp_path):
    result = run_compare(tmp_path, standard_report(), standard_report(), "--drift-rel", "-1")
    assert result.returncode == 3
    result = run_compare(tmp_path, standard_report(), standard_report(), "--no-such-option")
    assert result.returncode == 3


def test_mixing_a_report_and_a_benchmark_file_exits_3(tmp_path):
    bench = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    for base, new in ((standard_report(), bench), (bench, standard_report())):
        result = run_compare(tmp_path, base, new)
        assert result.returncode == 3
        assert "different kinds" in result.stderr


def test_help_documents_options_and_exit_codes():
    result = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for text in ("--allow-missing", "--strict-skip", "--fail-on-drift", "--drift-rel", "--drift-abs",
                 "--perf-floor", "--json", "exit codes", SCHEMA, "late_queue_calls"):
        assert text in result.stdout


# ---------------------------------------------------------------------------------------------
# Benchmark files


def test_equal_benchmarks_exit_0(tmp_path):
    bench = make_bench({"BM_Decode/64": (1000.0, 10.0), "BM_Prefill/4096": (50_000.0, 500.0)})
    result = run_compare(tmp_path, bench, bench)
    assert result.returncode == 0
    assert "No changes." in result.stdout
    assert "2 benchmarks compared, 2 within noise" in result.stdout


def test_20_percent_slower_with_small_spread_exits_2(tmp_path):
    base = make_bench({"BM_Decode/64": (1000.0, 10.0), "BM_Prefill/4096": (50_000.0, 500.0)})
    new = make_bench({"BM_Decode/64": (1200.0, 12.0), "BM_Prefill/4096": (50_000.0, 500.0)})
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 2
    [line] = finding_lines(result, "REGRESSION")
    assert "BM_Decode/64" in line and "+20.0%" in line


def test_20_percent_slower_within_a_30_percent_spread_exits_0(tmp_path):
    base = make_bench({"BM_Decode/64": (1000.0, 300.0)})
    new = make_bench({"BM_Decode/64": (1200.0, 300.0)})
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0
    assert "1 within noise" in result.stdout


def test_3_percent_slower_under_the_5_percent_floor_exits_0(tmp_path):
    base = make_bench({"BM_Decode/64": (1000.0, 1.0)})
    new = make_bench({"BM_Decode/64": (1030.0, 1.0)})
    assert run_compare(tmp_path, base, new).returncode == 0
    assert run_compare(tmp_path, base, new, "--perf-floor", "0.01").returncode == 2


def test_faster_exits_0_and_lists_the_speed_up(tmp_path):
    base = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    new = make_bench({"BM_Decode/64": (800.0, 10.0)})
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0
    [line] = finding_lines(result, "IMPROVED")
    assert "BM_Decode/64" in line and "-20.0%" in line and "faster" in line


def test_time_units_are_normalised(tmp_path):
    base = make_bench({"BM_Decode/64": (2_000_000.0, 1000.0)}, unit="ms")
    new = make_bench({"BM_Decode/64": (2_000_000.0, 1000.0)}, unit="us")
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0 and "No changes." in result.stdout


def test_iterations_only_use_mean_and_half_range(tmp_path):
    def iterations(times: list[float]) -> dict:
        return {"context": {}, "benchmarks": [
            {"name": "BM_Gather", "run_name": "BM_Gather", "run_type": "iteration", "real_time": t,
             "time_unit": "ns", "iterations": 10} for t in times]}

    # mean 1000 -> 1100 (+10%), half range 50 / 200: within noise.
    assert run_compare(tmp_path, iterations([950, 1050]), iterations([900, 1300])).returncode == 0
    # mean 1000 -> 1100 (+10%), half range 10 / 10: a regression.
    assert run_compare(tmp_path, iterations([990, 1010]), iterations([1090, 1110])).returncode == 2


def test_a_benchmark_added_in_new_is_info(tmp_path):
    base = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    new = make_bench({"BM_Decode/64": (1000.0, 10.0), "BM_New": (10.0, 1.0)})
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0, result.stdout + result.stderr
    [line] = finding_lines(result, "INFO")
    assert "BM_New" in line and "added in NEW" in line
    assert "0 regressions, 0 warnings" in result.stdout


def errored_entries(name: str, message: str, repetitions: int = 3) -> list[dict]:
    """A benchmark ended by SkipWithError, as Google Benchmark writes it: iterations with
    error_occurred and error_message, zero times, no aggregates."""
    return [{"name": name, "run_name": name, "run_type": "iteration", "family_index": 0,
             "per_family_instance_index": 0, "repetitions": repetitions, "repetition_index": i, "threads": 1,
             "iterations": 0, "real_time": 0.0, "cpu_time": 0.0, "time_unit": "ns",
             "error_occurred": True, "error_message": message}
            for i in range(repetitions)]


def with_error(bench: dict, name: str, message: str) -> dict:
    """A copy of bench in which benchmark `name` errored with `message`."""
    bench = copy.deepcopy(bench)
    bench["benchmarks"] = [e for e in bench["benchmarks"] if e["run_name"] != name] + errored_entries(name, message)
    return bench


TWO_BENCHMARKS = {"BM_Decode/64": (1000.0, 10.0), "BM_Prefill/4096": (50_000.0, 500.0)}
SETUP_FAILED = "setup or first run failed: CUDA error: an illegal memory access was encountered"


def test_a_benchmark_that_errors_in_new_only_is_a_regression(tmp_path):
    base = make_bench(TWO_BENCHMARKS)
    new = with_error(base, "BM_Decode/64", SETUP_FAILED)
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = finding_lines(result, "REGRESSION")
    assert "BM_Decode/64" in line and "errored in NEW" in line
    assert "setup or first run failed: CUDA error" in line  # Google Benchmark's error_message
    assert "REGRESSION (exit 2)." in result.stdout
    # Even when it was fast: an error is not a speed-up.
    assert not finding_lines(result, "IMPROVED")


def test_an_error_in_new_is_in_the_json_with_both_sides(tmp_path):
    base = make_bench(TWO_BENCHMARKS)
    out = tmp_path / "comparison.json"
    result = run_compare(tmp_path, base, with_error(base, "BM_Decode/64", SETUP_FAILED), "--json", str(out))
    assert result.returncode == 2
    summary = json.loads(out.read_text())
    assert summary["exit_code"] == 2 and summary["counts"]["regression"] == 1
    [finding] = summary["findings"]
    assert (finding["severity"], finding["category"], finding["change"]) == ("REGRESSION", "error", "errored in NEW")
    assert finding["new_error"] == SETUP_FAILED and finding["base_error"] is None
    assert finding["base_ns"] == pytest.approx(1000.0) and finding["new_ns"] is None


def test_a_benchmark_that_errors_in_both_is_a_warning(tmp_path):
    base = with_error(make_bench(TWO_BENCHMARKS), "BM_Prefill/4096", "does not fit: 96 GiB of device memory")
    result = run_compare(tmp_path, base, base)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not finding_lines(result, "REGRESSION")
    [line] = finding_lines(result, "WARNING")
    assert "BM_Prefill/4096" in line and "errored in BASE and NEW" in line and "does not fit" in line
    assert "OK (exit 0)." in result.stdout


def test_a_benchmark_that_errored_in_base_only_now_runs(tmp_path):
    new = make_bench(TWO_BENCHMARKS)
    base = with_error(new, "BM_Decode/64", SETUP_FAILED)
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not finding_lines(result, "REGRESSION") and not finding_lines(result, "WARNING")
    [line] = finding_lines(result, "INFO")
    assert "BM_Decode/64" in line and "now runs" in line and "BASE errored: setup or first run failed" in line


def test_a_benchmark_missing_in_new_is_a_regression(tmp_path):
    base = make_bench(TWO_BENCHMARKS)
    new = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = finding_lines(result, "REGRESSION")
    assert "BM_Prefill/4096" in line and "missing in NEW" in line  # the wording of a missing scenario
    assert "REGRESSION (exit 2)." in result.stdout


def test_a_benchmark_missing_in_new_is_a_warning_with_allow_missing(tmp_path):
    base = make_bench(TWO_BENCHMARKS)
    new = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    result = run_compare(tmp_path, base, new, "--allow-missing")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not finding_lines(result, "REGRESSION")
    [line] = finding_lines(result, "WARNING")
    assert "BM_Prefill/4096" in line and "missing in NEW" in line and "allowed by --allow-missing" in line
    assert "OK (exit 0)." in result.stdout


def test_allow_missing_does_not_excuse_an_error_in_new(tmp_path):
    base = make_bench(TWO_BENCHMARKS)
    result = run_compare(tmp_path, base, with_error(base, "BM_Decode/64", SETUP_FAILED), "--allow-missing")
    assert result.returncode == 2
    assert "errored in NEW" in finding_lines(result, "REGRESSION")[0]


# ---------------------------------------------------------------------------------------------
# --json


def test_json_summary_of_a_report_comparison(tmp_path):
    new = set_verdict(standard_report(), "decode_small", "pack", "FAIL", "bits differ")
    out = tmp_path / "comparison.json"
    result = run_compare(tmp_path, standard_report(), new, "--json", str(out))
    assert result.returncode == 1
    summary = json.loads(out.read_text())
    assert summary["kind"] == "report" and summary["exit_code"] == 1
    assert summary["counts"]["regression"] == 1
    [finding] = summary["findings"]
    assert finding["severity"] == "REGRESSION" and finding["category"] == "verdict"
    assert (finding["scenario"], finding["check"]) == ("decode_small", "pack")
    assert (finding["base_verdict"], finding["new_verdict"]) == ("PASS", "FAIL")
    assert not list(tmp_path.glob(".comparison.json.*"))  # no temp file left behind


def test_json_summary_of_a_benchmark_comparison(tmp_path):
    base = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    new = make_bench({"BM_Decode/64": (1200.0, 10.0)})
    out = tmp_path / "comparison.json"
    result = run_compare(tmp_path, base, new, "--json", str(out))
    assert result.returncode == 2
    summary = json.loads(out.read_text())
    assert summary["kind"] == "benchmark" and summary["exit_code"] == 2
    [finding] = summary["findings"]
    assert finding["benchmark"] == "BM_Decode/64"
    assert finding["base_ns"] == pytest.approx(1000.0) and finding["new_ns"] == pytest.approx(1200.0)
    assert finding["relative"] == pytest.approx(0.2)


def test_different_attention_kernels_are_noted_without_failing(tmp_path):
    base, new = standard_report(), standard_report()
    base["provenance"]["kernels"] = "sparse_mqa=tc dense_mha=wgmma"
    new["provenance"]["kernels"] = "sparse_mqa=wgmma dense_mha=wgmma"
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the attention kernels differ (BASE: sparse_mqa=tc dense_mha=wgmma; NEW: sparse_mqa=wgmma" in result.stdout
    del base["provenance"]["kernels"]  # reports from before the field: no note
    assert "kernels differ" not in run_compare(tmp_path, base, new).stdout


def test_benchmark_method_differences_are_noted(tmp_path):
    base = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    new = make_bench({"BM_Decode/64": (900.0, 10.0)})
    base["context"]["mla_l2_flush"] = "125829120 bytes written (L2 62914560 bytes)"
    new["context"]["mla_l2_flush"] = "125829120 bytes read (L2 62914560 bytes)"
    base["context"]["mla_device"] = new["context"]["mla_device"] = "NVIDIA H200 (sm_90, 132 SMs, L2 60 MiB)"
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0  # a speed-up never fails
    assert "L2 flush differs (BASE: 125829120 bytes written" in result.stdout
    assert "device differs" not in result.stdout  # same device: no note
    base["context"]["mla_kernels"] = "sparse_mqa=tc dense_mha=tc"
    new["context"]["mla_kernels"] = "sparse_mqa=wgmma dense_mha=wgmma"
    assert "attention kernel choice differs (BASE: sparse_mqa=tc" in run_compare(tmp_path, base, new).stdout
    # Same method: no note at all.
    result = run_compare(tmp_path, base, base)
    assert "differs" not in result.stdout


# ---------------------------------------------------------------------------------------------
# Malformed input found by an audit: exit 3 naming the problem, never a traceback, a hang or a
# silently wrong result.


def malformed_reports() -> list[tuple[str, Any, str]]:
    """(what, NEW document, expected stderr substring) against the standard report."""
    cases = []

    def with_check(what: str, edit: Any, expected: str) -> None:
        new = copy.deepcopy(standard_report())
        edit(find_check(new, "decode_small", "pack"))
        cases.append((what, new, expected))

    with_check("list verdict", lambda c: c.update(verdict=["PASS"]), "unknown verdict")
    with_check("counter as float text", lambda c: c["metrics"].update(mismatches="5"), "mismatches")
    with_check("fractional counter", lambda c: c["metrics"].update(mismatches=0.5), "whole number")
    with_check("error metric as text", lambda c: c["metrics"].update(max_abs_err="1.0"), "max_abs_err")
    with_check("error metric past double", lambda c: c["metrics"].update(max_abs_err=10**400), "max_abs_err")
    summary_list = copy.deepcopy(standard_report())
    summary_list["summary"]["verdict"] = ["PASS"]
    cases.append(("summary verdict list", summary_list, None))  # ignored like any unknown summary verdict
    return cases


@pytest.mark.parametrize("what, new, expected", malformed_reports(), ids=lambda v: v if isinstance(v, str) else "")
def test_malformed_report_values_exit_3_naming_the_metric(tmp_path, what, new, expected):
    result = run_compare(tmp_path, standard_report(), new)
    assert "Traceback" not in result.stderr, result.stderr
    if expected is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 3, result.stdout + result.stderr
        assert expected in result.stderr


def test_a_counter_written_as_a_whole_float_counts(tmp_path):
    new = copy.deepcopy(standard_report())
    find_check(new, "decode_small", "pack")["metrics"]["mismatches"] = 3.0
    result = run_compare(tmp_path, standard_report(), new)
    assert result.returncode == 1
    assert "mismatches 0 -> 3" in result.stdout


@pytest.mark.parametrize("text, expected", [
    ('{"schema": "mla-harness.report/1", "x": NaN}', "NaN"),
    ('{"schema": "mla-harness.report/1", "x": Infinity}', "Infinity"),
    ('{"schema": "mla-harness.report/1", "x": 1' + "0" * 5000 + '}', "not usable JSON"),
    ('{"schema": "mla-harness.report/1", "x": ' + "[" * 100000 + "]" * 100000 + '}', "not usable JSON"),
], ids=["NaN", "Infinity", "5000-digit integer", "100000 levels"])  # short ids: they go into the environment
def test_non_json_literals_and_pathological_documents_exit_3(tmp_path, text, expected):
    result = run_compare(tmp_path, standard_report(), text)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and expected in result.stderr


def test_a_report_with_a_nan_literal_is_refused_as_base_too(tmp_path):
    text = json.dumps(standard_report())[:-1] + ', "x": NaN}'
    result = run_compare(tmp_path, text, standard_report())
    assert result.returncode == 3, result.stdout + result.stderr
    assert "BASE file" in result.stderr and "non-standard literal NaN" in result.stderr


def test_the_loader_accepts_non_finite_literals_only_when_told_the_file_is_google_benchmarks(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("compare_reports_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    path = tmp_path / "b.json"
    path.write_text('{"a": NaN, "b": Infinity, "c": -Infinity, "d": 1.5}')
    with pytest.raises(module.BadInput, match="non-standard literal NaN"):
        module.load_json(path, "benchmark")
    document = module.load_json(path, "benchmark", google_benchmark=True)
    assert math.isnan(document["a"]) and document["b"] == math.inf and document["c"] == -math.inf
    assert document["d"] == 1.5
    path.write_text('{"a": NaN, "a": 1}')  # a key given twice is refused in every file
    with pytest.raises(module.BadInput, match="key 'a' given twice"):
        module.load_json(path, "benchmark", google_benchmark=True)


def test_a_directory_or_fifo_exits_3_without_reading(tmp_path):
    directory = tmp_path / "dir.json"
    directory.mkdir()
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    report = tmp_path / "r.json"
    report.write_text(json.dumps(standard_report()))
    for path, expected in ((directory, "is a directory"), (fifo, "not a regular file")):
        result = subprocess.run([sys.executable, str(SCRIPT), str(path), str(report)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 3 and expected in result.stderr, result.stderr


def edit_bench(edit: Any) -> dict:
    bench = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    edit(bench["benchmarks"])
    return bench


def median_entry(entries: list[dict]) -> dict:
    return next(e for e in entries if e.get("aggregate_name") == "median")


@pytest.mark.parametrize("what, new, expected", [
    ("time_unit list", edit_bench(lambda b: [e.update(time_unit=["ns"]) for e in b]), "time_unit"),
    ("aggregate_name list", edit_bench(lambda b: median_entry(b).update(aggregate_name=["median"])),
     "aggregate_name"),
    ("negative median", edit_bench(lambda b: median_entry(b).update(real_time=-100.0)), "> 0"),
    ("zero median", edit_bench(lambda b: median_entry(b).update(real_time=0.0)), "> 0"),
    ("negative stddev", edit_bench(lambda b: next(e for e in b if e.get("aggregate_name") == "stddev")
                                   .update(real_time=-50.0)), ">= 0"),
    ("two medians of one name", edit_bench(lambda b: b.append(dict(median_entry(b), real_time=2000.0))),
     "two 'median' aggregates"),
    ("no results", edit_bench(lambda b: b.clear()), "no benchmark results"),
])
def test_malformed_benchmark_files_exit_3(tmp_path, what, new, expected):
    result = run_compare(tmp_path, make_bench({"BM_Decode/64": (1000.0, 10.0)}), new)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 3, result.stdout + result.stderr
    assert expected in result.stderr


def with_late_queue_calls(bench: dict, cv: float = math.nan) -> str:
    """The file as mla-bench writes it with repetitions: late_queue_calls 0 in every iteration, so
    its mean, median and stddev aggregates are 0 and its cv aggregate (0 / 0) is the literal NaN."""
    for entry in bench["benchmarks"]:
        entry["late_queue_calls"] = cv if entry.get("aggregate_name") == "cv" else 0.0
    text = json.dumps(bench)
    assert ('"late_queue_calls": NaN' if math.isnan(cv) else '"late_queue_calls": Infinity') in text
    return text


@pytest.mark.parametrize("cv", [math.nan, math.inf], ids=["NaN", "Infinity"])
def test_benchmark_files_with_a_non_finite_cv_counter_are_compared_on_their_times(tmp_path, cv):
    # Median 1000 ns -> 1200 ns, stddev 10 ns: +20 %, beyond max(10, 10, 5 % of 1000) = 50 ns.
    base = with_late_queue_calls(make_bench({"BM_Decode/64": (1000.0, 10.0)}), cv)
    new = with_late_queue_calls(make_bench({"BM_Decode/64": (1200.0, 10.0)}), cv)
    out = tmp_path / "comparison.json"
    result = run_compare(tmp_path, base, new, "--json", str(out))
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = finding_lines(result, "REGRESSION")
    assert "BM_Decode/64" in line and "1 us -> 1.2 us (+20.0%)" in line
    [finding] = json.loads(out.read_text())["findings"]
    assert finding["base_ns"] == 1000.0 and finding["new_ns"] == 1200.0 and finding["limit_ns"] == 50.0
    assert run_compare(tmp_path, base, base).returncode == 0


# ---------------------------------------------------------------------------------------------
# Benchmark files: late-queued calls (late_queue_calls)

LATE_ADVICE = "the time holds launch gaps; raise --lead-cycles"


def with_late(bench: dict, iterations: list[float] | None = None, median: float | None = None,
              mean: float | None = None, cv: float | None = None, name: str = "BM_Decode/64") -> dict:
    """A copy of bench in which benchmark `name` holds late_queue_calls: one value per iteration
    row, and on the median, mean and cv aggregates; None leaves the counter out of those rows."""
    bench = copy.deepcopy(bench)
    entries = [e for e in bench["benchmarks"] if e["run_name"] == name]
    if iterations is not None:
        rows = [e for e in entries if e["run_type"] == "iteration"]
        assert len(rows) == len(iterations)
        for row, value in zip(rows, iterations):
            row["late_queue_calls"] = value
    for aggregate, value in (("median", median), ("mean", mean), ("cv", cv)):
        if value is not None:
            next(e for e in entries if e.get("aggregate_name") == aggregate)["late_queue_calls"] = value
    return bench


def clean(bench: dict) -> dict:
    """bench as mla-bench writes it on a GPU without late calls: 0 in every repetition, so the
    median and mean aggregates are 0 and the cv aggregate (0 / 0) is NaN."""
    return with_late(bench, iterations=[0.0, 0.0, 0.0], median=0.0, mean=0.0, cv=math.nan)


def only_findings(out: Path) -> list[dict]:
    return json.loads(out.read_text())["findings"]


def assert_late_warning(result: subprocess.CompletedProcess, expected: str | None) -> None:
    """The comparison passed with no finding (expected None), or with one WARNING whose detail is
    `expected` followed by the advice."""
    assert result.returncode == 0, result.stdout + result.stderr
    if expected is None:
        assert "No changes." in result.stdout
    else:
        [line] = finding_lines(result, "WARNING")
        assert line.endswith(f"{expected}: {LATE_ADVICE}")


def cells(line: str) -> list[str]:
    """A table row's cells (the columns are separated by two or more spaces)."""
    return re.split(r" {2,}", line)


def test_late_calls_in_new_on_an_unchanged_benchmark_are_a_warning_that_does_not_fail(tmp_path):
    # Median 1000 ns -> 1010 ns: within max(10, 10, 5 % of 1000) = 50 ns. NEW: 80, 85, 90 late calls.
    base = clean(make_bench({"BM_Decode/64": (1000.0, 10.0)}))
    new = with_late(make_bench({"BM_Decode/64": (1010.0, 10.0)}), iterations=[80.0, 85.0, 90.0],
                    median=85.0, mean=85.0, cv=0.05)
    out = tmp_path / "comparison.json"
    result = run_compare(tmp_path, base, new, "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    [line] = finding_lines(result, "WARNING")
    assert cells(line) == ["WARNING", "BM_Decode/64", "late-queued calls in NEW",
                           "NEW: median 85 late-queued calls: " + LATE_ADVICE]
    assert finding_lines(result, "REGRESSION") == []
    assert ("1 benchmark compared, 1 within noise: 0 regressions, 1 warning, 0 improvements, 0 info. "
            "OK (exit 0).") in result.stdout
    [finding] = only_findings(out)
    assert finding["severity"] == "WARNING" and finding["category"] == "late-queue"
    assert finding["change"] == "late-queued calls in NEW"
    assert finding["base_late_queue_calls"] == 0.0 and finding["new_late_queue_calls"] == 85.0
    assert finding["base_ns"] == 1000.0 and finding["new_ns"] == 1010.0
    assert json.loads(out.read_text())["exit_code"] == 0


def test_late_calls_in_base_or_both_name_the_side(tmp_path):
    late_3 = with_late(make_bench({"BM_Decode/64": (1000.0, 10.0)}), median=3.0)
    late_1 = with_late(make_bench({"BM_Decode/64": (1000.0, 10.0)}), median=1.0)
    result = run_compare(tmp_path, late_3, clean(make_bench({"BM_Decode/64": (1000.0, 10.0)})))
    assert result.returncode == 0
    [line] = finding_lines(result, "WARNING")
    assert cells(line)[2:] == ["late-queued calls in BASE", "BASE: median 3 late-queued calls: " + LATE_ADVICE]
    out = tmp_path / "comparison.json"
    assert run_compare(tmp_path, late_3, late_1, "--json", str(out)).returncode == 0
    [finding] = only_findings(out)
    assert finding["change"] == "late-queued calls in BASE and NEW"
    assert finding["detail"] == "BASE: median 3 late-queued calls; NEW: median 1 late-queued call: " + LATE_ADVICE
    assert finding["base_late_queue_calls"] == 3.0 and finding["new_late_queue_calls"] == 1.0


def test_a_regression_with_late_calls_in_new_stays_a_regression_and_names_them(tmp_path):
    # Median 1000 ns -> 1200 ns, stddev 10 ns: +20 %, beyond 50 ns. BASE reports no counter.
    base = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    new = with_late(make_bench({"BM_Decode/64": (1200.0, 10.0)}), median=40.0)
    out = tmp_path / "comparison.json"
    result = run_compare(tmp_path, base, new, "--json", str(out))
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = finding_lines(result, "REGRESSION")
    assert cells(line)[2] == "1 us -> 1.2 us (+20.0%)"
    assert cells(line)[3].startswith("NEW: median 40 late-queued calls: " + LATE_ADVICE + "; slower")
    assert finding_lines(result, "WARNING") == []
    assert "1 regression, 0 warnings, 0 improvements, 0 info. REGRESSION (exit 2)." in result.stdout
    [finding] = only_findings(out)
    assert finding["severity"] == "REGRESSION" and finding["category"] == "performance"
    assert finding["detail"] == ("NEW: median 40 late-queued calls: " + LATE_ADVICE
                                 + "; slower beyond ±50 ns (spread 10 ns / 10 ns, floor 5%)")
    assert finding["base_late_queue_calls"] is None and finding["new_late_queue_calls"] == 40.0
    assert finding["base_ns"] == 1000.0 and finding["new_ns"] == 1200.0


def test_a_speed_up_with_late_calls_in_base_stays_an_improvement(tmp_path):
    base = with_late(make_bench({"BM_Decode/64": (1000.0, 10.0)}), median=12.0)
    new = clean(make_bench({"BM_Decode/64": (800.0, 10.0)}))
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0, result.stdout + result.stderr
    [line] = finding_lines(result, "IMPROVED")
    assert cells(line)[2] == "1 us -> 800 ns (-20.0%)"
    assert cells(line)[3].startswith("BASE: median 12 late-queued calls: " + LATE_ADVICE + "; faster")
    assert "0 regressions, 0 warnings, 1 improvement, 0 info. OK (exit 0)." in result.stdout


@pytest.mark.parametrize("counters", ["absent", "zero", "zero and absent"])
def test_no_late_calls_add_nothing(tmp_path, counters):
    def file(median_ns: float, side: int) -> dict:
        bench = make_bench({"BM_Decode/64": (median_ns, 10.0)})
        return bench if counters == "absent" or (counters == "zero and absent" and side == 1) else clean(bench)

    result = run_compare(tmp_path, file(1000.0, 0), file(1010.0, 1))
    assert result.returncode == 0 and "No changes." in result.stdout
    assert "1 benchmark compared, 1 within noise: 0 regressions, 0 warnings" in result.stdout
    out = tmp_path / "comparison.json"
    result = run_compare(tmp_path, file(1000.0, 0), file(1200.0, 1), "--json", str(out))
    assert result.returncode == 2
    [finding] = only_findings(out)
    assert finding["detail"] == "slower beyond ±50 ns (spread 10 ns / 10 ns, floor 5%)"
    assert "base_late_queue_calls" not in finding and "new_late_queue_calls" not in finding
    assert "late-queued" not in result.stdout


@pytest.mark.parametrize("edit, expected", [
    # The time comes from the median aggregate: so does the counter, whatever the iterations say.
    (dict(iterations=[30.0, 30.0, 30.0], median=0.0, mean=30.0), None),
    (dict(iterations=[0.0, 0.0, 0.0], median=7.0, mean=0.0), "NEW: median 7 late-queued calls"),
    # A NaN or absent median counter is not reported, though the iterations had late calls.
    (dict(iterations=[50.0, 50.0, 50.0], median=math.nan, mean=50.0), None),
    (dict(iterations=[50.0, 50.0, 50.0], mean=50.0), None),
], ids=["median 0, iterations 30", "median 7, iterations 0", "median NaN", "median absent"])
def test_the_counter_is_read_from_the_median_aggregate_when_the_time_is(tmp_path, edit, expected):
    base = clean(make_bench({"BM_Decode/64": (1000.0, 10.0)}))
    result = run_compare(tmp_path, base, with_late(make_bench({"BM_Decode/64": (1000.0, 10.0)}), **edit))
    assert_late_warning(result, expected)


def iteration_bench(late: list[float | None]) -> dict:
    """A benchmark of iterations only (no aggregates), 1000 ns each, with these late_queue_calls
    (None: the row has no counter)."""
    rows = [{"name": "BM_Gather", "run_name": "BM_Gather", "run_type": "iteration", "real_time": 1000.0,
             "time_unit": "ns", "iterations": 10} for _ in late]
    for row, value in zip(rows, late):
        if value is not None:
            row["late_queue_calls"] = value
    return {"context": {}, "benchmarks": rows}


@pytest.mark.parametrize("late, expected", [
    ([1.0, 2.0, 3.0, 4.0], "NEW: mean 2.5 late-queued calls"),
    ([0.0, 0.0, 0.0, 3.0], "NEW: mean 0.8 late-queued calls"),
    ([0.0, 0.0, 0.0, 4.0], "NEW: mean 1 late-queued call"),
    ([0.0, 0.0, 0.0, 0.0], None),
    ([None, 4.0, 4.0, 4.0], None),      # one iteration without the counter: the mean is unknown
    ([math.nan, 4.0, 4.0, 4.0], None),
], ids=["mean 2.5", "mean 0.75", "mean 1", "zeros", "one absent", "one NaN"])
def test_the_counter_is_the_mean_over_the_iterations_when_the_time_is(tmp_path, late, expected):
    result = run_compare(tmp_path, iteration_bench([0.0] * 4), iteration_bench(late))
    assert_late_warning(result, expected)


def test_the_counter_is_the_mean_aggregates_when_the_time_is(tmp_path):
    def mean_only(late: float) -> dict:
        bench = make_bench({"BM_Decode/64": (1000.0, 10.0)})
        bench["benchmarks"] = [e for e in bench["benchmarks"]
                               if e["run_type"] == "aggregate" and e["aggregate_name"] != "median"]
        return with_late(bench, mean=late, cv=0.5)  # the cv aggregate's value is never read

    assert_late_warning(run_compare(tmp_path, mean_only(0.0), mean_only(4.0)), "NEW: mean 4 late-queued calls")


@pytest.mark.parametrize("aggregate, literal", [("median", "NaN"), ("median", "Infinity"), ("stddev", "NaN")])
def test_a_non_finite_time_that_is_read_exits_3_naming_the_entry(tmp_path, aggregate, literal):
    bench = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    index, entry = next((i, e) for i, e in enumerate(bench["benchmarks"]) if e.get("aggregate_name") == aggregate)
    entry["real_time"] = float(literal)
    result = run_compare(tmp_path, make_bench({"BM_Decode/64": (1000.0, 10.0)}), with_late_queue_calls(bench))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert (f"NEW file {tmp_path / 'new.json'}: at /benchmarks/{index} ('BM_Decode/64_{aggregate}'): "
            f"\"real_time\" is {literal}, not a finite number") in result.stderr


def test_old_google_benchmark_aggregates_without_run_name_are_grouped(tmp_path):
    old = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    for entry in old["benchmarks"]:
        entry.pop("run_name")
        entry.pop("run_type")
    result = run_compare(tmp_path, old, make_bench({"BM_Decode/64": (1000.0, 10.0)}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 benchmark compared" in result.stdout


def test_control_characters_in_names_cannot_forge_table_rows(tmp_path):
    name = "BM_x\nREGRESSION  forged row"
    base = make_bench({name: (1000.0, 10.0)})
    new = make_bench({name: (1000.0, 10.0), "BM_other": (5.0, 0.0)})
    result = run_compare(tmp_path, base, new)
    assert result.returncode == 0
    assert not any(line.startswith("REGRESSION") for line in result.stdout.splitlines())
    assert "BM_other" in result.stdout


def test_an_unwritable_json_output_prints_no_verdict(tmp_path):
    bench = make_bench({"BM_Decode/64": (1000.0, 10.0)})
    result = run_compare(tmp_path, bench, bench, "--json", str(tmp_path))  # a directory
    assert result.returncode == 3
    assert "cannot write --json" in result.stderr
    assert "exit 0" not in result.stdout and "OK" not in result.stdout


def test_a_path_the_system_refuses_exits_3(tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps(standard_report()))
    result = subprocess.run([sys.executable, str(SCRIPT), "a" * 300, str(report)],  # ENAMETOOLONG
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
