"""mla-bench's command line: its handling of bad input (flags and sweep files: exit 2 with a
message naming the problem, in the one style of every input file, `FILE: at /json/pointer:
problem`, never an abort or a hang), the shapes its sweeps register and --list-shapes, the export
of those shapes with the models its counters use. The binary comes from $MLA_BENCH_BIN (set by
CTest when mla-bench is built); a few tests run small benchmarks on the host backend."""
import itertools
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from built_tools import skip_unless_built

BIN = os.environ.get("MLA_BENCH_BIN", "build/bin/mla-bench")


binary_exists = skip_unless_built(BIN)


def run(*args):
    return subprocess.run([BIN, "--backend", "host", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("flag", ["--benchmark_repetitions=0", "--benchmark_repetitions=-1",
                                  "--benchmark_min_time=nan", "--benchmark_min_time=abc"])
def test_google_benchmark_flags_it_would_abort_or_hang_on_are_refused(flag):
    r = run("--sweep", "quick", flag)
    assert r.returncode == 2
    assert flag.split("=")[0] in r.stderr


@pytest.mark.parametrize("value", ["-1", "4294967297", "abc", "1.5"])
def test_a_lead_outside_its_range_is_refused(value):
    r = run("--sweep", "quick", "--lead-cycles", value)
    assert r.returncode == 2
    assert "--lead-cycles" in r.stderr + r.stdout


@pytest.mark.parametrize("value", ["0", "4294967296"])
def test_a_lead_at_its_bounds_is_accepted(value):
    r = run("--sweep", "quick", "--lead-cycles", value, "--benchmark_filter=^pack/B:64/tokens:1024/",
            "--benchmark_repetitions=1", "--benchmark_min_time=0.001")
    assert r.returncode == 0, r.stderr


SCHEMA = '"schema": 1, "name": "t"'


@pytest.mark.parametrize("text, where, problem", [
    ('{' + SCHEMA + ', "pack": {"tokens": [1024]}, "pack": {"tokens": [2048]}}', "/pack", "given twice"),
    ('{' + SCHEMA + ', "min_time_s": 1e400}', "", "number overflow"),
    ('{' + SCHEMA + ', "x": ' + "[" * 70 + "]" * 70 + '}', "/x" + "/0" * 63, "nesting deeper than 64 levels"),
    ('{' + SCHEMA + ', "repetitions": 18446744073709551615}', "/repetitions", "18446744073709551615"),
    ('{' + SCHEMA + '}', "", "defines no benchmark"),
    ('{' + SCHEMA + ', "pack": {"tokens": []}}', "", "defines no benchmark"),
    ('{' + SCHEMA + ', "gather": {"block_sizes": [64], "seq_starts": [], "rows": [1024]}}', "/gather/seq_starts",
     "expected at least one value"),
    ('{' + SCHEMA + ', "gather": {"block_sizes": [64], "seq_starts": [1], "rows": [1024]}}', "/gather/seq_starts/0",
     "expected true or false"),
    ('{' + SCHEMA + ', "attention": {"forward": {"batches": ['
     '{"name": "b", "heads": [16], "topk": [128], "seq_lens": [64], "query_lens": [1]},'
     '{"name": "b", "heads": [16], "topk": [128], "seq_lens": [128], "query_lens": [2]}]}}}',
     "/attention/forward/batches/1/name", "earlier batch"),
    # dense_mha's keys_per_request and causal: a causal request needs at least as many keys as
    # queries (the longest request of 256 tokens in 2 is 128); the second key count is the bad one.
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [256], "requests": [2], '
     '"keys_per_request": [128, 127]}]}}}',
     "/attention/dense_mha/shapes/0/keys_per_request/1", "keys_per_request 127 is less than the 128 queries"),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [256], "requests": [1], '
     '"keys_per_request": [64], "causal": [false, true]}]}}}',
     "/attention/dense_mha/shapes/0/keys_per_request/0", "bottom-right causal attention needs keys >= queries"),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [256], "requests": [1], '
     '"keys_per_request": [0]}]}}}',
     "/attention/dense_mha/shapes/0/keys_per_request/0", "value 0 is outside [1, "),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [256], "requests": [1], '
     '"keys_per_request": []}]}}}',
     "/attention/dense_mha/shapes/0/keys_per_request", "expected at least one value"),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [256], "requests": [1], '
     '"causal": []}]}}}',
     "/attention/dense_mha/shapes/0/causal", "expected at least one value"),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [256], "requests": [1], '
     '"causal": [1]}]}}}',
     "/attention/dense_mha/shapes/0/causal/0", "expected true or false"),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [256], "requests": [1], '
     '"causal": true}]}}}',
     "/attention/dense_mha/shapes/0/causal", "expected an array of booleans"),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [256], "requests": [1], '
     '"keys": [512]}]}}}',
     "/attention/dense_mha/shapes/0/keys", "unknown key"),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [16], "tokens": [65536], "requests": [1024], '
     '"keys_per_request": [32768], "causal": [false]}]}}}',
     "/attention/dense_mha/shapes/0/keys_per_request/0", "33554432 keys, more than 16777216"),
])
def test_bad_sweep_files_exit_2_naming_the_field(tmp_path, text, where, problem):
    f = tmp_path / "sweep.json"
    f.write_text(text)
    r = run("--sweep", str(f))
    assert r.returncode == 2, r.stderr
    assert problem in r.stderr, r.stderr
    if where:
        assert f"mla-bench: {f}: at {where}: " in r.stderr, r.stderr
    else:  # the document as a whole: "FILE: problem"
        assert f"mla-bench: {f}: " in r.stderr and f"{f}: at " not in r.stderr, r.stderr


