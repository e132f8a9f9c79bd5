"""mla-bench's dcp sweep (docs/dcp.md, "Timing the step"): the shapes it registers and exports
(--list-shapes --json), the rules of its sweep-file section, and a run of a host-sized sweep
(tests/apps/sweeps/dcp_tiny.json) on the host backend: rank processes with the socket transport,
each phase timed per rank. The binary comes from $MLA_BENCH_BIN (set by CTest)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from built_tools import skip_unless_built

BIN = os.environ.get("MLA_BENCH_BIN", "build/bin/mla-bench")
TINY = Path(__file__).resolve().parent / "sweeps" / "dcp_tiny.json"


binary_exists = skip_unless_built(BIN)


def run(*args, timeout=300):
    return subprocess.run([BIN, "--backend", "host", *args], capture_output=True, text=True, timeout=timeout)


def test_the_dcp_sweep_is_flashmlas_decode_shape_at_32k_to_128k_on_1_to_8_gpus():
    r = run("--sweep", "dcp", "--list-shapes", "--json")
    assert r.returncode == 0, r.stderr
    shapes = json.loads(r.stdout)["shapes"]
    assert {s["op"] for s in shapes} == {"dcp"}
    got = {(s["params"]["ranks"], s["params"]["seq_len"]) for s in shapes}
    assert got == {(r, l) for r in (1, 2, 4, 8) for l in (32768, 65536, 131072)}
    assert len(shapes) == 12
    for s in shapes:
        p = s["params"]
        assert (p["batch"], p["query_tokens"], p["heads"], p["topk"]) == (128, 2, 128, 2048)
        assert s["name"] == f"dcp/ranks:{p['ranks']}/batch:128/q:2/H:128/K:2048/seq:{p['seq_len']}"
        assert s["items"] == 256
        assert s["bytes"] is None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("dcp") / "tiny.json"
    r = run("--sweep", str(TINY), f"--benchmark_out={out}", "--benchmark_out_format=json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())


def test_each_rank_count_runs_with_its_phases_timed_per_rank(tiny):
    runs = {b["run_name"]: b for b in tiny["benchmarks"] if b.get("run_type") == "iteration"}
    one = runs["dcp/ranks:1/batch:2/q:2/H:16/K:128/seq:4096/manual_time"]
    two = runs["dcp/ranks:2/batch:2/q:2/H:16/K:128/seq:4096/manual_time"]
    assert "error_occurred" not in one and "error_occurred" not in two
    assert tiny["context"]["mla_dcp_transport"] == "socket"
    for b, ranks in ((one, 1), (two, 2)):
        assert b["ranks"] == ranks
        assert b["attention_s"] > 0 and b["communication_s"] > 0 and b["merge_s"] >= 0
        # The iteration is the slowest rank's attention + communication + merge: no rank's own
        # phases add up to more.
        step_s = b["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        for r in range(ranks):
            assert b[f"r{r}_attention_s"] > 0
            assert b[f"r{r}_attention_s"] + b[f"r{r}_communication_s"] <= step_s * (1 + 1e-6)
        assert f"r{ranks}_attention_s" not in b
    assert one["speedup_vs_1_gpu"] == 1
    assert two["speedup_vs_1_gpu"] > 0


@pytest.mark.parametrize("change, message", [
    (lambda d: d["dcp"].update(interleave=3), "does not divide block_size"),
    (lambda d: d.update(pack={"tokens": [64]}), "holds nothing else"),
    (lambda d: d["dcp"].update(ranks=[]), None),
])
def test_sweep_file_rules(tmp_path, change, message):
    doc = json.loads(TINY.read_text())
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    r = run("--sweep", str(path), "--list-shapes")
    assert r.returncode == 2, r.stdout + r.stderr
    if message:
        assert message in r.stderr
