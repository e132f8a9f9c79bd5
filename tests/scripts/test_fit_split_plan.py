"""Tests of scripts/fit_split_plan.py: a subprocess on benchmark files written here from a known cost model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scipy", reason="scipy is not installed (scripts/requirements.txt)")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "fit_split_plan.py"

# The model's constants (us) the files are generated from; the fit must recover them.
TRUE = {"a": 6.0, "b": 1.5, "c": 0.02, "d": 2.5, "e": 3.0}
# The split_k sweep's shapes: (batch, heads, topk) at 2 query tokens and seq 16384, forced splits.
SHAPES = [(b, 128, 2048) for b in (1, 4, 16, 64)] + [(b, 128, k) for b in (1, 16) for k in (512, 8192)] \
    + [(b, h, 2048) for b in (1, 16) for h in (16, 64)]
FORCED = (1, 2, 4, 8, 16, 32, 64)


def run(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


def model_us(tokens: int, heads: int, topk: int, splits: int, sms: int, k: dict[str, float] = TRUE) -> float:
    """The cost model as docs/benchmarks.md states it, written out here."""
    blocks = math.ceil(topk / 64)
    hg = math.ceil(heads / 64)
    s = min(max(splits, 1), blocks)
    tiles = math.ceil(blocks / s)
    waves = math.ceil(tokens * s * hg / sms)
    t = k["a"] + waves * (k["b"] * tiles + k["d"])
    return t + (k["e"] + k["c"] * s if s > 1 else 0.0)


def plan_splits(tokens: int, heads: int, topk: int, sms: int) -> int:
    """Splits per token of a plan that fills two waves of CTAs (synthetic plan choices for the test files)."""
    hg = math.ceil(heads / 64)
    blocks = math.ceil(topk / 64)
    wanted = min(max(math.ceil(math.ceil(2 * sms / hg) / tokens), 1), blocks)
    per_item = math.ceil(blocks / wanted)
    return math.ceil(blocks / per_item)


def name(batch: int, heads: int, topk: int, splits: int = 0) -> str:
    return f"sparse_mqa/batch:{batch}/q:2/H:{heads}/K:{topk}/seq:16384" + (f"/splits:{splits}" if splits else "")


def entries(bench: str, time_us: float, per_token: int, tokens: int, forced: bool) -> list[dict]:
    """A benchmark's aggregates as mla-bench writes them with repetitions; the mean is off on purpose
    (the median is the time to read)."""
    how = "forced" if forced else "the plan's choice"
    label = (f"FLOP=2*H*K*1088/token; bytes=656*1000 distinct entries (0.500 of T*K) + (1152+1028)*H/token; "
             f"{tokens * per_token} work items ({per_token} per token, {how})")
    rows = []
    for aggregate, value in (("mean", time_us * 1.5), ("median", time_us), ("stddev", 0.1), ("cv", 0.01)):
        rows.append({"name": f"{bench}/manual_time_{aggregate}", "run_name": f"{bench}/manual_time",
                     "run_type": "aggregate", "repetitions": 3, "aggregate_name": aggregate,
                     "aggregate_unit": "percentage" if aggregate == "cv" else "time", "iterations": 3,
                     "real_time": value, "cpu_time": value, "time_unit": "us", "label": label})
    return rows


def forced_counts(topk: int) -> list[int]:
    """The forced splits the sweep times: 64 only in its K 512 / 8192 group; mla-bench names a count
    above the top-k's column blocks as that many and times it once."""
    blocks = math.ceil(topk / 64)
    return sorted({min(n, blocks) for n in FORCED if n < 64 or topk in (512, 8192)})


def sweep_entries(sms: int, shapes=SHAPES, plan: dict[tuple[int, int, int], int] | None = None) -> list[dict]:
    """Every shape at the plan's choice (plan_splits, or `plan`'s override) and forced splits, timed by the model."""
    out = []
    for batch, heads, topk in shapes:
        tokens = batch * 2
        chosen = (plan or {}).get((batch, heads, topk), plan_splits(tokens, heads, topk, sms))
        out += entries(name(batch, heads, topk), model_us(tokens, heads, topk, chosen, sms), chosen, tokens, False)
        for ran in forced_counts(topk):
            out += entries(name(batch, heads, topk, ran), model_us(tokens, heads, topk, ran, sms), ran, tokens, True)
    return out


def bench_file(path: Path, rows: list[dict], context: dict | None = None) -> Path:
    path.write_text(json.dumps({"context": {"executable": "mla-bench", **(context or {})}, "benchmarks": rows}))
    return path


