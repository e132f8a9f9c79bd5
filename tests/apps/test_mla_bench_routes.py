"""mla-bench's routes sweep (docs/benchmarks.md, "Routes"): the shapes it registers and exports
(--list-shapes --json), their models, the rules of its sweep-file section, and a run of its
smallest shapes on the host backend. The binary comes from $MLA_BENCH_BIN (set by CTest)."""
import json
import os
import subprocess

import pytest

from built_tools import skip_unless_built

BIN = os.environ.get("MLA_BENCH_BIN", "build/bin/mla-bench")


binary_exists = skip_unless_built(BIN)


def run(*args, timeout=120):
    return subprocess.run([BIN, "--backend", "host", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def routes():
    r = run("--sweep", "routes", "--list-shapes", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_each_prefill_length_is_timed_through_both_routes_up_to_k_and_sparse_above(routes):
    shapes = [s for s in routes["shapes"] if s["op"] == "route"]
    assert len(shapes) == len(routes["shapes"])
    by_name = {s["name"]: s for s in shapes}
    for topk, lengths in ((512, [1, 16, 64, 256, 512, 1024]), (2048, [1, 16, 64, 256, 1024, 2048, 4096])):
        for heads in (16, 32, 64, 128):
            for p in lengths:
                dense = f"route/dense/H:{heads}/K:{topk}/prefill:{p}"
                sparse = f"route/sparse/H:{heads}/K:{topk}/prefill:{p}"
                assert sparse in by_name
                if p <= topk:
                    assert by_name[dense]["pair"] == sparse
                    assert by_name[sparse]["pair"] == dense
                else:
                    assert dense not in by_name
                    assert by_name[sparse]["pair"] is None
    assert len(shapes) == 4 * (5 + 6) + 4 * (6 + 7)


def test_a_route_shape_is_the_mixed_batch_and_its_model(routes):
    by_name = {s["name"]: s for s in routes["shapes"]}
    dense = by_name["route/dense/H:16/K:512/prefill:64"]
    sparse = by_name["route/sparse/H:16/K:512/prefill:64"]
    for shape, route in ((dense, "dense"), (sparse, "sparse")):
        prm = shape["params"]
        assert prm["route"] == route
        assert prm["prefill_len"] == 64 and prm["prefills"] == 1
        assert prm["heads"] == 16 and prm["topk"] == 512 and prm["block_size"] == 64
        assert prm["decode_threshold"] == 2
        assert prm["seq_lens"] == [4096] * 16 + [64]
        assert prm["query_lens"] == [2] * 16 + [64]
        assert shape["items"] == 32 + 64
    # bench_attention_ops.h's model, in closed form: 2 H K 1088 per sparse token plus the
    # absorption and W_UV (2 x 2 H 128 512); dense prefill rows: K and V up-projections
    # (2 x 2 H 512 128 per key row) and 2 H 320 per causal pair (64 x 65 / 2).
    H, K, proj = 16, 512, 2 * 16 * 128 * 512
    assert dense["model"]["sparse_tokens"] == 32 and dense["model"]["dense_tokens"] == 64
    assert dense["flops"] == 32 * H * K * 2176 + 32 * 2 * proj + 64 * 2 * proj + 64 * 65 // 2 * H * 640
    assert sparse["model"]["sparse_tokens"] == 96 and sparse["model"]["dense_tokens"] == 0
    assert sparse["flops"] == 96 * H * K * 2176 + 96 * 2 * proj


def test_the_host_runs_the_smallest_shapes_of_both_routes(routes):
    run_on_host = {s["name"] for s in routes["shapes"] if not s["host_capped"]}
    for name in ("route/dense/H:16/K:512/prefill:1", "route/sparse/H:16/K:512/prefill:1",
                 "route/dense/H:16/K:512/prefill:16", "route/sparse/H:16/K:512/prefill:16"):
        assert name in run_on_host
    assert "route/sparse/H:128/K:2048/prefill:4096" not in run_on_host


def sweep_file(tmp_path, routes_section):
    path = tmp_path / "routes.json"
    path.write_text(json.dumps({"schema": 1, "name": "r", "attention": {"routes": routes_section}}))
    return str(path)


BASE = {"decode_threshold": 2, "decodes": [{"count": 2, "seq_len": 256, "query_len": 2}],
        "prefill_lens": [1, 16], "heads": [16], "topk": [128]}


@pytest.mark.parametrize("change, where, problem", [
    ({"prefill_lens": [2]}, "/attention/routes", "a prefill of 2 tokens would be split as a decode"),
    ({"decodes": [{"count": 1, "seq_len": 256, "query_len": 2}, {"count": 1, "seq_len": 256, "query_len": 1}]},
     "/attention/routes/decodes", "not every request is a decode"),
    ({"decodes": [{"count": 1, "seq_len": 8, "query_len": 16}], "decode_threshold": 16},
     "/attention/routes/decodes", "query_len 16 > seq_len 8"),
    ({"decodes": [], "prefill_lens": [1]}, "/attention/routes", "would be split as a decode"),
    ({"prefill_topk_multiple": [1]}, "/attention/routes", "prefill_topk_multiple"),
    ({"prefills": 0}, "/attention/routes/prefills", ""),
])
def test_bad_routes_sections_exit_2_naming_the_field(tmp_path, change, where, problem):
    r = run("--sweep", sweep_file(tmp_path, {**BASE, **change}), "--list-shapes")
    assert r.returncode == 2, r.stdout
    assert f"at {where}" in r.stderr
    assert problem in r.stderr


def test_prefill_lengths_are_merged_with_the_multiples_of_k(tmp_path):
    r = run("--sweep", sweep_file(tmp_path, {**BASE, "prefill_lens": [128, 16, 1], "prefill_topk_multiples": [1, 3],
                                             "prefills": 2}), "--list-shapes", "--json")
    assert r.returncode == 0, r.stderr
    names = [s["name"] for s in json.loads(r.stdout)["shapes"]]
    assert names == ["route/dense/H:16/K:128/prefill:1", "route/sparse/H:16/K:128/prefill:1",
                     "route/dense/H:16/K:128/prefill:16", "route/sparse/H:16/K:128/prefill:16",
                     "route/dense/H:16/K:128/prefill:128", "route/sparse/H:16/K:128/prefill:128",
                     "route/sparse/H:16/K:128/prefill:384"]
    shape = json.loads(r.stdout)["shapes"][-1]
    assert shape["params"]["seq_lens"] == [256, 256, 384, 384]
    assert shape["params"]["prefills"] == 2


def test_the_routes_run_on_the_host_and_route_as_named(tmp_path):
    out = tmp_path / "out.json"
    r = run("--sweep", sweep_file(tmp_path, BASE), "--benchmark_repetitions=1", f"--benchmark_out={out}",
            "--benchmark_out_format=json", timeout=300)
    assert r.returncode == 0, r.stderr
    rows = {b["run_name"]: b for b in json.loads(out.read_text())["benchmarks"]}
    assert len(rows) == 4
    for p in (1, 16):
        dense = rows[f"route/dense/H:16/K:128/prefill:{p}/manual_time"]
        sparse = rows[f"route/sparse/H:16/K:128/prefill:{p}/manual_time"]
        assert not dense.get("error_occurred") and not sparse.get("error_occurred")
        # The label says how the step routed: the decodes' 4 tokens sparse, the prefill dense or not.
        assert dense["label"].startswith(f"4 sparse + {p} dense tok")
        assert sparse["label"].startswith(f"{4 + p} sparse + 0 dense tok")
