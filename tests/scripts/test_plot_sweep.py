"""Tests of scripts/plot_sweep.py: a subprocess on JSON files written here, as a user runs it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "plot_sweep.py"
RESULTS = ROOT / "docs" / "results" / "2026-11-30-h200"


def run(*args: Any) -> subprocess.CompletedProcess:
    """plot_sweep.py as a user runs it; the test is skipped where it would draw without matplotlib
    (plot_sweep.py then says so and exits 3: checked in test_figures_need_matplotlib)."""
    result = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)
    if result.returncode != 0 and "drawing figures needs matplotlib" in result.stderr:
        pytest.skip("matplotlib is not installed (scripts/install_deps.sh)")
    return result


def median(name: str, time_us: float, **counters: float) -> dict:
    return {"name": f"{name}/manual_time_median", "run_name": f"{name}/manual_time", "run_type": "aggregate",
            "aggregate_name": "median", "repetitions": 3, "real_time": time_us, "time_unit": "us", **counters}


def iteration(name: str, time_us: float, **counters: float) -> dict:
    return {"name": f"{name}/manual_time", "run_name": f"{name}/manual_time", "run_type": "iteration",
            "real_time": time_us, "time_unit": "us", **counters}


def bench_file(path: Path, entries: list[dict]) -> Path:
    path.write_text(json.dumps({"context": {"executable": "mla-bench"}, "benchmarks": entries}))
    return path


def table_rows(stdout: str, op: str) -> list[tuple[str, str, str]]:
    """The (series, x, value) rows of one operation's Markdown table."""
    rows, inside = [], False
    for line in stdout.splitlines():
        if line.startswith("### "):
            inside = line.startswith(f"### {op}:")
        elif inside and line.startswith("| ") and not line.startswith("| series"):
            rows.append(tuple(cell.strip() for cell in line.strip("|").split("|")))
    return rows


@pytest.fixture
def cache_bench(tmp_path: Path) -> Path:
    # pack at two block sizes and three sizes; the values are arbitrary, distinct and known here.
    entries = []
    for block, base in (("16", 10.0), ("64", 20.0)):
        for tokens, extra in (("4096", 1.0), ("1024", 0.0), ("65536", 2.0)):  # not in x order
            name = f"pack/B:{block}/tokens:{tokens}"
            entries += [iteration(name, 5.0, pct_of_copy_bw=1.0), median(name, 4.0, pct_of_copy_bw=base + extra)]
    entries.append(median("convert/B:64/K:2048/rows:512", 7.0, pct_of_copy_bw=30.0, bytes_per_second=2e12))
    entries.append(median("convert/B:64/K:2048/rows:16384", 70.0, pct_of_copy_bw=88.0, bytes_per_second=3.7e12))
    return bench_file(tmp_path / "cache.json", entries)


def test_table_series_by_parameters_sorted_by_x(cache_bench: Path) -> None:
    result = run(cache_bench, "--table")
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout, "pack") == [
        ("B:16", "1024", "10"), ("B:16", "4096", "11"), ("B:16", "65536", "12"),
        ("B:64", "1024", "20"), ("B:64", "4096", "21"), ("B:64", "65536", "22"),
    ]
    assert "### pack: % of the measured copy bandwidth against tokens" in result.stdout
    # convert: rows vary, K and B do not; the memory-bound default is % of copy.
    assert table_rows(result.stdout, "convert") == [("B:64/K:2048", "512", "30"), ("B:64/K:2048", "16384", "88")]


def test_metric_and_x_can_be_chosen(cache_bench: Path) -> None:
    result = run(cache_bench, "--table", "--metric", "bytes_per_second", "--filter", "^convert")
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout, "convert") == [("B:64/K:2048", "512", "2000"), ("B:64/K:2048", "16384", "3700")]
    assert "pack" not in result.stdout
    result = run(cache_bench, "--table", "--metric", "time", "--x", "B", "--filter", "tokens:1024$")
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout, "pack") == [("tokens:1024", "16", "4"), ("tokens:1024", "64", "4")]


