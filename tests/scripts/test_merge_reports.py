"""scripts/merge_reports.py: a selection of the host suite run as 3 shards (mla-check --shard I/3),
merged, equals the unsharded run's report apart from timings; the refusals of overlapping, missing,
foreign and inconsistent shards. mla-check comes from $MLA_CHECK_BIN (set by CTest), else build*/bin.

The selection (SUBSET) holds one or more scenarios of every family, PASS and SKIP verdicts, the
simulated dcp check and attention, and runs in seconds; MLA_SHARD_MERGE_SUITE=all runs the whole
suite instead (minutes)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MERGE = ROOT / "scripts" / "merge_reports.py"


def mla_check() -> Path | None:
    given = os.environ.get("MLA_CHECK_BIN")
    if given:
        return Path(given) if Path(given).exists() else None
    built = sorted(ROOT.glob("build*/bin/mla-check"), key=lambda p: p.stat().st_mtime)
    return built[-1] if built else None


SUBSET = ("pack_fixed_scales", "gather_block_size_4", "gather_pages_shuffled", "gather_zero_length_requests",
          "convert_dcp_2_ranks", "convert_invalid_indices", "layout_dtype_fp8", "batch_pinned_decode_count",
          "attn_dcp_2_ranks_interleave_64", "attn_dcp_4_ranks_interleave_8", "attn_merge_edge_rows",
          "attn_force_sparse", "attn_small_prefill_k128", "mtp_decode_threshold_2", "vllm_mixed_small",
          "gpu_attn_mixed_small_k128", "gpu_attn_small_prefill_k128")


def selection() -> list[str]:
    if os.environ.get("MLA_SHARD_MERGE_SUITE") == "all":
        return []
    return [arg for name in SUBSET for arg in ("--scenario", name)]


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(mla_check()), "--backend", "host", "--jobs", "2", "--quiet", *selection(), *args],
                          capture_output=True, text=True, timeout=1800)


def run_merge(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MERGE), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The selection once unsharded and once as 3 shards."""
    if mla_check() is None:
        pytest.skip("mla-check is not built (MLA_CHECK_BIN)")
    d = tmp_path_factory.mktemp("shards")
    full = d / "full.json"
    p = run_check("--report", str(full))
    assert p.returncode == 0, p.stdout + p.stderr
    shards = []
    for i in (1, 2, 3):
        path = d / f"shard{i}.json"
        p = run_check("--shard", f"{i}/3", "--report", str(path))
        assert p.returncode == 0, p.stdout + p.stderr
        shards.append(path)
    return d, full, shards


TIMINGS = {"duration_s", "started_at"}
# Provenance that says how and where a run was made, not what it found.
RUN_CIRCUMSTANCES = {"argv", "host", "merged_from"}


def without_timings(report: dict) -> dict:
    r = copy.deepcopy(report)
    for key in TIMINGS | RUN_CIRCUMSTANCES:
        r["provenance"].pop(key, None)
    for s in r["scenarios"]:
        s.pop("duration_s")
        for c in s["checks"]:
            c.pop("duration_s")
    return r


def test_three_shards_merge_into_the_unsharded_report(runs, tmp_path):
    _, full, shards = runs
    merged = tmp_path / "merged.json"
    p = run_merge(*shards, "--out", merged)
    assert p.returncode == 0, p.stderr
    want, got = json.loads(full.read_text()), json.loads(merged.read_text())
    assert [s["name"] for s in got["scenarios"]] == [s["name"] for s in want["scenarios"]]
    assert without_timings(got) == without_timings(want)
    # Each shard holds part of the suite, and the merged provenance says which shard ran what.
    sizes = [len(json.loads(s.read_text())["scenarios"]) for s in shards]
    assert all(0 < n < len(want["scenarios"]) for n in sizes) and sum(sizes) == len(want["scenarios"])
    assert [m["index"] for m in got["provenance"]["merged_from"]] == [1, 2, 3]
    assert "--shard" not in got["provenance"]["argv"]


