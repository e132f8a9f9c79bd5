"""Tests of scripts/peer_torch.py's attention shapes against mla-bench's: the same benchmark names
for the same sweep (joined by name with --ours), the same FLOP and byte models, the same refusals.

PyTorch is not needed for the shapes and models: where it is not installed the script is loaded
with a stand-in `torch` module (only names at import time). The masking test (SDPA against an
explicit softmax) runs where PyTorch is installed. mla-bench comes from $MLA_BENCH_BIN, else the
most recently built of build*/bin/mla-bench; the tests that need it skip when there is none.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "peer_torch.py"
DENSE_FLOPS_PER_PAIR = 2 * (192 + 128)  # docs/benchmarks.md


def load_peer_torch():
    stand_in = None
    try:
        import torch  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("torch")
        stand_in.__getattr__ = lambda name: f"<torch.{name} stand-in>"  # module-level getattr (PEP 562)
        sys.modules["torch"] = stand_in
    try:
        spec = importlib.util.spec_from_file_location("peer_torch_under_test", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if stand_in is not None:
            del sys.modules["torch"]
    return module, stand_in is None


peer, HAVE_TORCH = load_peer_torch()


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


def bench(*args) -> subprocess.CompletedProcess:
    r = subprocess.run([mla_bench(), "--backend", "host", *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r


ATTENTION_PREFIXES = ("sparse_mqa/", "dense_mha/", "forward/")

# Small dense shapes covering every case: self-attention (equal and unequal request lengths),
# bottom-right causal with more keys than queries, unmasked with more and with fewer keys than
# queries, a duplicate of a default, in an order that is not sorted.
SMALL_DENSE = {
    "schema": 1, "name": "peer-parity", "repetitions": 1, "min_time_s": 0.001,
    "attention": {"dense_mha": {"shapes": [
        {"heads": [2], "tokens": [50], "requests": [3, 1]},
        {"heads": [2], "tokens": [50], "requests": [3], "causal": [True]},
        {"heads": [2], "tokens": [50], "requests": [3], "keys_per_request": [17, 40], "causal": [True, False]},
        {"heads": [3, 1], "tokens": [48], "requests": [4], "keys_per_request": [5], "causal": [False]},
        {"heads": [1], "tokens": [33], "requests": [1], "keys_per_request": [33, 64]},
    ]}},
}


def write_sweep(tmp_path: Path, sweep: dict) -> Path:
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep))
    return path


def listed(sweep_arg) -> list[str]:
    r = bench("--sweep", sweep_arg, "--no-host-caps", "--benchmark_list_tests=true")
    return [re.sub(r"/manual_time$", "", line) for line in r.stdout.splitlines() if line.startswith(ATTENTION_PREFIXES)]


def peer_names(sweep: dict) -> list[str]:
    return [name for name, _, _ in peer.attention_shapes(sweep)]


# ---------------------------------------------------------------------------------------------
# Names


def test_dense_names_follow_the_documented_format():
    sweep = {"attention": {"dense_mha": {"shapes": [
        {"heads": [128], "tokens": [4096], "requests": [1]},
        {"heads": [128], "tokens": [4096], "requests": [4], "causal": [False], "keys_per_request": [1024]},
        {"heads": [128], "tokens": [1024], "requests": [1], "causal": [True, False], "keys_per_request": [8192]},
        {"heads": [16], "tokens": [64], "requests": [2], "causal": [False]},
    ]}}}
    assert peer_names(sweep) == [
        "dense_mha/H:128/reqs:1/tokens:4096",
        "dense_mha/H:128/reqs:4/tokens:4096/keys:1024/mask:none",
        "dense_mha/H:128/reqs:1/tokens:1024/keys:8192",
        "dense_mha/H:128/reqs:1/tokens:1024/keys:8192/mask:none",
        "dense_mha/H:16/reqs:2/tokens:64/mask:none",
    ]


@pytest.mark.parametrize("sweep_name", ["attention", "quick"])
def test_attention_names_match_mla_bench_on_the_shipped_sweeps(sweep_name):
    sweep, _ = peer.load_sweep(sweep_name)
    ours = listed(sweep_name)
    assert any("/keys:" in n for n in ours) and any("/mask:none" in n for n in ours)
    assert peer_names(sweep) == ours


def test_attention_names_match_mla_bench_on_every_dense_case(tmp_path):
    assert peer_names(SMALL_DENSE) == listed(write_sweep(tmp_path, SMALL_DENSE))


def test_the_attention_sweep_has_no_duplicate_names():
    names = peer_names(peer.load_sweep("attention")[0])
    assert len(names) == len(set(names))
    for h in (16, 32, 64, 128):
        assert f"dense_mha/H:{h}/reqs:1/tokens:4096" in names


# ---------------------------------------------------------------------------------------------
# Refusals: the ones mla-bench makes (tests/apps/test_mla_bench_cli.py), with the JSON path.


@pytest.mark.parametrize("group, where", [
    ({"heads": [16], "tokens": [256], "requests": [2], "keys_per_request": [128, 127]},
     "/attention/dense_mha/shapes/0/keys_per_request/1"),
    ({"heads": [16], "tokens": [256], "requests": [1], "keys_per_request": [64], "causal": [False, True]},
     "/attention/dense_mha/shapes/0/keys_per_request/0"),
    ({"heads": [16], "tokens": [256], "requests": [1], "causal": []}, "/attention/dense_mha/shapes/0/causal"),
    ({"heads": [16], "tokens": [256], "requests": [1], "causal": [1]}, "/attention/dense_mha/shapes/0/causal"),
    ({"heads": [16], "tokens": [256], "requests": [1], "keys_per_request": [0]},
     "/attention/dense_mha/shapes/0/keys_per_request"),
    ({"heads": [16], "tokens": [256], "requests": [0]}, "/attention/dense_mha/shapes/0/requests: expected integers"),
    ({"heads": [16], "tokens": 256, "requests": [1]}, "/attention/dense_mha/shapes/0/tokens: expected a non-empty"),
    ({"tokens": [256], "requests": [1]}, "/attention/dense_mha/shapes/0/heads: missing"),
    ({"heads": [16], "tokens": [1024], "requests": [1024], "keys_per_request": [32768]},
     "/attention/dense_mha/shapes/0/keys_per_request/0: 1024 requests x keys_per_request 32768"),
])
def test_bad_dense_groups_are_refused_naming_the_field(group, where):
    with pytest.raises(ValueError, match=re.escape(where)):
        peer.attention_shapes({"attention": {"dense_mha": {"shapes": [group]}}})


def test_unmasked_may_have_fewer_keys_than_queries():
    shapes = peer.attention_shapes({"attention": {"dense_mha": {"shapes": [
        {"heads": [1], "tokens": [256], "requests": [1], "keys_per_request": [64], "causal": [False]}]}}})
    assert [name for name, _, _ in shapes] == ["dense_mha/H:1/reqs:1/tokens:256/keys:64/mask:none"]


# ---------------------------------------------------------------------------------------------
# FLOP and byte models


def brute_force_pairs(q_lens, k_lens, causal):
    """Visible (query, key) pairs by enumeration: bottom-right causal is j <= i + nk - nq."""
    return sum(1 for nq, nk in zip(q_lens, k_lens) for i, j in itertools.product(range(nq), range(nk))
               if not causal or j <= i + nk - nq)


def dense_params(sweep):
    return [prm for _, op, prm in peer.attention_shapes(sweep) if op == "dense_mha"]


def test_dense_pairs_count_exactly_the_visible_pairs():
    for prm in dense_params(SMALL_DENSE):
        q_lens, k_lens = peer.dense_lengths(prm)
        assert sum(q_lens) == prm["tokens"]
        assert k_lens == ([prm["keys_per_request"]] * prm["requests"] if prm["keys_per_request"] else q_lens)
        assert peer.dense_pairs(prm) == brute_force_pairs(q_lens, k_lens, prm["causal"]), prm


def test_dense_models_of_the_attention_sweep_in_closed_form():
    models = {name: peer.dense_model(prm) for name, op, prm in peer.attention_shapes(peer.load_sweep("attention")[0])
              if op == "dense_mha"}

    def expected(h, q_lens, k_lens, pairs):
        nbytes = sum(q_lens) * h * (192 * 2 + 128 * 2 + 4) + sum(k_lens) * (h * 512 + 128)
        return pairs * h * DENSE_FLOPS_PER_PAIR, nbytes

    # Causal self-attention: n (n + 1) / 2 per request (docs/benchmarks.md: 8k tokens = 33,558,528 pairs).
    assert models["dense_mha/H:128/reqs:1/tokens:8192"] == expected(128, [8192], [8192], 33_558_528)
    assert models["dense_mha/H:16/reqs:1/tokens:4096"] == expected(16, [4096], [4096], 4096 * 4097 // 2)
    # Unmasked: nq x nk per request.
    assert models["dense_mha/H:128/reqs:4/tokens:4096/keys:1024/mask:none"] == \
        expected(128, [1024] * 4, [1024] * 4, 4 * 1024 * 1024)
    assert models["dense_mha/H:128/reqs:4/tokens:4096/keys:4096/mask:none"] == \
        expected(128, [1024] * 4, [4096] * 4, 4 * 1024 * 4096)
    # Prefix-cache hit: 1024 new tokens after 7168 cached see every cached key plus the causal part.
    assert models["dense_mha/H:128/reqs:1/tokens:1024/keys:8192"] == \
        expected(128, [1024], [8192], 1024 * 7168 + 1024 * 1025 // 2)


def test_dense_flops_and_bytes_match_mla_bench(tmp_path):
    """mla-bench's label gives the pairs it counted (FLOPs = pairs x H x 640) and its flop_per_byte
    counter the ratio to its byte model; both must be the peer's."""
    out = tmp_path / "bench.json"
    bench("--sweep", write_sweep(tmp_path, SMALL_DENSE), "--benchmark_filter=dense_mha",
          "--benchmark_repetitions=1", f"--benchmark_out={out}", "--benchmark_out_format=json")
    rows = {re.sub(r"/manual_time$", "", e["name"]): e for e in json.loads(out.read_text())["benchmarks"]}
    shapes = [(name, prm) for name, op, prm in peer.attention_shapes(SMALL_DENSE) if op == "dense_mha"]
    assert sorted(rows) == sorted(name for name, _ in shapes)
    for name, prm in shapes:
        row = rows[name]
        assert not row.get("error_occurred"), row
        label = row["label"]
        assert label.startswith("causal" if prm["causal"] else "unmasked"), label
        pairs = int(re.search(r"(\d+) pairs", label).group(1))
        flops, nbytes = peer.dense_model(prm)
        assert pairs * prm["heads"] * DENSE_FLOPS_PER_PAIR == flops, (name, label)
        assert row["flop_per_byte"] == pytest.approx(flops / nbytes, rel=1e-12), name
        assert row["bytes_per_second"] / row["items_per_second"] == pytest.approx(nbytes / prm["tokens"], rel=1e-9)