# What the JSON Schema (scenarios/schema/sweep.schema.json, compiled in) refuses, one of each kind
# of violation, worded for the file's author; and the rules between fields it leaves to the loader.
@pytest.mark.parametrize("text, where, problem", [
    ('[1]', "", "expected an object, got an array"),
    ('{"name": "t", "pack": {"tokens": [1]}}', "/schema", 'missing required key "schema"'),
    ('{"schema": 2, "name": "t", "pack": {"tokens": [1]}}', "/schema",
     "expected 1 (this mla-bench reads sweep files of schema 1)"),
    ('{"schema": 1, "name": "", "pack": {"tokens": [1]}}', "/name", "expected a non-empty string"),
    ('{' + SCHEMA + ', "repetition": 3, "pack": {"tokens": [1]}}', "/repetition",
     'unknown key "repetition" (did you mean "repetitions"?); allowed here: schema, name, description, seed, '
     'repetitions, min_time_s, host, pack, gather, convert, dcp, attention'),
    ('{' + SCHEMA + ', "a/b~": 3, "pack": {"tokens": [1]}}', "/a~1b~0", 'unknown key "a/b~"'),
    ('{' + SCHEMA + ', "repetitions": 0, "pack": {"tokens": [1]}}', "/repetitions", "value 0 is outside [1, 1000]"),
    ('{' + SCHEMA + ', "repetitions": 2.0, "pack": {"tokens": [1]}}', "/repetitions",
     "expected an integer, got number 2.0"),
    ('{' + SCHEMA + ', "min_time_s": "0.05", "pack": {"tokens": [1]}}', "/min_time_s",
     "expected a number of seconds in (0, 60]"),
    ('{' + SCHEMA + ', "min_time_s": 0, "pack": {"tokens": [1]}}', "/min_time_s",
     "expected a number of seconds in (0, 60]"),
    ('{' + SCHEMA + ', "seed": -1, "pack": {"tokens": [1]}}', "/seed", "expected a non-negative integer"),
    ('{' + SCHEMA + ', "seed": 2.5, "pack": {"tokens": [1]}}', "/seed", "expected an integer, got number 2.5"),
    ('{' + SCHEMA + ', "host": {"max_tokens": 0}, "pack": {"tokens": [1]}}', "/host/max_tokens",
     "value 0 is outside [1, 16777216]"),
    ('{' + SCHEMA + ', "pack": {"tokens": "1024"}}', "/pack/tokens",
     'expected an array of integers, got string "1024"'),
    ('{' + SCHEMA + ', "pack": {"block_size": 64}}', "/pack/tokens", 'missing required key "tokens"'),
    ('{' + SCHEMA + ', "pack": {"tokens": [16777217]}}', "/pack/tokens/0", "value 16777217 is outside [1, 16777216]"),
    ('{' + SCHEMA + ', "attention": {"sparse_mqa": {"shapes": [{"batch": [1], "query_tokens": [1], "heads": [2000], '
     '"topk": [64], "seq_len": [64]}]}}}', "/attention/sparse_mqa/shapes/0/heads/0", "value 2000 is outside [1, 1024]"),
    ('{' + SCHEMA + ', "attention": {"sparse_mqa": {"shapes": [{"batch": [1], "query_tokens": [8], "heads": [2], '
     '"topk": [64], "seq_len": [4]}]}}}', "/attention/sparse_mqa/shapes/0/query_tokens", "query_tokens 8 > seq_len 4"),
    ('{' + SCHEMA + ', "attention": {"sparse_mqa": {"shapes": [{"batch": [1], "query_tokens": [1], "heads": [2], '
     '"topk": [64]}]}}}', "/attention/sparse_mqa/shapes/0/seq_len", 'missing required key "seq_len"'),
    ('{' + SCHEMA + ', "attention": {"dense_mha": {"shapes": [{"heads": [2], "tokens": [2], "requests": [3]}]}}}',
     "/attention/dense_mha/shapes/0/requests", "3 requests cannot share 2 tokens"),
    ('{' + SCHEMA + ', "attention": {"forward": {"batches": [{"name": "a b", "heads": [1], "topk": [1], '
     '"seq_lens": [4], "query_lens": [1]}]}}}', "/attention/forward/batches/0/name",
     "use letters, digits, '_', '-' and '.' only (it is part of benchmark names)"),
    ('{' + SCHEMA + ', "attention": {"forward": {"batches": [{"name": "a", "heads": [1], "topk": [1], '
     '"seq_lens": [4]}]}}}', "/attention/forward/batches/0/query_lens", 'missing required key "query_lens"'),
    ('{' + SCHEMA + ', "attention": {"forward": {"batches": [{"name": "a", "heads": [1], "topk": [1], '
     '"seq_lens": [4], "query_lens": [1], "requests": []}]}}}', "/attention/forward/batches/0", "give either"),
    ('{' + SCHEMA + ', "attention": {"forward": {"batches": [{"name": "a", "heads": [1], "topk": [1], '
     '"requests": [{"seq_len": 4, "query_len": 1}]}]}}}', "/attention/forward/batches/0/requests/0/count",
     'missing required key "count"'),
    ('{' + SCHEMA + ', "attention": {"forward": {"batches": [{"name": "a", "heads": [1], "topk": [1], '
     '"seq_lens": [4, 8], "query_lens": [1]}]}}}', "/attention/forward/batches/0/query_lens",
     "has 1 entries but seq_lens has 2"),
])
def test_the_sweep_schema_names_each_kind_of_violation(tmp_path, text, where, problem):
    test_bad_sweep_files_exit_2_naming_the_field(tmp_path, text, where, problem)


