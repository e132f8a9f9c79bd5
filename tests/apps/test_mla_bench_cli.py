"""mla-bench's handling of bad input (flags and sweep files): exit 2 with a message naming the
problem, in the one style of every input file, `FILE: at /json/pointer: problem`, never an abort
or a hang. The binary comes from $MLA_BENCH_BIN (set by CTest when mla-bench is built); nothing
here runs a benchmark."""
import json
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


@pytest.mark.parametrize("value", ["-1", "4294967297", "abc", "1.5"])
def test_a_lead_outside_its_range_is_refused(value):
    r = run("--sweep", "quick", "--lead-cycles", value)
    assert r.returncode == 2
    assert "--lead-cycles" in r.stderr + r.stdout


@pytest.mark.parametrize("value", ["0", "4294967296"])
def test_a_lead_at_its_bounds_is_accepted(value):
    r = run("--sweep", "quick", "--lead-cycles", value, "--benchmark_filter=^no benchmark$")
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
     'repetitions, min_time_s, host, pack, gather, convert, attention'),
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
    assert "--backend cuda: the CUDA backend is not available" in r.stderr


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

