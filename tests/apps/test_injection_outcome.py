"""mla-check --inject decides "exercised" by the injection's own condition, in both directions:
an injection whose condition no selected scenario meets is NOT EXERCISED (exit 2) whatever checks
ran, and one that altered something is caught wherever a check failed because of it (exit 1).
The binary comes from $MLA_CHECK_BIN."""
import json
import os
import subprocess

import pytest

from built_tools import skip_unless_built

BIN = os.environ.get("MLA_CHECK_BIN", "build/bin/mla-check")


binary_exists = skip_unless_built(BIN)


def run(*args):
    return subprocess.run([BIN, "--backend", "host", "--quiet", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name,scenario", [
    ("unbounded-convert", "gather_block_size_64"),        # an all-decode batch: no decode-only rows
    ("ignore-seq-starts", "vllm_large_q_pure_prefill"),   # no context: every gather starts at 0
    ("split-mismatch", "attn_mixed_small_k128"),          # uniform decodes: both rules agree
    ("convert-bound-off-by-one", "convert_prefill_workspace"),  # no index reaches the table width
])
def test_a_condition_never_met_is_not_exercised(name, scenario):
    r = run("--scenario", scenario, "--inject", name)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"injection {name}: NOT EXERCISED" in r.stdout
    assert "FAIL" not in r.stdout.split("injection")[0] and "OOB" not in r.stdout.split("injection")[0]


def caught(tmp_path, name, *selection):
    """Runs the selection with the injection, which must be caught (exit 1); returns the summary
    line and the checks it altered, as (scenario, check) pairs of the JSON report."""
    out = tmp_path / "r.json"
    r = run(*selection, "--inject", name, "--report", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith(f"injection {name}: "))
    assert line.startswith(f"injection {name}: caught"), line
    rep = json.loads(out.read_text())
    return line, [(s["name"], c) for s in rep["scenarios"] for c in s["checks"] if c["metrics"].get("injection_applied") == 1]


def test_an_injection_caught_by_another_check_counts(tmp_path):
    line, applied = caught(tmp_path, "unbounded-convert", "--scenario", "attn_mixed_small_k128")
    assert "forward OOB" in line
    assert applied and all(c["verdict"] == "OOB" for _, c in applied)


def test_the_suite_catches_the_off_by_one_bound_with_convert_fail(tmp_path):
    line, applied = caught(tmp_path, "convert-bound-off-by-one", "--filter", "convert_")
    assert "convert FAIL" in line
    caught_in = {name for name, c in applied if c["check"] == "convert" and c["verdict"] == "FAIL"}
    assert {"convert_index_at_table_width", "convert_pinned_indices", "convert_invalid_indices"} <= caught_in