def test_iterations_only_are_averaged_and_ties_take_the_last_parameter(tmp_path: Path) -> None:
    entries = []
    for reqs, tokens, flops in (("1", "1024", 3e14), ("4", "4096", 4e14), ("8", "8192", 5e14)):
        name = f"dense_mha/H:128/reqs:{reqs}/tokens:{tokens}"
        entries += [iteration(name, 10.0, flops_per_second=flops - 1e13), iteration(name, 12.0, flops_per_second=flops + 1e13)]
    path = bench_file(tmp_path / "dense.json", entries)
    result = run(path, "--table")
    assert result.returncode == 0, result.stderr
    # reqs and tokens both have 3 values: tokens, named last, is x; TFLOP/s, the mean of two runs.
    assert table_rows(result.stdout, "dense_mha") == [
        ("H:128/reqs:1", "1024", "300"), ("H:128/reqs:4", "4096", "400"), ("H:128/reqs:8", "8192", "500")]
    result = run(path, "--table", "--metric", "time")
    assert table_rows(result.stdout, "dense_mha")[0] == ("H:128/reqs:1", "1024", "11")


def test_several_inputs_and_a_peer(tmp_path: Path, cache_bench: Path) -> None:
    other = bench_file(tmp_path / "after.json", [median("pack/B:64/tokens:1024", 3.0, pct_of_copy_bw=25.0)])
    peer = tmp_path / "peer.json"
    peer.write_text(json.dumps({"tool": "peer_torch.py", "timing": {"results": [
        {"name": "pack/B:64/tokens:1024", "median_s": 2e-4, "pct_of_copy_bw": 0.5},
        {"name": "pack/B:64/tokens:4096", "median_s": 3e-4, "pct_of_copy_bw": 1.5}]}}))
    result = run(cache_bench, other, "--label", "before", "--label", "after", "--peer", peer, "--table", "--filter", "B:64")
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout, "pack") == [
        ("before: B:64", "1024", "20"), ("before: B:64", "4096", "21"), ("before: B:64", "65536", "22"),
        ("after: B:64", "1024", "25"), ("peer: B:64", "1024", "0.5"), ("peer: B:64", "4096", "1.5")]