# ---------------------------------------------------------------------------------------------
# The PyTorch route (needs PyTorch)


def without_attention_bias(monkeypatch):
    """PyTorch < 2.3: no torch.nn.attention.bias (the import fails), the explicit mask is used."""
    monkeypatch.setitem(sys.modules, "torch.nn.attention.bias", None)


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed")
@pytest.mark.parametrize("bias_module", [True, False], ids=["causal_lower_right", "explicit_mask"])
def test_sdpa_masking_matches_an_explicit_softmax(bias_module, monkeypatch):
    import torch

    if not bias_module:
        without_attention_bias(monkeypatch)
    lower_right = peer.lower_right_mask(2, 3, torch.device("cpu"))[1]
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
        masks, used = peer.dense_masks(q_lens, k_lens, causal, torch.device("cpu"))
        assert used == how
        out = peer.dense_attention_torch(q, k, v, q_lens, k_lens, causal, masks)
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


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed")
def test_the_explicit_lower_right_mask_is_bottom_right(monkeypatch):
    import torch

    without_attention_bias(monkeypatch)
    mask, how = peer.lower_right_mask(3, 5, torch.device("cpu"))
    assert how == "explicit lower-right bool mask"
    assert mask.tolist() == [[True, True, True, False, False],
                             [True, True, True, True, False],
                             [True, True, True, True, True]]