def test_every_violation_is_listed_one_per_line(tmp_path):
    f = tmp_path / "sweep.json"
    f.write_text('{' + SCHEMA + ', "repetitions": 0, "pack": {"tokenz": [1]}}')
    r = run("--sweep", str(f))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert sorted(line.removeprefix("mla-bench: ") for line in lines) == sorted([
        f"{f}: at /repetitions: value 0 is outside [1, 1000]",
        f'{f}: at /pack/tokenz: unknown key "tokenz" (did you mean "tokens"?); allowed here: block_size, '
        'block_sizes, tokens',
        f'{f}: at /pack/tokens: missing required key "tokens"'])
    assert lines[0].startswith("mla-bench: ")


def test_the_schema_is_built_in(tmp_path):
    # Run from a folder without the source tree: the schema (and the built-in sweeps) come with the binary.
    f = tmp_path / "sweep.json"
    f.write_text('{' + SCHEMA + ', "repetitions": 0, "pack": {"tokens": [1]}}')
    r = subprocess.run([str(Path(BIN).resolve()), "--backend", "host", "--sweep", str(f)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "at /repetitions: value 0 is outside [1, 1000]" in r.stderr, r.stderr
    r = subprocess.run([str(Path(BIN).resolve()), "--list-sweeps"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0 and "cache_path" in r.stdout, r.stderr


def test_a_directory_or_fifo_as_sweep_is_refused_without_reading(unreadable_inputs):
    for path, problem in unreadable_inputs:
        r = run("--sweep", path)
        assert r.returncode == 2 and problem in r.stderr, r.stderr


def listed_names(sweep_text, tmp_path):
    """The benchmark names mla-bench registers for a sweep (every shape: --no-host-caps), in order."""
    f = tmp_path / "sweep.json"
    f.write_text(sweep_text)
    r = run("--sweep", str(f), "--no-host-caps", "--benchmark_list_tests=true")
    assert r.returncode == 0, r.stderr
    return [line.removesuffix("/manual_time") for line in r.stdout.splitlines() if line.startswith("dense_mha/")]


def test_dense_mha_keys_and_mask_name_the_benchmarks(tmp_path):
    groups = [
        # Defaults (causal self-attention): today's names, unchanged.
        {"heads": [16], "tokens": [256], "requests": [1, 4]},
        # The same shapes with the defaults spelled out: duplicates, dropped.
        {"heads": [16], "tokens": [256], "requests": [4], "causal": [True]},
        # Keys per request (causal: bottom-right, keys >= 64 queries) and unmasked, in the order
        # heads, requests, tokens, keys, mask; unmasked may have fewer keys than queries.
        {"heads": [16], "tokens": [256], "requests": [4], "keys_per_request": [64, 1024], "causal": [True, False]},
        {"heads": [8], "tokens": [256], "requests": [4], "keys_per_request": [16], "causal": [False]},
        {"heads": [8], "tokens": [100], "requests": [1], "causal": [False]},
    ]
    sweep = {"schema": 1, "name": "t", "attention": {"dense_mha": {"shapes": groups}}}
    assert listed_names(json.dumps(sweep), tmp_path) == [
        "dense_mha/H:16/reqs:1/tokens:256",
        "dense_mha/H:16/reqs:4/tokens:256",
        "dense_mha/H:16/reqs:4/tokens:256/keys:64",
        "dense_mha/H:16/reqs:4/tokens:256/keys:64/mask:none",
        "dense_mha/H:16/reqs:4/tokens:256/keys:1024",
        "dense_mha/H:16/reqs:4/tokens:256/keys:1024/mask:none",
        "dense_mha/H:8/reqs:4/tokens:256/keys:16/mask:none",
        "dense_mha/H:8/reqs:1/tokens:100/mask:none",
    ]


def test_the_attention_sweep_has_the_dense_heads_and_key_shapes():
    r = run("--sweep", "attention", "--no-host-caps", "--benchmark_list_tests=true")
    assert r.returncode == 0, r.stderr
    names = [line.removesuffix("/manual_time") for line in r.stdout.splitlines() if line.startswith("dense_mha/")]
    assert len(names) == len(set(names))
    for name in ["dense_mha/H:128/reqs:1/tokens:4096", "dense_mha/H:16/reqs:1/tokens:4096",
                 "dense_mha/H:32/reqs:1/tokens:4096", "dense_mha/H:64/reqs:1/tokens:4096",
                 "dense_mha/H:128/reqs:4/tokens:4096/keys:1024/mask:none",
                 "dense_mha/H:128/reqs:4/tokens:4096/keys:4096/mask:none",
                 "dense_mha/H:128/reqs:1/tokens:1024/keys:8192"]:
        assert name in names, names


def test_cuda_by_name_without_a_usable_gpu_is_a_usage_error():
    r = subprocess.run([BIN, "--backend", "cuda", "--sweep", "quick", "--benchmark_list_tests=true"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 0:
        pytest.skip("the CUDA backend is available here")
    assert r.returncode == 2, r.stdout + r.stderr  # as mla-check --backend cuda
    assert "--backend cuda: no usable CUDA device" in r.stderr


def test_pack_block_sizes_make_one_benchmark_each(tmp_path):
    sweep = tmp_path / "s.json"
    sweep.write_text(json.dumps({"schema": 1, "name": "t", "pack": {"block_sizes": [64, 61], "tokens": [1024, 4096]}}))
    r = run("--sweep", str(sweep), "--benchmark_list_tests=true")
    assert r.returncode == 0, r.stderr
    assert [line.split("/manual_time")[0] for line in r.stdout.split()] == [
        "pack/B:64/tokens:1024", "pack/B:64/tokens:4096", "pack/B:61/tokens:1024", "pack/B:61/tokens:4096"]
    sweep.write_text(json.dumps({"schema": 1, "name": "t", "pack": {"block_size": 64, "block_sizes": [61],
                                                                     "tokens": [1024]}}))
    r = run("--sweep", str(sweep), "--benchmark_list_tests=true")
    assert r.returncode == 2 and "/pack/block_sizes" in r.stderr and "not both" in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------------
# --list-shapes: the shapes a sweep registers and the models its counters use


def shapes(*args):
    r = run("--list-shapes", "--json", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "mla-bench.shapes/1"
    return doc


def registered(*args):
    r = run("--benchmark_list_tests=true", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def write_sweep(tmp_path, sweep):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep))
    return path


# Small dense shapes covering every case: self-attention (equal and unequal request lengths),
# bottom-right causal with more keys than queries, unmasked with more and with fewer keys than
# queries, a duplicate of a default, in an order that is not sorted.
SMALL_DENSE = {
    "schema": 1, "name": "dense-cases", "repetitions": 1, "min_time_s": 0.001,
    "attention": {"dense_mha": {"shapes": [
        {"heads": [2], "tokens": [50], "requests": [3, 1]},
        {"heads": [2], "tokens": [50], "requests": [3], "causal": [True]},
        {"heads": [2], "tokens": [50], "requests": [3], "keys_per_request": [17, 40], "causal": [True, False]},
        {"heads": [3, 1], "tokens": [48], "requests": [4], "keys_per_request": [5], "causal": [False]},
        {"heads": [1], "tokens": [33], "requests": [1], "keys_per_request": [33, 64]},
    ]}},
}


@pytest.mark.parametrize("sweep", ["quick", "attention", "cache_path"])
def test_the_shapes_are_the_registered_benchmarks(sweep):
    doc = shapes("--sweep", sweep)
    assert [s["run_name"] for s in doc["shapes"]] == registered("--sweep", sweep, "--no-host-caps")
    assert [s["name"] + "/manual_time" for s in doc["shapes"]] == [s["run_name"] for s in doc["shapes"]]
    # Without --no-host-caps the host backend registers exactly the shapes not marked host_capped.
    assert [s["run_name"] for s in doc["shapes"] if not s["host_capped"]] == registered("--sweep", sweep)
    shipped = json.loads((Path(__file__).resolve().parents[2] / "scenarios" / "sweeps" / f"{sweep}.json").read_text())
    assert {k: doc["sweep"][k] for k in ("name", "seed", "repetitions", "min_time_s", "description")} == {
        k: shipped[k] for k in ("name", "seed", "repetitions", "min_time_s", "description")}
    assert doc["sweep"]["source"] == "built-in"
    assert {s["op"] for s in doc["shapes"]} <= {"pack", "gather", "convert", "sparse_mqa", "dense_mha", "forward"}


def test_the_dense_cases_are_named_and_listed_as_registered(tmp_path):
    sweep = write_sweep(tmp_path, SMALL_DENSE)
    doc = shapes("--sweep", sweep)
    assert [s["run_name"] for s in doc["shapes"]] == registered("--sweep", sweep, "--no-host-caps")
    assert [s["name"] for s in doc["shapes"]] == [
        "dense_mha/H:2/reqs:3/tokens:50", "dense_mha/H:2/reqs:1/tokens:50",
        "dense_mha/H:2/reqs:3/tokens:50/keys:17", "dense_mha/H:2/reqs:3/tokens:50/keys:17/mask:none",
        "dense_mha/H:2/reqs:3/tokens:50/keys:40", "dense_mha/H:2/reqs:3/tokens:50/keys:40/mask:none",
        "dense_mha/H:3/reqs:4/tokens:48/keys:5/mask:none", "dense_mha/H:1/reqs:4/tokens:48/keys:5/mask:none",
        "dense_mha/H:1/reqs:1/tokens:33/keys:33", "dense_mha/H:1/reqs:1/tokens:33/keys:64"]
    assert doc["sweep"]["source"] == str(sweep)


def test_list_shapes_creates_no_backend():
    # --backend cuda without a GPU is a usage error for a run; listing shapes needs no backend.
    r = run("--list-shapes", "--json", "--sweep", "quick")
    cuda = subprocess.run([BIN, "--backend", "cuda", "--list-shapes", "--json", "--sweep", "quick"],
                          capture_output=True, text=True, timeout=120)
    assert cuda.returncode == 0, cuda.stderr
    assert cuda.stdout == r.stdout


def test_list_shapes_as_text_and_its_flags():
    r = run("--list-shapes", "--sweep", "quick")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["benchmark", "bytes", "FLOPs"]
    assert [line.split()[0] for line in lines[1:]] == [s["name"] for s in shapes("--sweep", "quick")["shapes"]]
    r = run("--json", "--sweep", "quick")
    assert r.returncode == 2 and "--json requires --list-shapes" in r.stdout + r.stderr
    assert "--list-shapes" in run("--help").stdout


def brute_force_pairs(q_lens, k_lens, causal):
    """Visible (query, key) pairs by enumeration: bottom-right causal is j <= i + nk - nq."""
    return sum(1 for nq, nk in zip(q_lens, k_lens) for i, j in itertools.product(range(nq), range(nk))
               if not causal or j <= i + nk - nq)


DENSE_FLOPS_PER_PAIR = 2 * (192 + 128)  # docs/benchmarks.md


def dense_bytes(h, q_lens, k_lens):
    """docs/benchmarks.md: per query token and head q 192 + out 128 bf16 and lse fp32; per key token
    k_nope and v (256 bf16) per head plus k_pe (64 bf16)."""
    return sum(q_lens) * h * (192 * 2 + 128 * 2 + 4) + sum(k_lens) * (h * 512 + 128)


def test_dense_lengths_and_pairs_count_exactly_the_visible_pairs(tmp_path):
    for s in shapes("--sweep", write_sweep(tmp_path, SMALL_DENSE))["shapes"]:
        p = s["params"]
        q_lens, k_lens = p["query_lens"], p["key_lens"]
        assert len(q_lens) == p["requests"] and sum(q_lens) == p["tokens"] and max(q_lens) - min(q_lens) <= 1
        assert q_lens == sorted(q_lens, reverse=True)   # the longer requests first
        assert k_lens == ([p["keys_per_request"]] * p["requests"] if p["keys_per_request"] else q_lens)
        pairs = brute_force_pairs(q_lens, k_lens, p["causal"])
        assert s["model"]["pairs"] == pairs, s["name"]
        assert s["flops"] == pairs * p["heads"] * DENSE_FLOPS_PER_PAIR
        assert s["bytes"] == dense_bytes(p["heads"], q_lens, k_lens)
        assert s["items"] == p["tokens"]


def test_the_attention_sweeps_models_in_closed_form():
    models = {s["name"]: s for s in shapes("--sweep", "attention")["shapes"]}

    def check(name, h, q_lens, k_lens, pairs):
        s = models[name]
        assert (s["flops"], s["bytes"], s["model"]["pairs"]) == (
            pairs * h * DENSE_FLOPS_PER_PAIR, dense_bytes(h, q_lens, k_lens), pairs), name

    # Causal self-attention: n (n + 1) / 2 per request (docs/benchmarks.md: 8k tokens = 33,558,528 pairs).
    check("dense_mha/H:128/reqs:1/tokens:8192", 128, [8192], [8192], 33_558_528)
    check("dense_mha/H:16/reqs:1/tokens:4096", 16, [4096], [4096], 4096 * 4097 // 2)
    # Unmasked: nq x nk per request.
    check("dense_mha/H:128/reqs:4/tokens:4096/keys:1024/mask:none", 128, [1024] * 4, [1024] * 4, 4 * 1024 * 1024)
    check("dense_mha/H:128/reqs:4/tokens:4096/keys:4096/mask:none", 128, [1024] * 4, [4096] * 4, 4 * 1024 * 4096)
    # Prefix-cache hit: 1024 new tokens after 7168 cached see every cached key plus the causal part.
    check("dense_mha/H:128/reqs:1/tokens:1024/keys:8192", 128, [1024], [8192], 1024 * 7168 + 1024 * 1025 // 2)
    # Sparse MQA: 2 H K 1088 FLOPs per query token; 656 bytes per distinct entry plus (1152 + 1028) H per token.
    s = models["sparse_mqa/batch:128/q:2/H:128/K:2048/seq:4096"]
    distinct = s["model"]["distinct_entries"]
    assert s["items"] == 256 and s["flops"] == 256 * 128 * 2048 * 2 * 1088
    assert s["bytes"] == 656 * distinct + 256 * 128 * (1152 + 1028)
    assert 2048 < distinct <= 128 * 4096   # distinct entries of 256 tokens' picks within 128 requests of 4096


def test_the_distinct_entries_are_the_gpu_runs(tmp_path):
    # The committed GPU run of the attention sweep (same seed) names its distinct entries in each
    # sparse label: the export draws the same picks without a GPU.
    results = Path(__file__).resolve().parents[2] / "docs" / "results" / "2026-11-30-h200-k" / "attention.json"
    if not results.is_file():
        pytest.skip("committed results not present")
    labels = {e["run_name"]: e["label"] for e in json.loads(results.read_text())["benchmarks"]
              if e["run_name"].startswith("sparse_mqa/") and e.get("label")}
    exported = {s["run_name"]: s["model"]["distinct_entries"] for s in shapes("--sweep", "attention")["shapes"]
                if s["op"] == "sparse_mqa"}
    assert labels and set(labels) <= set(exported)
    for run_name, label in labels.items():
        assert f"bytes=656*{exported[run_name]} distinct entries" in label, (run_name, label)


COUNTED = {
    "schema": 1, "name": "counted", "repetitions": 1, "min_time_s": 0.001,
    "pack": {"block_sizes": [64, 61], "tokens": [300]},
    "gather": {"block_sizes": [64], "seq_starts": [False, True], "rows": [200]},
    "convert": {"block_size": 64, "topk": [128], "rows": [16]},
    "attention": {
        "sparse_mqa": {"block_size": 64, "shapes": [
            {"batch": [2], "query_tokens": [2], "heads": [4], "topk": [64, 512], "seq_len": [300]}]},
        "dense_mha": SMALL_DENSE["attention"]["dense_mha"],
        "forward": {"batches": [{"name": "mixed", "heads": [16], "topk": [128], "seq_lens": [32, 40, 48, 56],
                                 "query_lens": [1, 1, 5, 5]},
                                {"name": "decodes", "heads": [16], "topk": [64], "decode_threshold": 2,
                                 "requests": [{"count": 3, "seq_len": 100, "query_len": 2}]}]}},
}


def test_the_export_is_what_the_counters_count(tmp_path):
    """A host run of every kind of shape: its counters (bytes_per_second, items_per_second,
    flops_per_second, flop_per_byte) and labels give back the export's bytes, items and FLOPs."""
    sweep = write_sweep(tmp_path, COUNTED)
    out = tmp_path / "bench.json"
    r = run("--sweep", str(sweep), "--benchmark_repetitions=1", f"--benchmark_out={out}", "--benchmark_out_format=json")
    assert r.returncode == 0, r.stderr
    rows = {e["run_name"]: e for e in json.loads(out.read_text())["benchmarks"]}
    doc = shapes("--sweep", sweep)
    assert sorted(rows) == sorted(s["run_name"] for s in doc["shapes"])
    for s in doc["shapes"]:
        row = rows[s["run_name"]]
        assert not row.get("error_occurred"), row
        seconds = row["real_time"] * 1e-6   # time_unit us: the mean call time of the one repetition
        assert row["time_unit"] == "us"
        assert row["items_per_second"] * seconds == pytest.approx(s["items"], rel=1e-9), s["name"]
        if s["bytes"] is not None:
            assert row["bytes_per_second"] * seconds == pytest.approx(s["bytes"], rel=1e-9), s["name"]
        if s["op"] in ("sparse_mqa", "dense_mha"):
            assert row["flop_per_byte"] == pytest.approx(s["flops"] / s["bytes"], rel=1e-12), s["name"]
            assert row["flops_per_second"] * seconds == pytest.approx(s["flops"], rel=1e-9), s["name"]
        if s["op"] == "sparse_mqa":
            assert f"bytes=656*{s['model']['distinct_entries']} distinct entries" in row["label"], row["label"]
        if s["op"] == "dense_mha":
            assert f" {s['model']['pairs']} pairs" in row["label"], row["label"]
        if s["op"] == "forward":
            # The step's FLOPs are those of the launches it recorded; the label says when they differ from the model.
            assert "differ from the model" not in row["label"], row["label"]
            assert row["flops_per_second"] * seconds == pytest.approx(s["flops"], rel=1e-9), s["name"]
            m = s["model"]
            assert s["flops"] == m["sparse_attention_flops"] + m["dense_attention_flops"] + m["gemm_flops"]
            assert m["sparse_tokens"] + m["dense_tokens"] == s["items"] == sum(s["params"]["query_lens"])
        if s["op"] in ("pack", "gather", "convert"):
            assert row["label"] == s["label"] and s["flops"] == 0
    packs = [s for s in doc["shapes"] if s["op"] == "pack"]
    assert [(s["params"]["block_size"], s["bytes"]) for s in packs] == [(64, 300 * 1816), (61, 300 * 1816)]
    converts = [s for s in doc["shapes"] if s["op"] == "convert"]
    assert [(s["items"], s["bytes"]) for s in converts] == [(16 * 128, 16 * 128 * 8 + 16 * 8)]


# ---- an adapter that lacks gemm ---------------------------------------------------------------

SPARSE_ONLY = Path(__file__).resolve().parents[1] / "adapters" / "sparse_mqa_only.py"

# One shape of each kind: sparse MQA (the adapter's one operation), dense MHA, a forward step
# (needs gemm) and a pack (the cache path), small enough for the host.
LACKING = {
    "schema": 1, "name": "lacking", "repetitions": 1, "min_time_s": 0.001,
    "pack": {"tokens": [256]},
    "attention": {
        "sparse_mqa": {"block_size": 64, "shapes": [{"batch": [2], "query_tokens": [1], "heads": [16],
                                                     "topk": [128], "seq_len": [256]}]},
        "dense_mha": {"shapes": [{"heads": [2], "tokens": [50], "requests": [1]}]},
        "forward": {"batches": [{"name": "mixed", "heads": [16], "topk": [128], "seq_lens": [32, 40, 48, 56],
                                 "query_lens": [1, 1, 5, 5]}]}},
}


def test_an_adapter_without_gemm_is_timed_against_the_harness_gemm_ceiling(tmp_path):
    """The GEMM ceiling is the device's: an adapter without gemm (and without --adapter-fallback)
    has it measured by the harness's own backend of its device, named in the context; its sparse
    MQA is timed against it, and the shapes of the operations it lacks are skipped with the reason."""
    sweep = write_sweep(tmp_path, LACKING)
    out = tmp_path / "bench.json"
    r = subprocess.run([BIN, "--backend", f"python:{SPARSE_ONLY}", "--sweep", str(sweep), f"--benchmark_out={out}",
                        "--benchmark_out_format=json"], capture_output=True, text=True, timeout=300)
    if "no Python backend" in r.stderr:
        pytest.skip("this build has no Python adapter backend")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    ctx = doc["context"]
    assert ctx["mla_backend"] == "python" and ctx["mla_backend_adapter_operations"] == "sparse_mqa"
    assert ctx["mla_gemm_ceiling_backend"] == "host"
    assert float(ctx["mla_gemm_flops_per_second"]) > 0
    assert "on the harness's own host backend" in ctx["mla_gemm_method"], ctx["mla_gemm_method"]
    assert float(ctx["mla_copy_bw_bytes_per_second"]) > 0
    rows = {e["run_name"]: e for e in doc["benchmarks"]}
    assert sorted(rows) == sorted(s["run_name"] for s in shapes("--sweep", sweep)["shapes"])
    for name, row in rows.items():
        op = name.split("/")[0]
        if op == "sparse_mqa":
            assert not row.get("error_occurred"), row
            assert row["pct_of_gemm_rate"] > 0, row
        else:  # pack and dense_mha lack their own operation; the forward step, one of those it calls
            lacking = op if op != "forward" else "(pack|gather|convert|gemm|dense_mha|merge)"
            assert row.get("error_occurred"), row
            assert re.match(rf"unsupported: the adapter .* has no {lacking} operation", row["error_message"]), row


def test_the_harness_backends_measure_their_own_gemm_ceiling(tmp_path):
    sweep = write_sweep(tmp_path, {k: v for k, v in LACKING.items() if k != "pack"})
    out = tmp_path / "bench.json"
    r = run("--sweep", str(sweep), "--benchmark_filter=^sparse_mqa/", f"--benchmark_out={out}",
            "--benchmark_out_format=json")
    assert r.returncode == 0, r.stderr
    ctx = json.loads(out.read_text())["context"]
    assert ctx["mla_gemm_ceiling_backend"] == "host"
    assert "on the harness's own" not in ctx["mla_gemm_method"], ctx["mla_gemm_method"]