def test_star_sweeps_and_a_benchmark_with_an_error(tmp_path: Path) -> None:
    centre = "sparse_mqa/batch:128/q:2/H:128/K:2048"
    entries = [median(f"{centre}/seq:16384", 600.0, flops_per_second=2.4e14),
               median("sparse_mqa/batch:1/q:2/H:128/K:2048/seq:16384", 40.0, flops_per_second=2.5e13),
               median("sparse_mqa/batch:128/q:2/H:16/K:2048/seq:16384", 90.0, flops_per_second=5e13),
               {**median(f"{centre}/seq:4096", 1.0, flops_per_second=1.0), "error_occurred": True,
                "error_message": "out of memory"}]
    path = bench_file(tmp_path / "sparse.json", entries)
    result = run(path, "--table")
    assert result.returncode == 0, result.stderr
    # The failed benchmark is left out; batch and H vary (2 values each): H, named later, is x.
    assert table_rows(result.stdout, "sparse_mqa") == [
        ("batch:128/q:2/K:2048/seq:16384", "16", "50"), ("batch:128/q:2/K:2048/seq:16384", "128", "240"),
        ("batch:1/q:2/K:2048/seq:16384", "128", "25")]
    out = tmp_path / "figures"
    result = run(path, "--out", out)
    assert result.returncode == 0, result.stderr
    assert (out / "sparse_mqa.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def aggregates(name: str, median_us: float, pct: float) -> list[dict]:
    """A benchmark's aggregates as mla-bench (and peer_timing.py) write them with repetitions on a
    GPU: late_queue_calls 0 in every repetition, so its cv aggregate (0 / 0) is NaN. The mean is off
    on purpose: the median is what is read."""
    rows = []
    for aggregate, time_us, counter, late in (("mean", 2 * median_us, 2 * pct, 0.0), ("median", median_us, pct, 0.0),
                                              ("stddev", 0.1, 0.05, 0.0), ("cv", 0.01, 0.01, math.nan)):
        rows.append({"name": f"{name}/manual_time_{aggregate}", "run_name": f"{name}/manual_time",
                     "run_type": "aggregate", "aggregate_name": aggregate, "repetitions": 3,
                     "aggregate_unit": "percentage" if aggregate == "cv" else "time", "real_time": time_us,
                     "time_unit": "us", "pct_of_copy_bw": counter, "late_queue_calls": late})
    return rows


def test_a_google_benchmark_nan_in_a_cv_counter_is_read_in_bench_and_peer_files(tmp_path: Path) -> None:
    ours = bench_file(tmp_path / "ours.json", aggregates("pack/tokens:1024", 4.0, 10.0)
                      + aggregates("pack/tokens:4096", 8.0, 20.0))
    peer = bench_file(tmp_path / "peer.json", aggregates("pack/tokens:1024", 5.0, 0.5)
                      + aggregates("pack/tokens:4096", 9.0, 1.5))
    for path in (ours, peer):
        assert '"late_queue_calls": NaN' in path.read_text()  # the literal, as Google Benchmark writes it
    result = run(ours, "--peer", peer, "--table")
    assert result.returncode == 0, result.stderr
    # The median aggregates' pct_of_copy_bw, as written above.
    assert table_rows(result.stdout, "pack") == [
        ("pack", "1024", "10"), ("pack", "4096", "20"), ("peer: pack", "1024", "0.5"), ("peer: pack", "4096", "1.5")]
    result = run(ours, "--peer", peer, "--table", "--metric", "time")
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout, "pack") == [
        ("pack", "1024", "4"), ("pack", "4096", "8"), ("peer: pack", "1024", "5"), ("peer: pack", "4096", "9")]


@pytest.mark.parametrize("key, message", [("real_time", "\"real_time\" is NaN, not a finite number"),
                                          ("pct_of_copy_bw", "\"pct_of_copy_bw\" is NaN, not a finite number >= 0")])
def test_a_nan_in_the_median_that_is_read_names_the_file_and_the_entry(tmp_path: Path, key: str, message: str) -> None:
    entries = aggregates("pack/tokens:1024", 4.0, 10.0) + aggregates("pack/tokens:4096", 8.0, 20.0)
    index = next(i for i, e in enumerate(entries) if e["name"] == "pack/tokens:4096/manual_time_median")
    entries[index][key] = math.nan
    path = bench_file(tmp_path / "b.json", entries)
    result = run(path, "--table")
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert f"benchmark file {path}" in result.stderr
    assert f"at /benchmarks/{index} ('pack/tokens:4096/manual_time_median'): {message}" in result.stderr
    assert result.stdout == ""


