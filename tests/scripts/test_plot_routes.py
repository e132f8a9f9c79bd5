"""Tests of scripts/plot_routes.py: a subprocess on JSON files written here, as a user runs it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "plot_routes.py"


def run(*args: Any) -> subprocess.CompletedProcess:
    """plot_routes.py as a user runs it; skipped where it would draw without matplotlib."""
    result = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)
    if result.returncode != 0 and "drawing figures needs matplotlib" in result.stderr:
        pytest.skip("matplotlib is not installed (scripts/install_deps.sh)")
    return result


def median(name: str, time_us: float) -> dict:
    return {"name": f"{name}/manual_time_median", "run_name": f"{name}/manual_time", "run_type": "aggregate",
            "aggregate_name": "median", "repetitions": 5, "real_time": time_us, "time_unit": "us"}


def bench_file(path: Path, entries: list[dict]) -> Path:
    path.write_text(json.dumps({"context": {"executable": "mla-bench"}, "benchmarks": entries}))
    return path


# Times (us) chosen here: at K 512, H 16 dense is faster up to P 64 and sparse from P 256 on (the
# crossover is 256); at K 2048, H 16 dense is faster at every P it is timed at (no crossover).
TIMES = {
    (512, 16): {1: (100.0, 110.0), 16: (100.0, 120.0), 64: (150.0, 160.0), 256: (400.0, 300.0),
                512: (800.0, 500.0), 1024: (None, 900.0)},
    (2048, 16): {1: (200.0, 260.0), 1024: (500.0, 1000.0), 2048: (900.0, 1800.0), 4096: (None, 3500.0)},
}


def route_entries() -> list[dict]:
    entries = [median("forward/mixed_medium/H:128/K:2048", 5.0)]  # not a route benchmark: ignored
    for (topk, heads), by_prefill in TIMES.items():
        for prefill, (dense, sparse) in reversed(list(by_prefill.items())):  # not in P order
            if dense is not None:
                entries.append(median(f"route/dense/H:{heads}/K:{topk}/prefill:{prefill}", dense))
            entries.append(median(f"route/sparse/H:{heads}/K:{topk}/prefill:{prefill}", sparse))
    return entries


def table(stdout: str, title: str) -> list[list[str]]:
    """The rows of the Markdown table under the heading that starts with `title`."""
    rows, inside = [], False
    for line in stdout.splitlines():
        if line.startswith("### "):
            inside = line.startswith(f"### {title}")
        elif inside and line.startswith("| ") and not line.startswith("| K |") and not line.startswith("| layer |"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_routes_table_has_each_ratio_faster_route_and_the_crossover(tmp_path):
    r = run("routes", bench_file(tmp_path / "b.json", route_entries()), "--table")
    assert r.returncode == 0, r.stderr
    rows = {(int(k), int(h), int(p)): rest for k, h, p, *rest in table(r.stdout, "Route times")}
    assert len(rows) == 10
    assert rows[(512, 16, 1)] == ["100", "110", "1.100", "dense"]
    assert rows[(512, 16, 256)] == ["400", "300", "0.750", "sparse"]
    assert rows[(512, 16, 512)] == ["800", "500", "0.625", "sparse"]
    assert rows[(512, 16, 1024)] == ["—", "900", "—", "sparse only (prefill > K)"]
    assert rows[(2048, 16, 2048)] == ["900", "1800", "2.000", "dense"]
    assert list(rows) == sorted(rows)  # ascending K, H, P whatever the file's order
    crossover = table(r.stdout, "Crossover")
    assert crossover == [["512", "16", "dense", "256"], ["2048", "16", "dense", "none"]]


def test_failed_route_benchmarks_are_left_out_with_a_note(tmp_path):
    entries = route_entries()
    entries.append({"name": "route/dense/H:32/K:512/prefill:16/manual_time", "run_name":
                    "route/dense/H:32/K:512/prefill:16/manual_time", "run_type": "iteration", "error_occurred": True,
                    "error_message": "out of memory"})
    entries.append(median("route/sparse/H:32/K:512/prefill:16", 70.0))
    r = run("routes", bench_file(tmp_path / "b.json", entries), "--table")
    assert r.returncode == 0, r.stderr
    assert "1 failed route benchmark(s) left out" in r.stderr
    rows = {(k, h, p): rest for k, h, p, *rest in table(r.stdout, "Route times")}
    assert rows[("512", "32", "16")] == ["—", "70", "—", "—"]
    assert ["512", "32", "—", "— (no prefill length with both routes)"] in table(r.stdout, "Crossover")


def with_cv(entries: list[dict]) -> list[dict]:
    """Each median followed by the stddev and cv aggregates mla-bench writes with repetitions on a
    GPU: late_queue_calls 0 in every repetition, so its cv (0 / 0) is NaN."""
    out = []
    for entry in entries:
        out.append({**entry, "late_queue_calls": 0.0})
        for aggregate, value, late in (("stddev", 0.5, 0.0), ("cv", 0.01, math.nan)):
            out.append({**entry, "name": entry["name"].replace("_median", f"_{aggregate}"), "aggregate_name": aggregate,
                        "real_time": value, "late_queue_calls": late})
    return out


def test_a_google_benchmark_nan_in_a_cv_counter_is_read_and_the_times_tabled(tmp_path):
    path = bench_file(tmp_path / "b.json", with_cv(route_entries()))
    assert '"late_queue_calls": NaN' in path.read_text()  # the literal, as Google Benchmark writes it
    r = run("routes", path, "--table")
    assert r.returncode == 0, r.stderr
    rows = {(int(k), int(h), int(p)): rest for k, h, p, *rest in table(r.stdout, "Route times")}
    # TIMES above: 110 / 100 and 300 / 400.
    assert rows[(512, 16, 1)] == ["100", "110", "1.100", "dense"]
    assert rows[(512, 16, 256)] == ["400", "300", "0.750", "sparse"]
    assert table(r.stdout, "Crossover") == [["512", "16", "dense", "256"], ["2048", "16", "dense", "none"]]


@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
def test_a_non_finite_median_time_names_the_file_and_the_entry(tmp_path, literal):
    entries = with_cv(route_entries())
    median_name = "route/sparse/H:16/K:512/prefill:256/manual_time_median"
    index = next(i for i, e in enumerate(entries) if e["name"] == median_name)
    entries[index]["real_time"] = float(literal)
    path = bench_file(tmp_path / "b.json", entries)
    r = run("routes", path, "--table")
    assert r.returncode == 3, r.stdout
    assert (f"benchmark file {path}: at /benchmarks/{index} ('{median_name}'): "
            f"\"real_time\" is {literal}, not a finite number") in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("entries, problem", [
    ([median("forward/mixed_medium/H:128/K:2048", 5.0)], "has no route/... benchmarks"),
    ([median("route/dense/H:16/K:512/prefill:1", 1.0), {**median("route/dense/H:16/K:512/prefill:1", 2.0),
                                                         "run_name": "route/dense/H:16/K:512/prefill:1/real_time"}],
     "a second dense benchmark"),
])
def test_routes_input_without_usable_route_benchmarks_exits_3(tmp_path, entries, problem):
    r = run("routes", bench_file(tmp_path / "b.json", entries), "--table")
    assert r.returncode == 3
    assert problem in r.stderr


def test_routes_figure_is_written(tmp_path):
    r = run("routes", bench_file(tmp_path / "b.json", route_entries()), "--out", tmp_path / "fig", "--format", "svg")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "fig" / "routes.svg"
    assert r.stdout.strip() == str(out)
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))


# --- drift -------------------------------------------------------------------------------------

def drift_check(route: str, layer: int, out_cos: float, stream_cos: float, verdict: str = "PASS") -> dict:
    return {"id": f"drift/{route}/layer[{layer}]", "check": "drift", "verdict": verdict,
            "reason": None if verdict == "PASS" else "cosine difference over tolerance", "duration_s": 0.1,
            "metrics": {"elements": 100, "mismatches": 0, "max_abs_err": out_cos * 10, "max_rel_err": None,
                        "cos_diff": out_cos, "cos_tolerance": out_cos * 4, "layer": layer,
                        "stream_cos_diff": stream_cos, "stream_cos_tolerance": stream_cos * 4,
                        "stream_max_abs_err": stream_cos * 10}}


def report_file(path: Path, scenarios: list[dict]) -> Path:
    path.write_text(json.dumps({"schema": "mla-harness.report/1", "provenance": {}, "summary": {"verdict": "PASS"},
                                "scenarios": scenarios}))
    return path


def drift_scenario(name: str, layers: int, fail_at: int | None = None) -> dict:
    checks = [{"id": "forward", "check": "forward", "verdict": "PASS", "reason": None, "duration_s": 0.1,
               "metrics": {"cos_diff": 1e-6}}]
    for route, base in (("sparse", 1e-3), ("dense", 1e-5)):  # sparse first: the table orders dense first
        for layer in range(layers, 0, -1):
            verdict = "FAIL" if route == "dense" and layer == fail_at else "PASS"
            checks.append(drift_check(route, layer, base * layer, base * layer / 100, verdict))
    return {"name": name, "verdict": "PASS", "error": None, "checks": checks}


def test_drift_table_lists_both_routes_per_layer(tmp_path):
    report = report_file(tmp_path / "r.json", [drift_scenario("stack", 4, fail_at=3), drift_scenario("other", 2)])
    r = run("drift", report, "--table", "--scenario", "stack")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout, "stack:")
    assert [row[0] for row in rows] == ["1", "2", "3", "4"]
    assert rows[1] == ["2", "2e-05", "2e-07", "0.0002", "0.002", "2e-05", "0.02"]
    assert rows[2][1] == "3e-05 (FAIL)"
    assert "other" not in r.stdout
    r = run("drift", report, "--table", "--layers", "1,4")
    assert r.returncode == 0, r.stderr
    assert [row[0] for row in table(r.stdout, "stack:")] == ["1", "4"]
    assert [row[0] for row in table(r.stdout, "other:")] == ["1"]


@pytest.mark.parametrize("scenarios, args, problem", [
    ([{"name": "plain", "verdict": "PASS", "error": None, "checks": []}], [], "has no drift/... results"),
    ([drift_scenario("stack", 2)], ["--scenario", "nothere"], "for scenario 'nothere'"),
])
def test_drift_without_results_exits_3(tmp_path, scenarios, args, problem):
    r = run("drift", report_file(tmp_path / "r.json", scenarios), "--table", *args)
    assert r.returncode == 3
    assert problem in r.stderr


def test_a_report_with_a_nan_literal_is_refused(tmp_path):
    # mla-check writes null for a NaN metric: a NaN literal in a report is not accepted.
    path = report_file(tmp_path / "r.json", [drift_scenario("stack", 2)])
    path.write_text(path.read_text().replace('"cos_diff": 1e-06', '"cos_diff": NaN'))
    r = run("drift", path, "--table")
    assert r.returncode == 3
    assert f"report file {path} is not usable JSON: non-standard literal NaN" in r.stderr


def test_drift_bad_layer_list_is_a_usage_error(tmp_path):
    r = run("drift", report_file(tmp_path / "r.json", [drift_scenario("stack", 2)]), "--table", "--layers", "0,x")
    assert r.returncode == 2
    assert "--layers" in r.stderr


def test_drift_figure_is_written_per_scenario(tmp_path):
    report = report_file(tmp_path / "r.json", [drift_scenario("stack", 5), drift_scenario("two/odd name", 3)])
    r = run("drift", report, "--out", tmp_path / "fig", "--format", "svg")
    assert r.returncode == 0, r.stderr
    written = r.stdout.split()
    assert written == [str(tmp_path / "fig" / "drift-stack.svg"), str(tmp_path / "fig" / "drift-two_odd_name.svg")]
    for path in written:
        assert Path(path).read_text().lstrip().startswith(("<?xml", "<svg"))