def test_the_order_of_the_shards_on_the_command_line_does_not_matter(runs, tmp_path):
    _, _, shards = runs
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_merge(*shards, "--out", a).returncode == 0
    assert run_merge(*reversed(shards), "--out", b).returncode == 0
    assert without_timings(json.loads(a.read_text())) == without_timings(json.loads(b.read_text()))


def edited(src: Path, dst: Path, change) -> Path:
    doc = json.loads(src.read_text())
    change(doc)
    dst.write_text(json.dumps(doc))
    return dst


def test_refusals(runs, tmp_path):
    _, full, shards = runs

    def refused(*args, message):
        p = run_merge(*args, "--out", tmp_path / "out.json")
        assert p.returncode == 3, p.stdout + p.stderr
        assert message in p.stderr, p.stderr
        assert not (tmp_path / "out.json").exists()

    refused(shards[0], shards[1], shards[0], message="shard 1/3 is given twice")
    refused(shards[0], shards[1], message="shards missing: 3/3")
    refused(full, shards[1], message="was not run with --shard")
    moved = json.loads(shards[1].read_text())["scenarios"][0]
    overlap = edited(shards[0], tmp_path / "overlap.json", lambda d: d["scenarios"].append(moved))
    refused(overlap, shards[1], shards[2], message=f"the shards overlap: scenario {moved['name']}")
    lost = edited(shards[1], tmp_path / "lost.json", lambda d: d["scenarios"].pop(0))
    refused(shards[0], lost, shards[2], message=f"are in no shard's report: {moved['name']}")
    other_n = edited(shards[2], tmp_path / "n4.json", lambda d: d["provenance"]["shard"].update(count=4))
    refused(shards[0], shards[1], other_n, message="partition into 4 shards")
    other_sel = edited(shards[2], tmp_path / "sel.json", lambda d: d["provenance"]["shard"]["selection"].pop())
    refused(shards[0], shards[1], other_sel, message="different selections")
    other_git = edited(shards[2], tmp_path / "git.json", lambda d: d["provenance"].update(git_revision="0123abcd"))
    refused(shards[0], shards[1], other_git, message="provenance.git_revision")
    other_seed = edited(shards[2], tmp_path / "seed.json", lambda d: d["provenance"].update(seed_override=7))
    refused(shards[0], shards[1], other_seed, message="provenance.seed_override")
    refused(shards[0], shards[1], shards[2], tmp_path / "absent.json", message="not found")
    p = run_merge(*shards, "--out", shards[0])
    assert p.returncode == 3 and "never overwritten" in p.stderr


def test_the_summary_is_recomputed(runs, tmp_path):
    _, full, shards = runs
    failing = json.loads(shards[1].read_text())
    failing["scenarios"][0]["verdict"] = "FAIL"
    failing["scenarios"][0]["checks"][0]["verdict"] = "FAIL"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(failing))
    merged = tmp_path / "merged.json"
    assert run_merge(shards[0], bad, shards[2], "--out", merged).returncode == 0
    s = json.loads(merged.read_text())["summary"]
    want = json.loads(full.read_text())["summary"]
    assert s["verdict"] == "FAIL"
    assert s["scenarios_failed"] == want["scenarios_failed"] + 1
    assert s["by_verdict"].get("FAIL", 0) == want["by_verdict"].get("FAIL", 0) + 1


def test_a_shard_with_a_nan_literal_is_refused(tmp_path):
    # A report writes null for NaN (docs/report-format.md): the literal is not read, whatever else is in the file.
    shard = tmp_path / "shard.json"
    shard.write_text('{"schema": "mla-harness.report/1", "provenance": {}, "scenarios": [], "x": NaN}')
    p = run_merge(shard, "--out", tmp_path / "out.json")
    assert p.returncode == 3, p.stdout + p.stderr
    assert f"shard file {shard} is not usable JSON: non-standard literal NaN" in p.stderr
    assert not (tmp_path / "out.json").exists()