def test_figures_png_and_svg(tmp_path: Path, cache_bench: Path) -> None:
    out = tmp_path / "png"
    result = run(cache_bench, "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(out / "pack.png"), str(out / "convert.png")]
    for name in ("pack.png", "convert.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = tmp_path / "svg"
    result = run(cache_bench, "--out", out, "--format", "svg")
    assert result.returncode == 0, result.stderr
    assert "<svg" in (out / "pack.svg").read_text()


def test_figures_need_matplotlib(tmp_path: Path, cache_bench: Path) -> None:
    # matplotlib made unimportable in the child (a module of that name that raises ImportError,
    # first on its path): figures are a clear error, exit 3; --table still works.
    blocker = tmp_path / "no-matplotlib"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('hidden by the test')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    command = [sys.executable, str(SCRIPT), str(cache_bench)]
    figures = subprocess.run([*command, "--out", str(tmp_path / "figs")], capture_output=True, text=True, env=env,
                             timeout=120)
    assert figures.returncode == 3, figures.stdout + figures.stderr
    assert "drawing figures needs matplotlib" in figures.stderr and "install_deps.sh" in figures.stderr
    table = subprocess.run([*command, "--table"], capture_output=True, text=True, env=env, timeout=120)
    assert table.returncode == 0, table.stderr
    assert table_rows(table.stdout, "pack")


@pytest.mark.skipif(not (RESULTS / "attention-lead200000-r1.json").is_file(), reason="committed results not present")
def test_committed_results_plot(tmp_path: Path) -> None:
    # The attention sweep and its peer as docs/performance.md cites them (docs/results/README.md).
    result = run(RESULTS / "attention-lead200000-r1.json", "--peer", RESULTS / "peer-attention-lead200000-r1.json",
                 "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dense_mha.png", "forward.png", "sparse_mqa.png"]
    result = run(RESULTS / "attention-lead200000-r1.json", "--table")
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout, "sparse_mqa")


@pytest.mark.parametrize(
    "make, args, code, message",
    [
        (lambda d: d / "missing.json", ["--table"], 3, "benchmark file not found"),
        (lambda d: (d / "bad.json").write_text("{") and d / "bad.json", ["--table"], 3, "is not valid JSON"),
        (lambda d: (d / "report.json").write_text('{"schema": "mla-harness.report/1"}') and d / "report.json",
         ["--table"], 3, "is not a Google Benchmark output"),
        (lambda d: bench_file(d / "empty.json", []), ["--table"], 3, "holds no benchmark results"),
        (lambda d: bench_file(d / "t.json", [median("pack/tokens:1", 0.0)]), ["--table"], 3, "\"real_time\" 0.0 must be > 0"),
        (lambda d: bench_file(d / "ok.json", [median("pack/tokens:1", 1.0)]), [], 2, "one of the arguments --out --table is required"),
        (lambda d: bench_file(d / "ok.json", [median("pack/tokens:1", 1.0)]), ["--table", "--filter", "("], 2, "--filter"),
        (lambda d: bench_file(d / "ok.json", [median("pack/tokens:1", 1.0)]), ["--table", "--filter", "gather"], 3,
         "no benchmark to draw matches --filter 'gather'"),
        (lambda d: bench_file(d / "ok.json", [median("pack/tokens:1", 1.0)]), ["--table", "--label", "a", "--label", "b"],
         2, "2 --label for 1 BENCH"),
    ],
    ids=["missing", "malformed", "report", "empty", "zero-time", "no-out", "bad-regex", "no-match", "labels"],
)
def test_bad_input(tmp_path: Path, make, args: list[str], code: int, message: str) -> None:
    result = run(make(tmp_path), *args)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert message in result.stderr


@pytest.mark.parametrize(
    "peer, message",
    [({"tool": "x"}, "no \"timing\" or \"attention_timing\""),
     ({"timing": {"results": {}}}, "\"timing.results\" is missing or not a list"),
     ({"timing": {"results": [{"name": "pack/tokens:1", "median_s": 0}]}}, "\"median_s\" is 0, not a number > 0"),
     ({"timing": {"results": [7]}}, "is not an object with a \"name\""),
     # peer_torch.py's format is not Google Benchmark's: a NaN literal in it is refused.
     ({"timing": {"results": [{"name": "pack/tokens:1", "median_s": math.nan}]}}, "non-standard literal NaN")],
    ids=["no-timing", "results-not-list", "zero-median", "not-object", "nan-literal"],
)
def test_bad_peer(tmp_path: Path, cache_bench: Path, peer: dict, message: str) -> None:
    path = tmp_path / "peer.json"
    path.write_text(json.dumps(peer))
    result = run(cache_bench, "--peer", path, "--table")
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert message in result.stderr


def test_peer_points_without_x_or_with_errors_are_left_out(tmp_path: Path, cache_bench: Path) -> None:
    peer = tmp_path / "peer.json"
    peer.write_text(json.dumps({"timing": {"results": [
        {"name": "pack/B:64/tokens:1024", "median_s": 2e-4, "pct_of_copy_bw": 0.5},
        {"name": "pack/B:64", "median_s": 2e-4, "pct_of_copy_bw": 0.7},
        {"name": "pack/B:64/tokens:big", "median_s": 2e-4, "pct_of_copy_bw": 0.8},
        {"name": "pack/B:64/tokens:4096", "op": "pack", "error": "out of memory"}]}}))
    result = run(cache_bench, "--peer", peer, "--table", "--filter", "^pack/B:64")
    assert result.returncode == 0, result.stderr
    assert [row for row in table_rows(result.stdout, "pack") if row[0].startswith("peer")] == [("peer: B:64", "1024", "0.5")]
    assert "results[1]: no numeric 'tokens' (the x axis); left out" in result.stderr
    assert "results[2]: no numeric 'tokens' (the x axis); left out" in result.stderr
    assert "1 shape(s) the peer could not run left out" in result.stderr


def test_labels_stay_apart(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = bench_file(tmp_path / "a" / "run.json", [median("pack/tokens:1", 1.0, pct_of_copy_bw=1.0)])
    two = bench_file(tmp_path / "b" / "run.json", [median("pack/tokens:1", 1.0, pct_of_copy_bw=2.0)])
    result = run(one, two, "--table")
    assert result.returncode == 0, result.stderr
    # One size each: no x axis, one bar per benchmark and input.
    assert table_rows(result.stdout, "pack") == [("a/run: tokens:1", "pack/tokens:1", "1"),
                                                 ("b/run: tokens:1", "pack/tokens:1", "2")]
    result = run(one, two, "--table", "--label", "x", "--label", "x")
    assert result.returncode == 2 and "the --label values must differ" in result.stderr
    peer = tmp_path / "peer.json"
    peer.write_text(json.dumps({"timing": {"results": [{"name": "pack/tokens:1", "median_s": 1e-6}]}}))
    result = run(one, "--label", "peer", "--peer", peer, "--table")
    assert result.returncode == 2 and "may not be a peer's label" in result.stderr


def test_figure_names_never_collide_and_write_errors_are_reported(tmp_path: Path) -> None:
    path = bench_file(tmp_path / "odd.json", [median("pack v2/tokens:1", 1.0, pct_of_copy_bw=1.0),
                                              median("pack_v2/tokens:1", 1.0, pct_of_copy_bw=2.0),
                                              median("../tokens:1", 1.0, pct_of_copy_bw=3.0)])
    out = tmp_path / "figures"
    result = run(path, "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(out / "pack_v2.png"), str(out / "pack_v2-2.png"), str(out / "__.png")]
    assert sorted(p.name for p in out.iterdir()) == ["__.png", "pack_v2-2.png", "pack_v2.png"]
    blocked = tmp_path / "blocked"
    (blocked / "pack.png").mkdir(parents=True)
    result = run(bench_file(tmp_path / "p.json", [median("pack/tokens:1", 1.0, pct_of_copy_bw=1.0)]), "--out", blocked)
    assert result.returncode == 3 and f"cannot write {blocked / 'pack.png'}" in result.stderr


def test_non_positive_x_is_drawn_on_a_linear_axis(tmp_path: Path) -> None:
    path = bench_file(tmp_path / "x.json", [median(f"pack/tokens:{t}", 1.0, pct_of_copy_bw=float(i + 1))
                                            for i, t in enumerate(("-4", "0", "4", "16"))])
    result = run(path, "--out", tmp_path / "f")
    assert result.returncode == 0, result.stderr
    result = run(path, "--table")
    assert table_rows(result.stdout, "pack") == [("pack", "-4", "1"), ("pack", "0", "2"), ("pack", "4", "3"), ("pack", "16", "4")]


def test_threads_and_repeats_are_parameters_but_timing_suffixes_are_not(tmp_path: Path) -> None:
    path = bench_file(tmp_path / "t.json", [median("pack/tokens:1/threads:1", 1.0, pct_of_copy_bw=1.0),
                                            median("pack/tokens:1/threads:2", 1.0, pct_of_copy_bw=2.0),
                                            median("pack/tokens:2/threads:1", 1.0, pct_of_copy_bw=3.0)])
    result = run(path, "--table", "--x", "tokens")
    assert result.returncode == 0, result.stderr
    assert table_rows(result.stdout, "pack") == [("threads:1", "1", "1"), ("threads:1", "2", "3"), ("threads:2", "1", "2")]
    twice = bench_file(tmp_path / "twice.json", [
        {**median("pack/tokens:1", 1.0, pct_of_copy_bw=1.0), "run_name": "pack/tokens:1/manual_time"},
        {**median("pack/tokens:1", 1.0, pct_of_copy_bw=1.0), "run_name": "pack/tokens:1/real_time"}])
    result = run(twice, "--table")
    assert result.returncode == 3 and "a second benchmark named 'pack/tokens:1'" in result.stderr


def test_table_cells_escape_pipes(tmp_path: Path) -> None:
    path = bench_file(tmp_path / "p.json", [median("pack/mode:a|b/tokens:1", 1.0, pct_of_copy_bw=1.0),
                                            median("pack/mode:a|b/tokens:2", 1.0, pct_of_copy_bw=2.0)])
    result = run(path, "--table")
    assert result.returncode == 0, result.stderr
    assert "| mode:a\\|b | 1 | 1 |" in result.stdout


@pytest.mark.parametrize(
    "entries, args, code, message",
    [
        ([median("pack/tokens:1", 1.0, pct_of_copy_bw="7")], ["--table"], 3, "\"pct_of_copy_bw\" is '7', not a finite number >= 0"),
        ([median("pack/tokens:1", 1.0, pct_of_copy_bw=None)], ["--table"], 3, "\"pct_of_copy_bw\" is None"),
        ([median("pack/tokens:1", 1.0, pct_of_copy_bw=True)], ["--table"], 3, "\"pct_of_copy_bw\" is True"),
        ([median("pack/tokens:1", 1.0, pct_of_copy_bw=-5.0)], ["--table"], 3, "\"pct_of_copy_bw\" is -5.0"),
        ([{**median("pack/tokens:1", 1.0), "time_unit": ["us"]}], ["--table"], 3, "unknown time_unit ['us']"),
        ([median("pack/tokens:1", 1.0), median("pack/tokens:1", 2.0)], ["--table"], 3, "two 'median' aggregates"),
        ([median("pack/tokens:1", 1.0)], ["--table", "--x", "nope"], 2, "--x 'nope': no operation has it"),
        ([median("pack/tokens:1", 1.0, pct_of_copy_bw=1.0)], ["--table", "--metric", "flops_per_second"], 3,
         "no benchmark has 'flops_per_second': nothing drawn"),
        ([median(f"pack/mode:m{i}", 1.0, pct_of_copy_bw=1.0) for i in range(401)], ["--out", "OUT"], 3,
         "401 bars are too many for one figure"),
        ([{**median("pack/tokens:1", 1.0), "error_occurred": True}], ["--table"], 3, "no benchmark to draw"),
    ],
    ids=["string-counter", "null-counter", "bool-counter", "negative-counter", "list-unit", "two-medians", "unknown-x",
         "absent-metric", "too-many-bars", "all-failed"],
)
def test_bad_values(tmp_path: Path, entries: list, args: list[str], code: int, message: str) -> None:
    path = bench_file(tmp_path / "b.json", entries)
    result = run(path, *[str(tmp_path / "out") if a == "OUT" else a for a in args])
    assert result.returncode == code, (result.stdout, result.stderr)
    assert message in result.stderr