def fake_batches(monkeypatch, per_call):
    """Replaces peer.time_fn by one whose calls take per_call[k] seconds in its k-th batch; records
    (calls, warm-ups) per batch."""
    batches = []

    def fake_time_fn(fn, flush, iters, warmup, device):
        seconds = per_call[len(batches)]
        batches.append((iters, warmup))
        return [seconds] * iters

    monkeypatch.setattr(peer, "time_fn", fake_time_fn)
    return batches


def test_the_first_repetition_searches_the_call_count_as_google_benchmark_does(monkeypatch):
    # min_time 0.5 s (times exact in binary). Batch 1: 1 call of 2^-10 s, under a tenth of 0.5:
    # 10x. Batch 2: 10 calls of 2^-5 s = 0.3125, over a tenth: 1.4 * 0.5 / 0.3125 = 2.24x ->
    # 22 calls. Batch 3: 22 calls of 2^-5 s = 0.6875 >= 0.5: the first repetition. The other two
    # repeat 22 calls.
    batches = fake_batches(monkeypatch, [2 ** -10, 2 ** -5, 2 ** -5, 2 ** -6, 2 ** -4])
    means, per_repetition, calls = peer.time_like_sweep(None, None, 3, 0.5, 4, None)
    assert batches == [(1, 4), (10, 0), (22, 0), (22, 0), (22, 0)]   # warm-up once, before the first
    assert per_repetition == 22
    assert calls == 1 + 10 + 3 * 22
    assert means == [2 ** -5, 2 ** -6, 2 ** -4]