def fitted(path: Path, *args: Any) -> dict:
    r = run(path, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def assert_recovered(model: dict) -> None:
    for key, value in TRUE.items():
        assert model[f"{key}_us"] == pytest.approx(value, rel=1e-6), key
    assert model["rms_relative"] < 1e-9
    assert model["rank"] == 5


def test_fit_recovers_the_constants_the_times_were_made_with(tmp_path):
    result = fitted(bench_file(tmp_path / "b.json", sweep_entries(132)))
    model = result["model"]
    assert_recovered(model)
    assert (model["multiprocessors"], model["multiprocessors_source"]) == (132, "default")
    # Each shape's plan entry and its forced counts: 8 shapes at K 2048 (1..32), 2 at K 512 (1..8), 2 at K 8192 (1..64).
    assert model["points"] == 8 * (1 + 6) + 2 * (1 + 4) + 2 * (1 + 7)
    assert len(result["shapes"]) == len(SHAPES)
    for shape in result["shapes"]:
        tokens, heads, topk = shape["tokens"], shape["heads"], shape["topk"]
        blocks = math.ceil(topk / 64)
        predicted = [model_us(tokens, heads, topk, s, 132) for s in range(1, blocks + 1)]
        pick = 1 + predicted.index(min(predicted))
        assert shape["model_splits"] == pick, shape["name"]
        assert shape["model_us"] == pytest.approx(predicted[pick - 1], rel=1e-9)
        assert shape["plan_splits"] == plan_splits(tokens, heads, topk, 132)
        forced = {n: model_us(tokens, heads, topk, n, 132) for n in forced_counts(topk)}
        assert shape["best_us"] == pytest.approx(min(forced.values()), rel=1e-12)


def test_a_plan_slower_than_a_forced_split_shows_a_ratio_above_1(tmp_path):
    # batch 16 x 2 tokens, H 128, K 2048 on 132 SMs: the plan runs 5 splits per token (tiles of 7
    # column blocks, 320 CTAs: 3 waves): 6 + 3*(1.5*7 + 2.5) + 3 + 0.02*5 = 48.1 us. Forcing 2
    # (tiles of 16, 128 CTAs: 1 wave): 6 + (1.5*16 + 2.5) + 3 + 0.02*2 = 35.54 us, the fastest forced
    # count and the model's pick (3 would make 192 CTAs, 2 waves: 6 + 2*(1.5*11 + 2.5) + 3 + 0.06 = 47.06).
    r = run(bench_file(tmp_path / "b.json", sweep_entries(132)))
    assert r.returncode == 0, r.stderr
    rows = {cells[0]: cells[1:] for cells in table_rows(r.stdout)}
    assert rows[name(16, 128, 2048)] == ["32", "128", "2048", "5", "48.1", "2", "35.54", "1.353", "2", "35.54", "35.54"]
    # batch 1: the plan's 32 splits per token (128 CTAs, one wave of one column block each:
    # 6 + 4 + 3 + 0.64) is also the fastest forced count (ratio 1).
    assert rows[name(1, 128, 2048)][3:9] == ["32", "13.64", "32", "13.64", "1.000", "32"]
    assert "| a | 6 | per launch |" in r.stdout
    assert "multiprocessors: 132, default" in r.stdout

    result = fitted(tmp_path / "b.json")
    shape = next(s for s in result["shapes"] if s["name"] == name(16, 128, 2048))
    assert shape["plan_over_best"] == pytest.approx(48.1 / 35.54, rel=1e-12)
    assert (shape["best_forced"], shape["best_splits"]) == (2, 2)


def test_a_plan_choice_given_in_the_label_is_used_for_its_point(tmp_path):
    # The plan's entry of batch 1 ran 4 splits per token (its label): timed and fitted at s = 4.
    path = bench_file(tmp_path / "b.json", sweep_entries(132, plan={(1, 128, 2048): 4}))
    result = fitted(path)
    assert_recovered(result["model"])
    shape = next(s for s in result["shapes"] if s["name"] == name(1, 128, 2048))
    assert shape["plan_splits"] == 4
    assert shape["plan_us"] == pytest.approx(model_us(2, 128, 2048, 4, 132), rel=1e-12)
    assert shape["plan_over_best"] > 1.0


def table_rows(stdout: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in stdout.splitlines()
            if line.startswith("| sparse_mqa/")]


@pytest.mark.parametrize("context, args, sms, source", [
    ({"mla_backend_multiprocessors": "114"}, [], 114, "context mla_backend_multiprocessors"),
    ({"mla_device": "NVIDIA H100 PCIe (sm_90, 114 SMs, L2 50 MiB)"}, [], 114, "context mla_device"),
    ({"mla_backend_multiprocessors": "132"}, ["--multiprocessors", "78"], 78, "--multiprocessors"),
])
def test_multiprocessors_come_from_the_option_then_the_context(tmp_path, context, args, sms, source):
    result = fitted(bench_file(tmp_path / "b.json", sweep_entries(sms), context), *args)
    assert (result["model"]["multiprocessors"], result["model"]["multiprocessors_source"]) == (sms, source)
    assert_recovered(result["model"])


def test_a_wrong_multiprocessor_count_does_not_fit_exactly(tmp_path):
    result = fitted(bench_file(tmp_path / "b.json", sweep_entries(132)), "--multiprocessors", "100")
    assert result["model"]["rms_relative"] > 1e-3


def test_failed_benchmarks_are_left_out_with_a_note(tmp_path):
    rows = sweep_entries(132)
    rows.append({"name": name(1, 128, 2048, 3) + "/manual_time", "run_name": name(1, 128, 2048, 3) + "/manual_time",
                 "run_type": "iteration", "error_occurred": True, "error_message": "does not fit"})
    rows.append({"name": "pack/B:64/tokens:1024/manual_time_median", "run_name": "pack/B:64/tokens:1024/manual_time",
                 "run_type": "aggregate", "aggregate_name": "median", "real_time": 1.0, "time_unit": "us"})
    r = run(bench_file(tmp_path / "b.json", rows), "--json")
    assert r.returncode == 0, r.stderr
    assert "1 failed sparse_mqa benchmark(s) left out" in r.stderr
    assert_recovered(json.loads(r.stdout)["model"])


def with_late_queue_calls(rows: list[dict]) -> list[dict]:
    """The rows as mla-bench writes them on a GPU: late_queue_calls 0 in every repetition, so its
    mean, median and stddev aggregates are 0 and its cv (0 / 0) is NaN."""
    return [{**row, "late_queue_calls": math.nan if row["aggregate_name"] == "cv" else 0.0} for row in rows]


def test_a_google_benchmark_nan_in_a_cv_counter_is_read_and_the_times_fitted(tmp_path):
    path = bench_file(tmp_path / "b.json", with_late_queue_calls(sweep_entries(132)))
    assert '"late_queue_calls": NaN' in path.read_text()  # the literal, as Google Benchmark writes it
    r = run(path)
    assert r.returncode == 0, r.stderr
    rows = {cells[0]: cells[1:] for cells in table_rows(r.stdout)}
    # Batch 16 x 2, H 128, K 2048 on 132 SMs: the plan's 5 splits 6 + 3*(1.5*7 + 2.5) + 3 + 0.02*5
    # = 48.1 us; 2 forced splits 6 + (1.5*16 + 2.5) + 3 + 0.02*2 = 35.54 us; 48.1 / 35.54 = 1.353.
    assert rows[name(16, 128, 2048)] == ["32", "128", "2048", "5", "48.1", "2", "35.54", "1.353", "2", "35.54", "35.54"]
    assert "nan" not in r.stdout.lower()
    assert_recovered(fitted(path)["model"])


@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
def test_a_non_finite_median_time_names_the_file_and_the_entry(tmp_path, literal):
    rows = with_late_queue_calls(few_entries())
    index = next(i for i, row in enumerate(rows) if row["aggregate_name"] == "median" and "/splits:1/" in row["name"])
    rows[index]["real_time"] = float(literal)
    path = bench_file(tmp_path / "bench.json", rows)
    r = run(path)
    assert r.returncode == 2, r.stdout
    assert (f"benchmark file {path}: at /benchmarks/{index} ('{name(1, 128, 2048, 1)}/manual_time_median'): "
            f"\"real_time\" is {literal}, not a finite number") in r.stderr
    assert r.stdout == ""


def few_entries() -> list[dict]:
    return entries(name(1, 128, 2048), 15.0, 32, 2, False) + entries(name(1, 128, 2048, 1), 70.0, 1, 2, True)


def relabel(rows: list[dict], label: str) -> list[dict]:
    return [{**row, "label": label} for row in rows]


@pytest.mark.parametrize("write, problem", [
    (None, "benchmark file not found"),
    (lambda p: p.write_text("{not json"), "is not valid JSON"),
    (lambda p: p.write_text(json.dumps({"schema": "mla-harness.report/1", "scenarios": []})),
     "is not a Google Benchmark output"),
    (lambda p: bench_file(p, entries("dense_mha/H:16/reqs:1/tokens:256", 5.0, 1, 1, False)),
     "has no timed sparse_mqa/... benchmarks"),
    (lambda p: bench_file(p, few_entries()), "2 timed sparse_mqa entries; fitting the model's 5 constants"),
    (lambda p: bench_file(p, relabel(entries(name(1, 128, 2048, 4), 20.0, 4, 2, True), "8 work items")),
     "does not say how many work items per token ran"),
    (lambda p: bench_file(p, entries(name(1, 128, 2048), 20.0, 4, 2, True)),
     "the label says 'forced' but the name has no /splits"),
    (lambda p: bench_file(p, entries(name(1, 128, 512, 16), 20.0, 16, 2, True)),
     "the label's 16 per token is outside 1..8"),
    (lambda p: bench_file(p, entries(name(1, 128, 2048, 4), 20.0, 4, 2, True)
                          + [{**row, "run_name": row["run_name"].replace("manual_time", "real_time")}
                             for row in entries(name(1, 128, 2048, 4), 21.0, 4, 2, True)]),
     "a second benchmark of this shape and split count"),
])
def test_bad_input_names_the_file_and_exits_2(tmp_path, write, problem):
    path = tmp_path / "bench.json"
    if write is not None:
        write(path)
    r = run(path)
    assert r.returncode == 2, r.stdout
    assert problem in r.stderr
    assert str(path) in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("args, problem", [
    (["--multiprocessors", "0"], "0 is not at least 1"),
    (["--multiprocessors", "many"], "'many' is not an integer"),
    ([], "the following arguments are required: bench"),
])
def test_bad_usage_exits_2(args, problem):
    r = run(*args)
    assert r.returncode == 2
    assert problem in r.stderr
