"""Tests of scripts/peer_timing.py: it times mla-bench's own shapes (its --list-shapes export, not a
re-parse of the sweep), by mla-bench's protocol and with mla-bench's lead and read flush, and
writes Google Benchmark JSON under mla-bench's names, which scripts/compare_reports.py and
scripts/plot_sweep.py read as they read mla-bench's output.

The peer is loaded with a stand-in `torch` where PyTorch is not installed (tests/scripts/conftest.py);
the tests of the PyTorch routes themselves run where it is.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def listed(bench, sweep) -> list[str]:
    """The run names mla-bench registers for a sweep (every shape: --no-host-caps), in order."""
    r = bench("--sweep", sweep, "--no-host-caps", "--benchmark_list_tests=true")
    return r.stdout.split()


# ---------------------------------------------------------------------------------------------
# The shapes: mla-bench's export


@pytest.mark.parametrize("sweep", ["quick", "attention", "cache_path"])
def test_the_shapes_are_mla_benchs(peer_timing, mla_bench, bench, sweep):
    export, where = peer_timing.load_shapes(None, sweep, mla_bench)
    assert "--list-shapes --json --sweep " + sweep in where
    assert [s["run_name"] for s in export["shapes"]] == listed(bench, sweep)
    assert [s["run_name"] for s in export["shapes"]] == [s["name"] + "/manual_time" for s in export["shapes"]]
    shipped = json.loads((ROOT / "scenarios" / "sweeps" / f"{sweep}.json").read_text())
    assert peer_timing.sweep_protocol(export["sweep"], where) == (shipped["repetitions"], shipped["min_time_s"])
    assert export["sweep"]["seed"] == shipped["seed"]


def test_a_saved_export_is_read_without_mla_bench(peer_timing, mla_bench, tmp_path):
    saved = tmp_path / "shapes.json"
    saved.write_text(subprocess.run([mla_bench, "--list-shapes", "--json", "--sweep", "quick"], capture_output=True,
                                    text=True, check=True).stdout)
    export, where = peer_timing.load_shapes(saved, "ignored", tmp_path / "no-such-binary")
    assert where == str(saved)
    assert export["schema"] == "mla-bench.shapes/1" and export["sweep"]["name"] == "quick"


def test_a_sweep_mla_bench_refuses_is_reported_with_its_message(peer_timing, mla_bench, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1, "name": "t", "pack": {"tokens": [0]}}')
    with pytest.raises(peer_timing.PeerError, match=r"failed \(exit 2\): .*at /pack/tokens/0: value 0 is outside"):
        peer_timing.load_shapes(None, str(bad), mla_bench)


def test_a_missing_binary_is_named(peer_timing, tmp_path):
    with pytest.raises(peer_timing.PeerError, match="cannot run .*no-such-binary.*--mla-bench or MLA_BENCH_BIN"):
        peer_timing.load_shapes(None, "quick", tmp_path / "no-such-binary")


def test_the_binary_comes_from_the_flag_the_environment_or_the_build(peer_timing, monkeypatch):
    monkeypatch.setenv("MLA_BENCH_BIN", "/x/from-env")
    assert peer_timing.mla_bench_binary("/y/given") == Path("/y/given")
    assert peer_timing.mla_bench_binary(None) == Path("/x/from-env")
    monkeypatch.delenv("MLA_BENCH_BIN")
    assert peer_timing.mla_bench_binary(None) == ROOT / "build" / "bin" / "mla-bench"


@pytest.mark.parametrize("doc, problem", [
    ([], "not a JSON object"),
    ({"schema": "mla-bench.shapes/2", "sweep": {}, "shapes": []}, "\"schema\" is 'mla-bench.shapes/2'"),
    ({"schema": "mla-bench.shapes/1", "shapes": []}, "\"sweep\" is missing"),
    ({"schema": "mla-bench.shapes/1", "sweep": {}, "shapes": {}}, "\"shapes\" is missing or not a list"),
    ({"schema": "mla-bench.shapes/1", "sweep": {}, "shapes": [1]}, r"shapes\[0\] is not an object"),
    ({"schema": "mla-bench.shapes/1", "sweep": {}, "shapes": [{"name": "a", "run_name": "a/manual_time", "op": "pack"}]},
     r"shapes\[0\].params is missing"),
])
def test_what_is_not_an_export_is_refused(peer_timing, tmp_path, doc, problem):
    saved = tmp_path / "shapes.json"
    saved.write_text(json.dumps(doc))
    with pytest.raises(peer_timing.PeerError, match=problem):
        peer_timing.load_shapes(saved, "quick", None)


# ---------------------------------------------------------------------------------------------
# The protocol


def test_each_operation_gets_its_default_protocol(peer_timing):
    for op in ("pack", "gather", "convert"):
        assert peer_timing.shape_protocol(op, None, (5, 0.05)) == ("calls", 30)   # the cache path: 30 calls
    for op in ("sparse_mqa", "dense_mha"):
        assert peer_timing.shape_protocol(op, None, (5, 0.05)) == ("sweep", 5, 0.05)   # mla-bench's
        assert peer_timing.shape_protocol(op, 25, None) == ("calls", 25)
    assert peer_timing.shape_protocol("pack", 40, None) == ("calls", 40)


def test_the_protocol_values_are_checked(peer_timing):
    good = {"repetitions": 5, "min_time_s": 0.05}
    assert peer_timing.sweep_protocol(good, "s.json") == (5, 0.05)
    assert peer_timing.sweep_protocol({}, "s.json") == (5, 0.05)              # mla-bench's defaults
    assert peer_timing.sweep_protocol(good, "s.json", 3, 0.2) == (3, 0.2)     # the command line wins
    for bad, field in [({"repetitions": 0}, "repetitions"), ({"repetitions": 2.5}, "repetitions"),
                       ({"repetitions": True}, "repetitions"), ({"min_time_s": 0}, "min_time_s"),
                       ({"min_time_s": float("inf")}, "min_time_s"), ({"min_time_s": float("nan")}, "min_time_s"),
                       ({"min_time_s": "0.05"}, "min_time_s"), ({"min_time_s": 61}, "min_time_s")]:
        with pytest.raises(ValueError, match=f"s.json: {field}"):
            peer_timing.sweep_protocol(bad, "s.json")
    with pytest.raises(ValueError, match="--min-time"):
        peer_timing.sweep_protocol(good, "s.json", None, -1.0)


def test_the_arguments(peer_timing):
    args = peer_timing.parse_args([])
    assert (args.sweep, args.shapes, args.iters, args.device, args.lead_cycles) == ("cache_path", None, None, "auto", None)
    assert peer_timing.parse_args(["--iters", "25"]).iters == 25
    args = peer_timing.parse_args(["--repetitions", "3", "--min-time", "0.2"])
    assert (args.repetitions, args.min_time) == (3, 0.2)
    assert peer_timing.parse_args(["--lead-cycles", "0"]).lead_cycles == 0
    for bad in (["--iters", "5"], ["--iters", "30", "--repetitions", "3"], ["--sweep", "quick", "--shapes", "s.json"],
                ["--lead-cycles", "-1"], ["--lead-cycles", str((1 << 32) + 1)], ["--lead-cycles", "1.5"],
                ["--filter", "("], ["--device", "tpu"]):
        with pytest.raises(SystemExit):
            peer_timing.parse_args(bad)


def fake_batches(monkeypatch, peer_timing, per_call):
    """Replaces time_fn by one whose calls take per_call[k] seconds in its k-th batch; records
    (calls, warm-ups) per batch."""
    batches = []

    def fake_time_fn(fn, flush, iters, warmup, device):
        seconds = per_call[len(batches)]
        batches.append((iters, warmup))
        return [seconds] * iters

    monkeypatch.setattr(peer_timing, "time_fn", fake_time_fn)
    return batches


def test_the_first_repetition_searches_the_call_count_as_google_benchmark_does(peer_timing, monkeypatch):
    # min_time 0.5 s (times exact in binary). Batch 1: 1 call of 2^-10 s, under a tenth of 0.5:
    # 10x. Batch 2: 10 calls of 2^-5 s = 0.3125, over a tenth: 1.4 * 0.5 / 0.3125 = 2.24x ->
    # 22 calls. Batch 3: 22 calls of 2^-5 s = 0.6875 >= 0.5: the first repetition. The other two
    # repeat 22 calls.
    batches = fake_batches(monkeypatch, peer_timing, [2 ** -10, 2 ** -5, 2 ** -5, 2 ** -6, 2 ** -4])
    means, per_repetition, calls = peer_timing.time_like_sweep(None, None, 3, 0.5, 4, None)
    assert batches == [(1, 4), (10, 0), (22, 0), (22, 0), (22, 0)]   # warm-up once, before the first
    assert per_repetition == 22
    assert calls == 1 + 10 + 3 * 22
    assert means == [2 ** -5, 2 ** -6, 2 ** -4]


def test_a_batch_that_reaches_min_time_exactly_is_the_repetition(peer_timing, monkeypatch):
    batches = fake_batches(monkeypatch, peer_timing, [0.5, 0.25])
    means, per_repetition, calls = peer_timing.time_like_sweep(None, None, 2, 0.5, 0, None)
    assert batches == [(1, 0), (1, 0)]
    assert (means, per_repetition, calls) == ([0.5, 0.25], 1, 2)


def test_the_call_count_grows_by_at_least_one(peer_timing, monkeypatch):
    # 0.25 s of 0.3: 1.4 * 0.3 / 0.25 = 1.68x of 1 call rounds to 2; a batch just short of the
    # minimum time with 2 calls (0.14 s each) grows by 1.4 * 0.3 / 0.28 = 1.5x -> 3.
    batches = fake_batches(monkeypatch, peer_timing, [0.25, 0.14, 0.11])
    _, per_repetition, _ = peer_timing.time_like_sweep(None, None, 1, 0.3, 0, None)
    assert [n for n, _ in batches] == [1, 2, 3]
    assert per_repetition == 3


def test_a_fixed_count_is_that_many_repetitions_of_one_call(peer_timing, monkeypatch):
    batches = fake_batches(monkeypatch, peer_timing, [0.125])
    assert peer_timing.time_shape(None, None, ("calls", 20), 3, None) == ([0.125] * 20, 1, 20)
    assert batches == [(20, 3)]


# ---------------------------------------------------------------------------------------------
# The flush and the lead


class RecordingTensor:
    """Records the calls read_flush makes on a tensor (the stand-in torch has no tensors)."""

    def __init__(self, calls, dtype):
        self.calls, self.dtype = calls, dtype

    def view(self, dtype):
        self.calls.append(("view", self.dtype, dtype))
        return RecordingTensor(self.calls, dtype)

    def sum(self, *args, **kwargs):
        self.calls.append(("sum", self.dtype, args, kwargs))
        return 0


def test_the_flush_sums_in_the_buffers_own_type(peer_timing):
    # A sum whose accumulator type is not the input's converts the whole input first (a written
    # temporary 8x the buffer): the flush must sum the buffer viewed as int64, with no dtype.
    calls = []
    peer_timing.read_flush(RecordingTensor(calls, "uint8"))
    assert calls == [("view", "uint8", peer_timing.torch.int64), ("sum", peer_timing.torch.int64, (), {})]


def test_the_flush_reads_the_buffer_without_a_converted_copy(peer_timing):
    torch = pytest.importorskip("torch")
    flush = peer_timing.flush_buffer(3 << 20, torch.device("cpu"))   # 6 MiB < 64 MiB: 64 MiB
    assert flush.numel() == 64 << 20 and flush.numel() % 8 == 0
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        total = peer_timing.read_flush(flush)
    ops = {e.name for e in prof.events()}
    assert not ops & {"aten::to", "aten::_to_copy"}, ops   # what a sum with another dtype runs
    # Bytes each op allocated itself (a net figure per event would hide a temporary freed inside).
    allocated = sum(max(e.self_cpu_memory_usage, 0) for e in prof.events())
    assert allocated < 1024, allocated   # the result, not a copy of the buffer
    # Every int64 word is 0x5A5A5A5A5A5A5A5A; the sum wraps modulo 2^64 (two's complement).
    expected = ((64 << 20) // 8 * 0x5A5A5A5A5A5A5A5A) % (1 << 64)
    assert int(total) == (expected - (1 << 64) if expected >= 1 << 63 else expected)


def fake_torch(calls, sleep=True, reached=()):
    """torch as time_cuda and ColdStart use it (cuda.Event, cuda.synchronize, cuda._sleep unless
    sleep is False), recording the calls in order. An event's query() answers True on the calls
    (counted from 0) that `reached` lists, else False."""
    queries = []

    class Event:
        def __init__(self, enable_timing):
            self.name = "stop" if any(c[0] == "Event" for c in calls) else "start"
            calls.append(("Event", self.name))

        def record(self):
            calls.append(("record", self.name))

        def query(self):
            calls.append(("query", self.name))
            queries.append(self.name)
            return len(queries) - 1 in reached

        def synchronize(self):
            calls.append(("synchronize", self.name))

        def elapsed_time(self, other):
            calls.append(("elapsed", self.name, other.name))
            return 2.0   # ms

    cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: calls.append(("device synchronize",)))
    if sleep:
        cuda._sleep = lambda cycles: calls.append(("sleep", cycles))
    return types.SimpleNamespace(cuda=cuda, int64="int64", __version__="fake")


def test_each_timed_call_runs_after_the_lead_and_the_flush(peer_timing, monkeypatch):
    calls = []
    monkeypatch.setattr(peer_timing, "torch", fake_torch(calls))
    flush = peer_timing.ColdStart(RecordingTensor(calls, "uint8"), 12345)
    times = peer_timing.time_cuda(lambda: calls.append(("fn",)), flush, 2, 1)
    assert times == [2e-3, 2e-3]
    one = [("sleep", 12345), ("view", "uint8", "int64"), ("sum", "int64", (), {}), ("record", "start"), ("fn",),
           ("record", "stop"), ("query", "start"), ("synchronize", "stop"), ("elapsed", "start", "stop")]
    assert calls == [("fn",), ("device synchronize",), ("Event", "start"), ("Event", "stop")] + one + one


def test_a_call_whose_timed_region_began_before_it_was_queued_is_counted(peer_timing, monkeypatch):
    # The start event is asked after the call and its stop event are queued: reached by then, the
    # GPU waited for Python's launches inside the timed region.
    calls = []
    monkeypatch.setattr(peer_timing, "torch", fake_torch(calls, reached=(1, 3)))
    flush = peer_timing.ColdStart(RecordingTensor(calls, "uint8"), 7)
    peer_timing.time_cuda(lambda: None, flush, 3, 0)
    assert flush.take_counts() == (3, 1)
    assert flush.take_counts() == (0, 0)   # taken: they start again
    peer_timing.time_cuda(lambda: None, flush, 2, 2)   # warm-up calls are not timed, nor counted
    assert flush.take_counts() == (2, 1)


def test_a_shape_counts_only_its_own_late_calls(peer_timing, monkeypatch):
    calls = []
    monkeypatch.setattr(peer_timing, "torch", fake_torch(calls, reached=(0, 1, 3)))
    flush = peer_timing.ColdStart(RecordingTensor(calls, "uint8"), 7)
    peer_timing.time_cuda(lambda: None, flush, 2, 0)   # a shape that failed part-way: both late, never taken

    def timing():
        peer_timing.time_cuda(lambda: None, flush, 2, 0)   # the search and the repetitions add up
        peer_timing.time_cuda(lambda: None, flush, 3, 0)
        return "times"
    assert peer_timing.counting_late_calls(flush, timing) == ("times", (5, 1))
    assert peer_timing.counting_late_calls(None, lambda: "cpu") == ("cpu", None)   # no flush: nothing counted


def test_the_late_queue_note_names_the_count_and_the_remedy(peer_timing):
    assert peer_timing.late_queue_note(None) is None and peer_timing.late_queue_note((50, 0)) is None
    note = peer_timing.late_queue_note((50, 3))
    assert "in 3 of 50 timed calls" in note and "--lead-cycles" in note


def test_no_lead_and_no_flush(peer_timing, monkeypatch):
    calls = []
    monkeypatch.setattr(peer_timing, "torch", fake_torch(calls))
    peer_timing.ColdStart(RecordingTensor(calls, "uint8"), 0)()
    assert calls == [("view", "uint8", "int64"), ("sum", "int64", (), {})]   # no sleep
    calls.clear()
    peer_timing.time_cuda(lambda: calls.append(("fn",)), None, 1, 0)
    assert not [c for c in calls if c[0] in ("sleep", "view", "sum")]


def test_a_lead_without_torch_cuda_sleep_is_refused(peer_timing, monkeypatch):
    calls = []
    monkeypatch.setattr(peer_timing, "torch", fake_torch(calls, sleep=False))
    with pytest.raises(peer_timing.PeerError, match="no torch.cuda._sleep"):
        peer_timing.ColdStart(RecordingTensor(calls, "uint8"), 1)
    peer_timing.ColdStart(RecordingTensor(calls, "uint8"), 0)   # no lead: nothing needed


def test_the_default_lead_is_mla_benchs(peer_timing):
    # The context key the peer reads is the one mla-bench writes.
    assert 'AddCustomContext("mla_lead_cycles"' in (ROOT / "apps" / "mla_bench" / "main.cpp").read_text()
    header = (ROOT / "apps" / "mla_bench" / "l2_flush.h").read_text()
    default = re.search(r"kDefaultLeadCycles = (\d+);", header)
    maximum = re.search(r"kMaxLeadCycles = int64_t\{1\} << (\d+);", header)
    assert default and maximum
    assert peer_timing.LEAD_CYCLES == int(default.group(1))
    assert peer_timing.MAX_LEAD_CYCLES == 1 << int(maximum.group(1))


def ours_json(tmp_path, context):
    path = tmp_path / "ours.json"
    path.write_text(json.dumps({"context": context, "benchmarks": []}))
    return path


def test_the_lead_comes_from_ours_unless_given(peer_timing, tmp_path):
    ours = ours_json(tmp_path, {"mla_lead_cycles": "300000"})
    assert peer_timing.resolve_lead(None, ours) == (300000, None)
    lead, note = peer_timing.resolve_lead(0, ours)
    assert lead == 0 and "--lead-cycles 0" in note and "ran with 300000" in note
    assert peer_timing.resolve_lead(300000, ours) == (300000, None)
    assert peer_timing.resolve_lead(None, None) == (peer_timing.LEAD_CYCLES, None)
    assert peer_timing.resolve_lead(7, None) == (7, None)
    old = ours_json(tmp_path, {})
    lead, note = peer_timing.resolve_lead(None, old)
    assert lead == peer_timing.LEAD_CYCLES and "names no lead" in note


@pytest.mark.parametrize("value, problem", [("x", "not a whole number"), ("-1", "outside"),
                                            (str((1 << 32) + 1), "outside"), (200000.9, "not a whole number"),
                                            (True, "not a whole number"), ("2e5", "not a whole number"),
                                            ([1], "not a whole number")])
def test_a_bad_lead_in_ours_is_named(peer_timing, tmp_path, value, problem):
    ours = ours_json(tmp_path, {"mla_lead_cycles": value})
    with pytest.raises(ValueError, match=f"ours.json: context/mla_lead_cycles: .*{problem}"):
        peer_timing.resolve_lead(None, ours)
    assert peer_timing.resolve_lead(None, ours_json(tmp_path, {"mla_lead_cycles": 123})) == (123, None)


@pytest.mark.parametrize("context", [None, [1, 2], "x"])
def test_ours_without_a_context_object_is_named(peer_timing, tmp_path, context):
    with pytest.raises(ValueError, match="ours.json: context: not an object"):
        peer_timing.resolve_lead(None, ours_json(tmp_path, context))


def test_a_bad_lead_in_ours_stops_the_run_before_any_timing(peer_timing, tmp_path, capsys):
    ours = ours_json(tmp_path, {"mla_lead_cycles": "-5"})
    assert peer_timing.main(["--sweep", "attention", "--ours", str(ours)]) == 2
    assert "context/mla_lead_cycles: -5 is outside" in capsys.readouterr().err


def ours_rows(name: str, median_us: float, iterations_us: list[float] | None = None) -> list[dict]:
    """One benchmark as mla-bench writes it with repetitions on a GPU: late_queue_calls 0 in every
    repetition, so its cv aggregate (0 / 0) is NaN. Mean and stddev are off on purpose."""
    common = {"run_name": f"{name}/manual_time", "time_unit": "us"}
    rows = [{**common, "name": f"{name}/manual_time", "run_type": "iteration", "real_time": t, "late_queue_calls": 0.0}
            for t in iterations_us or []]
    for aggregate, value, late in (("mean", 99.0, 0.0), ("median", median_us, 0.0), ("stddev", 0.1, 0.0),
                                   ("cv", 0.01, math.nan)):
        rows.append({**common, "name": f"{name}/manual_time_{aggregate}", "run_type": "aggregate",
                     "aggregate_name": aggregate, "real_time": value, "late_queue_calls": late})
    return rows


def test_ours_with_a_google_benchmark_nan_in_a_cv_counter_gives_the_median_times(peer_timing, tmp_path):
    path = tmp_path / "ours.json"
    path.write_text(json.dumps({"context": {}, "benchmarks": ours_rows("sparse_mqa/batch:1", 40.0, [39.0, 41.0, 45.0])
                                + ours_rows("dense_mha/H:16", 250.0)}))
    assert '"late_queue_calls": NaN' in path.read_text()  # the literal, as Google Benchmark writes it
    # The median aggregates (40 us, 250 us) in seconds, not the mean of the iterations or the mean aggregate.
    ours = peer_timing.load_ours(path)
    assert ours == {"sparse_mqa/batch:1": pytest.approx(40e-6, rel=1e-12),
                    "dense_mha/H:16": pytest.approx(250e-6, rel=1e-12)}


@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
def test_a_non_finite_time_in_ours_names_the_file_and_the_entry(peer_timing, tmp_path, literal):
    rows = ours_rows("sparse_mqa/batch:1", 40.0) + ours_rows("dense_mha/H:16", 250.0)
    index = next(i for i, row in enumerate(rows) if row["name"] == "dense_mha/H:16/manual_time_median")
    rows[index]["real_time"] = float(literal)
    path = tmp_path / "ours.json"
    path.write_text(json.dumps({"context": {}, "benchmarks": rows}))
    with pytest.raises(ValueError) as error:
        peer_timing.load_ours(path)
    assert str(error.value) == (f"--ours file {path}: at /benchmarks/{index} ('dense_mha/H:16/manual_time_median'): "
                                f"\"real_time\" is {literal}, not a finite number")


# ---------------------------------------------------------------------------------------------
# The output: Google Benchmark's JSON format


DENSE = {"name": "dense_mha/H:2/reqs:1/tokens:8", "run_name": "dense_mha/H:2/reqs:1/tokens:8/manual_time",
         "op": "dense_mha", "params": {}, "items": 8, "bytes": 4000, "flops": 64000}


def test_the_counters_are_mla_benchs_on_the_exported_models(peer_timing):
    # 4000 bytes, 64000 FLOPs and 8 items in 2 ms, against 1e6 B/s copy and 1e8 FLOP/s GEMM rates.
    c = peer_timing.shape_counters(DENSE, 2e-3, {"copy": 1e6, "gemm": 1e8}, {"late_queue_calls": 1})
    assert c == pytest.approx({
        "bytes_per_second": 2e6, "items_per_second": 4e3, "pct_of_copy_bw": 200.0, "flops_per_second": 3.2e7,
        "flop_per_byte": 16.0, "pct_of_gemm_rate": 32.0, "pct_of_roofline": 200.0,   # max(0.64 ms, 4 ms) / 2 ms
        "late_queue_calls": 1}, rel=1e-12)
    cache = {**DENSE, "op": "pack", "flops": 0}
    assert set(peer_timing.shape_counters(cache, 2e-3, {"copy": 1e6, "gemm": None}, {})) == {
        "bytes_per_second", "items_per_second", "pct_of_copy_bw"}


def test_repetitions_become_iteration_rows_and_aggregates(peer_timing):
    rows = peer_timing.benchmark_rows(DENSE, 4, [1e-3, 2e-3, 4e-3], 7, lambda t: {"bytes_per_second": 4000 / t},
                                      "peer: x", {"mask": "none"})
    assert [(r["name"], r["run_type"], r.get("aggregate_name")) for r in rows] == [
        (DENSE["run_name"], "iteration", None)] * 3 + [
        (DENSE["run_name"] + "_" + a, "aggregate", a) for a in ("mean", "median", "stddev", "cv")]
    for index, row in enumerate(rows[:3]):
        assert (row["run_name"], row["repetition_index"], row["repetitions"], row["iterations"], row["time_unit"]) == (
            DENSE["run_name"], index, 3, 7, "us")
        assert row["family_index"] == 4 and row["label"] == "peer: x" and row["mask"] == "none"
    assert [r["real_time"] for r in rows[:3]] == pytest.approx([1000.0, 2000.0, 4000.0])
    mean, median, stddev, cv = rows[3:]
    # Times 1000, 2000, 4000 us: mean 7000 / 3, median 2000, sample stddev sqrt(7 / 3) * 1000.
    assert mean["real_time"] == pytest.approx(7000 / 3) and median["real_time"] == pytest.approx(2000)
    assert stddev["real_time"] == pytest.approx(math.sqrt(7 / 3) * 1000)
    assert cv["real_time"] == pytest.approx(math.sqrt(7 / 3) * 1000 / (7000 / 3)) and cv["aggregate_unit"] == "percentage"
    # Rates 4e6, 2e6, 1e6 B/s: the counters aggregate as Google Benchmark's do.
    assert median["bytes_per_second"] == pytest.approx(2e6) and mean["bytes_per_second"] == pytest.approx(7e6 / 3)
    assert all(r["iterations"] == 3 and r["repetitions"] == 3 for r in rows[3:])
    one = peer_timing.benchmark_rows(DENSE, 0, [1e-3], 1, lambda t: {}, "peer: x", {})
    assert [r["run_type"] for r in one] == ["iteration"]   # one repetition: no aggregates, as Google Benchmark


def ours_file(bench, tmp_path, sweep):
    out = tmp_path / "ours.json"
    bench("--sweep", sweep, "--benchmark_repetitions=3", f"--benchmark_out={out}", "--benchmark_out_format=json")
    return out


SMALL = {"schema": 1, "name": "peer-small", "repetitions": 3, "min_time_s": 0.001,
         "pack": {"block_size": 64, "tokens": [256, 512]},
         "convert": {"block_size": 64, "topk": [128], "rows": [8]},
         "attention": {
             "sparse_mqa": {"block_size": 64, "shapes": [
                 {"batch": [1], "query_tokens": [2], "heads": [2], "topk": [64], "seq_len": [128]}]},
             "dense_mha": {"shapes": [{"heads": [2], "tokens": [64], "requests": [2], "keys_per_request": [48],
                                       "causal": [True, False]}]},
             "forward": {"batches": [{"name": "b", "heads": [16], "topk": [128], "seq_lens": [32, 40],
                                      "query_lens": [1, 5]}]}}}


def fake_run(monkeypatch, peer_timing, seconds_of):
    """run_timing without PyTorch: a stand-in torch (no CUDA), the copy and GEMM rates replaced,
    and each shape's "inputs" a call that takes seconds_of(name) (an exception: raised while they
    are built)."""
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: False, OutOfMemoryError=MemoryError, empty_cache=lambda: None),
        device=lambda kind: types.SimpleNamespace(type=kind),
        Generator=lambda: types.SimpleNamespace(manual_seed=lambda seed: None),
        __version__="fake", version=types.SimpleNamespace(cuda=None))
    monkeypatch.setattr(peer_timing, "torch", fake)
    monkeypatch.setattr(peer_timing, "copy_rate", lambda device: 1e9)
    monkeypatch.setattr(peer_timing, "gemm_rate", lambda device: (1e11, 384))

    def setup_shape(shape, device, gen):
        value = seconds_of(shape["name"])
        if isinstance(value, Exception):
            raise value
        extra = {"peer_distinct_entries": 99} if shape["op"] == "sparse_mqa" else {}
        return types.SimpleNamespace(seconds=value), extra, ("none" if shape["op"] == "dense_mha" else None)

    monkeypatch.setattr(peer_timing, "setup_shape", setup_shape)
    monkeypatch.setattr(peer_timing, "time_fn", lambda fn, flush, iters, warmup, device: [fn.seconds] * iters)


def test_a_run_writes_what_compare_reports_and_plot_sweep_read(peer_timing, bench, mla_bench, tmp_path,
                                                               monkeypatch, capsys):
    sweep = tmp_path / "small.json"
    sweep.write_text(json.dumps(SMALL))
    ours = ours_file(bench, tmp_path, sweep)
    export, _ = peer_timing.load_shapes(None, str(sweep), mla_bench)
    shapes_file = tmp_path / "shapes.json"
    shapes_file.write_text(json.dumps(export))
    names = [s["name"] for s in export["shapes"]]
    # Each shape's calls take 2^-(10 + its index) s (exact in binary); the dense unmasked one fails.
    seconds = {name: 2.0 ** -(10 + i) for i, name in enumerate(names)}
    failing = next(n for n in names if n.endswith("/mask:none"))
    fake_run(monkeypatch, peer_timing,
             lambda name: RuntimeError("no kernel for these dims") if name == failing else seconds[name])

    out = tmp_path / "peer.json"
    assert peer_timing.main(["--shapes", str(shapes_file), "--device", "cpu", "--iters", "20", "--ours", str(ours),
                             "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "forward/b/H:16/K:128" in printed and "no peer" in printed
    assert f"{failing}" in printed and "failed: no kernel for these dims" in printed
    document = json.loads(out.read_text())
    assert "schema" not in document   # compare_reports.py would take it for an mla-check report
    context = document["context"]
    assert context["mla_backend"].startswith("pytorch peer") and context["mla_sweep"] == f"peer-small ({sweep})"
    assert context["peer_ours"] == str(ours)
    rows = document["benchmarks"]
    medians = {r["run_name"]: r for r in rows if r.get("aggregate_name") == "median"}
    timed = [s for s in export["shapes"] if s["op"] != "forward" and s["name"] != failing]
    assert sorted(medians) == sorted(s["run_name"] for s in timed)
    for s in timed:
        m = medians[s["run_name"]]
        t = seconds[s["name"]]
        assert m["real_time"] == pytest.approx(t * 1e6) and m["repetitions"] == 20
        assert m["bytes_per_second"] == pytest.approx(s["bytes"] / t)   # mla-bench's model, the peer's time
        assert m["pct_of_copy_bw"] == pytest.approx(100 * s["bytes"] / t / 1e9)
        if s["flops"]:
            assert m["flops_per_second"] == pytest.approx(s["flops"] / t)
        assert m["ours_over_peer"] == pytest.approx(m["ours_seconds"] / t)
    sparse = next(r for r in medians.values() if r["run_name"].startswith("sparse_mqa/"))
    assert sparse["peer_distinct_entries"] == 99
    dense = next(r for r in medians.values() if r["run_name"].startswith("dense_mha/"))
    assert dense["mask"] == "none" and "mask none" in dense["label"]
    errors = [r for r in rows if r.get("error_occurred")]
    assert [r["run_name"] for r in errors] == [failing + "/manual_time"]
    assert errors[0]["error_message"] == "no kernel for these dims"

    # compare_reports.py joins the two files by name: every peer benchmark is one of ours.
    compare = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare_reports.py"), str(ours), str(out),
                              "--json", str(tmp_path / "cmp.json")], capture_output=True, text=True, timeout=120)
    comparison = json.loads((tmp_path / "cmp.json").read_text())
    assert comparison["compared"]["benchmarks"] == len(timed) + 1, compare.stdout
    findings = {(f["category"], f["benchmark"]) for f in comparison["findings"]}
    assert ("error", failing + "/manual_time") in findings            # errored in the peer only
    # Only the forward step, which has no peer, is ours alone; nothing is the peer's alone.
    assert {b for c, b in findings if c in ("missing", "added")} == {"forward/b/H:16/K:128/manual_time"}
    assert "backend differs" in compare.stdout

    # plot_sweep.py draws the peer's series from the same file.
    plot = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_sweep.py"), str(ours), "--peer", str(out),
                           "--table", "--filter", "^pack/"], capture_output=True, text=True, timeout=120)
    assert plot.returncode == 0, plot.stderr
    assert "| peer: B:64 | 256 |" in plot.stdout and "| peer: B:64 | 512 |" in plot.stdout


def test_on_the_cpu_the_shapes_over_the_host_caps_are_skipped(peer_timing, mla_bench, tmp_path, monkeypatch, capsys):
    export, _ = peer_timing.load_shapes(None, "quick", mla_bench)
    capped = {"name": "pack/B:64/tokens:99", "run_name": "pack/B:64/tokens:99/manual_time", "op": "pack",
              "params": {"block_size": 64, "tokens": 99}, "items": 99, "bytes": 1, "flops": 0, "host_capped": True}
    export["shapes"] = [capped] + export["shapes"][:1]
    shapes_file = tmp_path / "shapes.json"
    shapes_file.write_text(json.dumps(export))
    fake_run(monkeypatch, peer_timing, lambda name: 2.0 ** -10)
    out = tmp_path / "peer.json"
    assert peer_timing.main(["--shapes", str(shapes_file), "--device", "cpu", "--out", str(out)]) == 0
    assert "pack/B:64/tokens:99  " in capsys.readouterr().out
    run_names = {r["run_name"] for r in json.loads(out.read_text())["benchmarks"]}
    assert run_names == {export["shapes"][1]["run_name"]}


def test_without_a_gpu_auto_skips(peer_timing, mla_bench, tmp_path, monkeypatch, capsys):
    fake_run(monkeypatch, peer_timing, lambda name: 1.0)
    out = tmp_path / "peer.json"
    assert peer_timing.main(["--sweep", "quick", "--mla-bench", mla_bench, "--out", str(out)]) == 0
    assert "no CUDA device; skipped" in capsys.readouterr().out and not out.exists()
    assert peer_timing.main(["--sweep", "quick", "--mla-bench", mla_bench, "--device", "cuda"]) == 2
    assert "--device cuda: no CUDA device" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The PyTorch routes (need PyTorch)


def without_attention_bias(monkeypatch):
    """PyTorch < 2.3: no torch.nn.attention.bias (the import fails), the explicit mask is used."""
    monkeypatch.setitem(sys.modules, "torch.nn.attention.bias", None)


@pytest.mark.parametrize("bias_module", [True, False], ids=["causal_lower_right", "explicit_mask"])
def test_sdpa_masking_matches_an_explicit_softmax(peer_timing, bias_module, monkeypatch):
    torch = pytest.importorskip("torch")
    if not bias_module:
        without_attention_bias(monkeypatch)
    lower_right = peer_timing.lower_right_mask(2, 3, torch.device("cpu"))[1]
    assert lower_right == "explicit lower-right bool mask" or bias_module
    gen = torch.Generator().manual_seed(3)
    h = 2
    for q_lens, k_lens, causal, how in [
        ([5, 5], [5, 5], True, "is_causal=True"),
        ([5, 4], [5, 4], True, "is_causal=True"),
        ([5, 5], [9, 9], True, lower_right),
        ([5, 4], [9, 9], True, lower_right),
        ([5, 4], [3, 3], False, "none"),
        ([6], [11], False, "none"),
    ]:
        q = torch.randn(sum(q_lens), h, 192, generator=gen)
        k = torch.randn(sum(k_lens), h, 192, generator=gen)
        v = torch.randn(sum(k_lens), h, 128, generator=gen)
        masks, used = peer_timing.dense_masks(q_lens, k_lens, causal, torch.device("cpu"))
        assert used == how
        out = peer_timing.dense_attention_torch(q, k, v, q_lens, k_lens, causal, masks)
        refs, qs, ks = [], 0, 0
        for nq, nk in zip(q_lens, k_lens):
            s = torch.einsum("qhd,khd->hqk", q[qs:qs + nq].double(), k[ks:ks + nk].double()) / 192 ** 0.5
            if causal:
                visible = torch.arange(nk)[None, :] <= torch.arange(nq)[:, None] + nk - nq
                s = s.masked_fill(~visible, float("-inf"))
            refs.append(torch.einsum("hqk,khd->qhd", s.softmax(-1), v[ks:ks + nk].double()))
            qs += nq
            ks += nk
        torch.testing.assert_close(out.double(), torch.cat(refs), rtol=1e-4, atol=1e-4)


def test_the_explicit_lower_right_mask_is_bottom_right(peer_timing, monkeypatch):
    torch = pytest.importorskip("torch")
    without_attention_bias(monkeypatch)
    mask, how = peer_timing.lower_right_mask(3, 5, torch.device("cpu"))
    assert how == "explicit lower-right bool mask"
    assert mask.tolist() == [[True, True, True, False, False],
                             [True, True, True, True, False],
                             [True, True, True, True, True]]


def test_every_peer_runs_on_the_cpu(peer_timing, tmp_path, mla_bench, capsys):
    pytest.importorskip("torch")
    sweep = tmp_path / "small.json"
    sweep.write_text(json.dumps(SMALL))
    out = tmp_path / "peer.json"
    assert peer_timing.main(["--sweep", str(sweep), "--mla-bench", mla_bench, "--device", "cpu", "--iters", "20",
                             "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["benchmarks"]
    assert not [r for r in rows if r.get("error_occurred")], capsys.readouterr().out
    assert {r["run_name"].split("/")[0] for r in rows} == {"pack", "convert", "sparse_mqa", "dense_mha"}