def test_a_batch_that_reaches_min_time_exactly_is_the_repetition(monkeypatch):
    batches = fake_batches(monkeypatch, [0.5, 0.25])
    means, per_repetition, calls = peer.time_like_sweep(None, None, 2, 0.5, 0, None)
    assert batches == [(1, 0), (1, 0)]
    assert (means, per_repetition, calls) == ([0.5, 0.25], 1, 2)


def test_the_call_count_grows_by_at_least_one(monkeypatch):
    # 0.25 s of 0.3: 1.4 * 0.3 / 0.25 = 1.68x of 1 call rounds to 2; a batch just short of the
    # minimum time with 2 calls (0.14 s each) grows by 1.4 * 0.3 / 0.28 = 1.5x -> 3.
    batches = fake_batches(monkeypatch, [0.25, 0.14, 0.11])
    _, per_repetition, _ = peer.time_like_sweep(None, None, 1, 0.3, 0, None)
    assert [n for n, _ in batches] == [1, 2, 3]
    assert per_repetition == 3


def test_the_protocol_values_are_checked(tmp_path):
    good = {"repetitions": 5, "min_time_s": 0.05}
    assert peer.sweep_protocol(good, "s.json") == (5, 0.05)
    assert peer.sweep_protocol({}, "s.json") == (5, 0.05)              # mla-bench's defaults
    assert peer.sweep_protocol(good, "s.json", 3, 0.2) == (3, 0.2)     # the command line wins
    for bad, field in [({"repetitions": 0}, "repetitions"), ({"repetitions": 2.5}, "repetitions"),
                       ({"repetitions": True}, "repetitions"), ({"min_time_s": 0}, "min_time_s"),
                       ({"min_time_s": float("inf")}, "min_time_s"), ({"min_time_s": float("nan")}, "min_time_s"),
                       ({"min_time_s": "0.05"}, "min_time_s"), ({"min_time_s": 61}, "min_time_s")]:
        with pytest.raises(ValueError, match=f"s.json: {field}"):
            peer.sweep_protocol(bad, "s.json")
    with pytest.raises(ValueError, match="--min-time"):
        peer.sweep_protocol(good, "s.json", None, -1.0)


