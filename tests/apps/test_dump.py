"""mla-check --dump DIR: every check's inputs, outputs and reference results as .npy files with an
index per scenario (docs/dump.md), loaded here with NumPy; one check recomputed independently from
the dumped inputs (the conversion of docs/semantics.md §3). The binary comes from $MLA_CHECK_BIN."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from built_tools import skip_unless_built

np = pytest.importorskip("numpy")

BIN = os.environ.get("MLA_CHECK_BIN", "build/bin/mla-check")
INT32_MAX = 2**31 - 1


binary_exists = skip_unless_built(BIN)


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def pinned_dump(tmp_path_factory):
    out = tmp_path_factory.mktemp("dump")
    r = run("--backend", "host", "--scenario", "convert_pinned_indices", "--dump", str(out), "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    return out / "convert_pinned_indices"


def arrays_of(base, check):
    """{(role, name): array} of one check of the index, each loaded and checked against its entry."""
    found = {}
    for a in check["arrays"]:
        arr = np.load(base / a["file"])
        assert arr.dtype == np.dtype(a["dtype"]), a
        assert list(arr.shape) == a["shape"], a
        assert arr.nbytes == a["bytes"], a
        found[(a["role"], a["name"])] = arr
    return found


def convert_in_numpy(req_id, indices, table, p):
    """docs/semantics.md §3, element by element, from the dumped inputs and parameters."""
    B, width = int(p["block_size"]), int(p["block_table_width"])
    W, rank, I = int(p["dcp_world_size"]), int(p["dcp_rank"]), int(p["dcp_interleave"])
    prefill_req, ws = p.get("prefill_req"), p.get("prefill_workspace_starts")
    rows, K = indices.shape
    out = np.full((rows, K), -1, dtype=np.int32)
    for t in range(rows):
        r = int(req_id[t])
        if r < 0 or r >= table.shape[0]:
            continue  # the whole row is invalid
        pr = -1 if prefill_req is None else int(prefill_req[t])
        if prefill_req is not None and pr >= len(ws):
            continue
        for j in range(K):
            tok = int(indices[t, j])
            if tok < 0:
                continue
            if pr >= 0:  # a prefill-workspace row: no table, no DCP ownership
                v = int(ws[pr]) + tok
                out[t, j] = v if v <= INT32_MAX else -1
                continue
            if W > 1:
                if (tok // I) % W != rank:
                    continue
                tok = (tok // (W * I)) * I + tok % I
            col = tok // B
            if col >= width:
                continue
            phys = int(table[r, col])
            slot = phys * B + tok % B
            if phys >= 0 and slot <= INT32_MAX:
                out[t, j] = slot
    return out, (out != -1).sum(axis=1).astype(np.int32)


def test_the_index_lists_every_check_with_its_verdict(pinned_dump):
    index = json.loads((pinned_dump / "index.json").read_text())
    assert index["schema"] == "mla-harness.dump/1"
    assert index["scenario"] == "convert_pinned_indices"
    ids = [c["id"] for c in index["checks"]]
    assert "pack" in ids and "layout" in ids and "convert/pinned_all" in ids
    assert "convert/pinned_prefill_workspace_dcp2/rank1" in ids
    assert all(c["verdict"] == "PASS" for c in index["checks"])
    total = sum(a["bytes"] for c in index["checks"] for a in c["arrays"] if not a.get("same_as_earlier"))
    assert total == index["bytes_written"]


def test_the_convert_check_recomputed_in_numpy(pinned_dump):
    index = json.loads((pinned_dump / "index.json").read_text())
    converts = [c for c in index["checks"] if c["check"] == "convert"]
    assert len(converts) == 1 + 1 + 1 + 1 + 2 + 4  # six cases, two of them over 2 and 4 ranks
    for check in converts:
        a = arrays_of(pinned_dump, check)
        params = dict(check["params"])
        if ("input", "prefill_req") in a:
            params["prefill_req"] = a[("input", "prefill_req")]
            params["prefill_workspace_starts"] = a[("input", "prefill_workspace_starts")]
        out, counts = convert_in_numpy(a[("input", "req_id")], a[("input", "indices")], a[("input", "block_table")], params)
        assert np.array_equal(out, a[("reference", "out")]), check["id"]
        assert np.array_equal(counts, a[("reference", "valid_count")]), check["id"]
        assert np.array_equal(out, a[("output", "out")]), check["id"]
        assert np.array_equal(counts, a[("output", "valid_count")]), check["id"]


def test_pinned_values_reach_the_dump_as_written(pinned_dump):
    scenario = json.loads((Path(__file__).resolve().parents[2] / "scenarios/suite/convert_pinned_indices.json").read_text())
    pinned = scenario["convert"][0]
    check = next(c for c in json.loads((pinned_dump / "index.json").read_text())["checks"] if c["id"] == "convert/pinned_all")
    a = arrays_of(pinned_dump, check)
    assert a[("input", "req_id")].tolist() == pinned["req_id"]
    K = scenario["model"]["topk"]
    assert a[("input", "indices")].tolist() == [row + [-1] * (K - len(row)) for row in pinned["indices"]]
    table = a[("input", "block_table")]
    for r, row in enumerate(scenario["block_table"]["rows"]):
        assert table[r, : len(row)].tolist() == row
    # Exactly the capacity (width * B = 80) converts to nothing.
    assert int(check["params"]["block_table_width"]) * int(check["params"]["block_size"]) == 80
    assert (a[("output", "out")][a[("input", "indices")] == 80] == -1).all()


def test_bf16_arrays_are_their_bits(pinned_dump):
    index = json.loads((pinned_dump / "index.json").read_text())
    gather = next(c for c in index["checks"] if c["id"] == "gather/across_pinned_pages")
    entry = next(a for a in gather["arrays"] if a["role"] == "output" and a["name"] == "dst")
    assert entry["element"] == "bf16" and entry["dtype"] == "<u2"
    dst = np.load(pinned_dump / entry["file"])
    values = (dst.astype(np.uint32) << 16).view(np.float32)
    assert values.shape == (50, 576)
    assert np.isfinite(values[0]).all()  # request 0's position 30: a cached token
    assert np.isnan(values[10:20]).all(axis=1).any()  # request 1 past its pages: NaN rows (§2)


def test_the_cap_leaves_arrays_out_and_says_so(tmp_path):
    cap = 200_000
    r = run("--backend", "host", "--scenario", "vllm_mixed_small", "--dump", str(tmp_path), "--dump-max-bytes", str(cap),
            "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--dump:" in r.stderr and "--dump-max-bytes" in r.stderr
    base = tmp_path / "vllm_mixed_small"
    index = json.loads((base / "index.json").read_text())
    assert index["bytes_written"] <= cap
    assert any(c["left_out"] for c in index["checks"])
    on_disk = sum(p.stat().st_size for p in base.rglob("*.npy"))
    assert on_disk <= cap + 128 * sum(1 for _ in base.rglob("*.npy"))  # the data plus each file's header


def test_a_dump_directory_that_cannot_be_made_is_bad_usage(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run("--backend", "host", "--scenario", "vllm_mixed_small", "--dump", str(blocker / "sub"), "--quiet")
    assert r.returncode == 2
    assert "--dump" in r.stderr