def test_attention_timing_defaults_to_the_sweep_protocol():
    assert peer.parse_args(["--attention"]).iters is None
    assert peer.parse_args(["--attention", "--iters", "25"]).iters == 25
    assert peer.parse_args(["--no-check"]).iters == 30   # cache path: a fixed count as before
    args = peer.parse_args(["--attention", "--repetitions", "3", "--min-time", "0.2"])
    assert (args.repetitions, args.min_time) == (3, 0.2)
    for bad in (["--attention", "--iters", "5"], ["--attention", "--iters", "30", "--repetitions", "3"]):
        with pytest.raises(SystemExit):
            peer.parse_args(bad)


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


def test_the_flush_sums_in_the_buffers_own_type():
    # A sum whose accumulator type is not the input's converts the whole input first (a written
    # temporary 8x the buffer): the flush must sum the buffer viewed as int64, with no dtype.
    calls = []
    peer.read_flush(RecordingTensor(calls, "uint8"))
    assert calls == [("view", "uint8", peer.torch.int64), ("sum", peer.torch.int64, (), {})]


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed")
def test_the_flush_reads_the_buffer_without_a_converted_copy():
    import torch
    flush = peer.flush_buffer(3 << 20, torch.device("cpu"))   # 6 MiB < 64 MiB: 64 MiB
    assert flush.numel() == 64 << 20 and flush.numel() % 8 == 0
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        total = peer.read_flush(flush)
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


def test_each_timed_call_runs_after_the_lead_and_the_flush(monkeypatch):
    calls = []
    monkeypatch.setattr(peer, "torch", fake_torch(calls))
    flush = peer.ColdStart(RecordingTensor(calls, "uint8"), 12345)
    times = peer.time_cuda(lambda: calls.append(("fn",)), flush, 2, 1)
    assert times == [2e-3, 2e-3]
    one = [("sleep", 12345), ("view", "uint8", "int64"), ("sum", "int64", (), {}), ("record", "start"), ("fn",),
           ("record", "stop"), ("query", "start"), ("synchronize", "stop"), ("elapsed", "start", "stop")]
    assert calls == [("fn",), ("device synchronize",), ("Event", "start"), ("Event", "stop")] + one + one


def test_a_call_whose_timed_region_began_before_it_was_queued_is_counted(monkeypatch):
    # The start event is asked after the call and its stop event are queued: reached by then, the
    # GPU waited for Python's launches inside the timed region.
    calls = []
    monkeypatch.setattr(peer, "torch", fake_torch(calls, reached=(1, 3)))
    flush = peer.ColdStart(RecordingTensor(calls, "uint8"), 7)
    peer.time_cuda(lambda: None, flush, 3, 0)
    assert flush.take_counts() == (3, 1)
    assert flush.take_counts() == (0, 0)   # taken: they start again
    peer.time_cuda(lambda: None, flush, 2, 2)   # warm-up calls are not timed, nor counted
    assert flush.take_counts() == (2, 1)


def test_a_shape_counts_only_its_own_late_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(peer, "torch", fake_torch(calls, reached=(0, 1, 3)))
    flush = peer.ColdStart(RecordingTensor(calls, "uint8"), 7)
    peer.time_cuda(lambda: None, flush, 2, 0)   # a shape that failed part-way: both late, never taken

    def timing():
        peer.time_cuda(lambda: None, flush, 2, 0)   # the search and the repetitions add up
        peer.time_cuda(lambda: None, flush, 3, 0)
        return "times"
    assert peer.counting_late_calls(flush, timing) == ("times", (5, 1))
    assert peer.counting_late_calls(None, lambda: "cpu") == ("cpu", None)   # no flush: nothing counted


def test_the_late_queue_note_names_the_count_and_the_remedy():
    assert peer.late_queue_note(None) is None and peer.late_queue_note((50, 0)) is None
    note = peer.late_queue_note((50, 3))
    assert "in 3 of 50 timed calls" in note and "--lead-cycles" in note


def test_no_lead_and_no_flush(monkeypatch):
    calls = []
    monkeypatch.setattr(peer, "torch", fake_torch(calls))
    peer.ColdStart(RecordingTensor(calls, "uint8"), 0)()
    assert calls == [("view", "uint8", "int64"), ("sum", "int64", (), {})]   # no sleep
    calls.clear()
    peer.time_cuda(lambda: calls.append(("fn",)), None, 1, 0)
    assert not [c for c in calls if c[0] in ("sleep", "view", "sum")]


def test_a_lead_without_torch_cuda_sleep_is_refused(monkeypatch):
    calls = []
    monkeypatch.setattr(peer, "torch", fake_torch(calls, sleep=False))
    with pytest.raises(peer.DumpError, match="no torch.cuda._sleep"):
        peer.ColdStart(RecordingTensor(calls, "uint8"), 1)
    peer.ColdStart(RecordingTensor(calls, "uint8"), 0)   # no lead: nothing needed


def test_the_default_lead_is_mla_benchs():
    # The context key the peer reads is the one mla-bench writes.
    assert 'AddCustomContext("mla_lead_cycles"' in (ROOT / "apps" / "mla_bench" / "main.cpp").read_text()
    header = (ROOT / "apps" / "mla_bench" / "l2_flush.h").read_text()
    default = re.search(r"kDefaultLeadCycles = (\d+);", header)
    maximum = re.search(r"kMaxLeadCycles = int64_t\{1\} << (\d+);", header)
    assert default and maximum
    assert peer.LEAD_CYCLES == int(default.group(1))
    assert peer.MAX_LEAD_CYCLES == 1 << int(maximum.group(1))


def ours_json(tmp_path, context):
    path = tmp_path / "ours.json"
    path.write_text(json.dumps({"context": context, "benchmarks": []}))
    return path


def test_the_lead_comes_from_ours_unless_given(tmp_path):
    ours = ours_json(tmp_path, {"mla_lead_cycles": "300000"})
    assert peer.resolve_lead(None, ours) == (300000, None)
    lead, note = peer.resolve_lead(0, ours)
    assert lead == 0 and "--lead-cycles 0" in note and "ran with 300000" in note
    assert peer.resolve_lead(300000, ours) == (300000, None)
    assert peer.resolve_lead(None, None) == (peer.LEAD_CYCLES, None)
    assert peer.resolve_lead(7, None) == (7, None)
    old = ours_json(tmp_path, {})
    lead, note = peer.resolve_lead(None, old)
    assert lead == peer.LEAD_CYCLES and "names no lead" in note


@pytest.mark.parametrize("value, problem", [("x", "not a whole number"), ("-1", "outside"),
                                            (str((1 << 32) + 1), "outside"), (200000.9, "not a whole number"),
                                            (True, "not a whole number"), ("2e5", "not a whole number"),
                                            ([1], "not a whole number")])
def test_a_bad_lead_in_ours_is_named(tmp_path, value, problem):
    ours = ours_json(tmp_path, {"mla_lead_cycles": value})
    with pytest.raises(ValueError, match=f"ours.json: context/mla_lead_cycles: .*{problem}"):
        peer.resolve_lead(None, ours)
    assert peer.resolve_lead(None, ours_json(tmp_path, {"mla_lead_cycles": 123})) == (123, None)


@pytest.mark.parametrize("context", [None, [1, 2], "x"])
def test_ours_without_a_context_object_is_named(tmp_path, context):
    with pytest.raises(ValueError, match="ours.json: context: not an object"):
        peer.resolve_lead(None, ours_json(tmp_path, context))


def test_a_bad_lead_in_ours_stops_the_run_before_any_timing(tmp_path, capsys):
    ours = ours_json(tmp_path, {"mla_lead_cycles": "-5"})
    assert peer.main(["--attention", "--ours", str(ours)]) == 2
    assert "context/mla_lead_cycles: -5 is outside" in capsys.readouterr().err


def test_lead_cycles_flag():
    assert peer.parse_args(["--attention"]).lead_cycles is None
    assert peer.parse_args(["--attention", "--lead-cycles", "0"]).lead_cycles == 0
    for bad in ("-1", str((1 << 32) + 1), "1.5"):
        with pytest.raises(SystemExit):
            peer.parse_args(["--attention", "--lead-cycles", bad])
