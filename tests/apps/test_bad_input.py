"""Bad input everywhere a user can give it: docs/bad-input.md's table, run row by row.

Each row of the table names a case of CASES below, the exit code and the message (fragments
separated by "…" must appear in that order in what the tool printed). Every case has a row and
every row a case, so the table is what the tools do. Binaries: $MLA_CHECK_BIN and $MLA_BENCH_BIN
(set by CTest); scripts/compare_reports.py runs with this interpreter."""
import json
import os
import re
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK = os.environ.get("MLA_CHECK_BIN", str(REPO / "build/bin/mla-check"))
BENCH = os.environ.get("MLA_BENCH_BIN", str(REPO / "build/bin/mla-bench"))
COMPARE = [sys.executable, str(REPO / "scripts/compare_reports.py")]
DOC = REPO / "docs/bad-input.md"
ADAPTERS = REPO / "tests/adapters"
SHIPPED = "gather_pages_reversed"  # a small shipped scenario (gather checks, well under a second)
SHIPPED_FILE = REPO / "scenarios/suite" / f"{SHIPPED}.json"
QUICK_ONE = "--benchmark_filter=^pack/B:64/tokens:1024/"  # one small benchmark of the quick sweep


@dataclass
class Run:
    argv: list
    env: dict = field(default_factory=dict)
    tool: str = "check"  # check | bench | compare
    limit_file_bytes: int | None = None  # RLIMIT_FSIZE for the command (a full disk, as write() sees it)


def scenario_text(name="s", seq_lens="[40, 20]", query_lens="[1, 20]", checks='"gather"'):
    return ('{"schema": "mla-scenario/1", "name": "%s", "batch": {"seq_lens": %s, "query_lens": %s}, '
            '"checks": [%s]}' % (name, seq_lens, query_lens, checks))


def write(tmp, name, text, mode="w"):
    p = tmp / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if mode == "wb":
        p.write_bytes(text)
    else:
        p.write_text(text)
    return str(p)


def sparse_file(tmp, name, size):
    """A file of `size` bytes that takes no disk space (a hole)."""
    p = tmp / name
    with open(p, "wb") as f:
        f.truncate(size)
    return str(p)


def loop(tmp, name):
    a, b = tmp / name, tmp / ("other_" + name)
    os.symlink(b.name, a)
    os.symlink(a.name, b)
    return str(a)


def report_text():
    return json.dumps({"schema": "mla-harness.report/1", "provenance": {}, "summary": {"verdict": "PASS"},
                       "scenarios": [{"name": "a", "verdict": "PASS", "error": None, "checks": [
                           {"id": "pack", "check": "pack", "verdict": "PASS", "reason": None,
                            "metrics": {"mismatches": 0}}]}]})


def bench_text():
    return json.dumps({"context": {}, "benchmarks": [
        {"name": "BM/1", "run_name": "BM/1", "run_type": "iteration", "real_time": 10.0, "time_unit": "ns"}]})


def check(*argv, **kw):
    return Run(list(argv), **kw)


def bench(*argv, **kw):
    return Run(["--backend", "host", *argv], tool="bench", **kw)


def compare(*argv, **kw):
    return Run(list(argv), tool="compare", **kw)


def adapter(name):
    return f"python:{ADAPTERS / name}"


# ---- the cases: id -> function(tmp_path) -> Run ---------------------------------------------------

def _declaration(t, file, op, key, value):
    """An adapter `file` of `op` declaring SUPPORTS[op][key] = value (Python source)."""
    text = f'DEVICE = "cpu"\nSUPPORTS = {{"{op}": {{"{key}": {value}}}}}\n\n\ndef {op}(**_):\n    pass\n'
    return check("--backend", "python:" + write(t, file, text), "--scenario", SHIPPED)


def _dup_names(t):
    return check("--backend", "host", "--scenario", write(t, "a.json", scenario_text("same")),
                 "--scenario", write(t, "b.json", scenario_text("same")))


def _same_file_twice(t):
    f = write(t, "a.json", scenario_text())
    return check("--backend", "host", "-q", "--scenario", f, "--scenario", os.path.join(str(t), ".", "a.json"))


def _suite_loop(t):
    write(t, "suite/a.json", scenario_text())
    loop(t / "suite", "loop.json")
    return check("--backend", "host", "--scenario-dir", str(t / "suite"))


def _report_is_input(t):
    f = write(t, "a.json", scenario_text())
    return check("--backend", "host", "--scenario", f, "--report", f)


def _big(t, checks='"pack", "gather"'):
    return write(t, "big.json", scenario_text("big", "[12000000]", "[1]", checks))


def _report_full_disk(t):
    return check("--backend", "host", "-q", "--scenario", SHIPPED, "--report", str(t / "r.json"),
                 limit_file_bytes=4096)


def _bench_out_is_sweep(t):
    sweep = write(t, "q.json", (REPO / "scenarios/sweeps/quick.json").read_text())
    return bench("--sweep", sweep, f"--benchmark_out={sweep}")


def _compare_pair(t, new_text, *extra, base_text=None):
    base = write(t, "base.json", base_text or report_text())
    new = write(t, "new.json", new_text, mode="wb" if isinstance(new_text, bytes) else "w")
    return compare(base, new, *extra)


def _dup_scenario_report():
    r = json.loads(report_text())
    r["scenarios"].append(r["scenarios"][0])
    return json.dumps(r)


def _bad_counter_report():
    r = json.loads(report_text())
    r["scenarios"][0]["checks"][0]["metrics"]["mismatches"] = -1
    return json.dumps(r)


CASES = {
    # mla-check: scenario files and the run-level checks
    "check-duplicate-names": _dup_names,
    "check-same-file-twice": _same_file_twice,
    "check-scenario-symlink-loop": lambda t: check("--backend", "host", "--scenario", loop(t, "l.json")),
    "check-scenario-name-too-long": lambda t: check("--backend", "host", "--scenario", str(t / ("n" * 300 + ".json"))),
    "check-scenario-missing": lambda t: check("--backend", "host", "--scenario", str(t / "absent.json")),
    "check-scenario-empty": lambda t: check("--backend", "host", "--scenario", ""),
    "check-scenario-directory": lambda t: check("--backend", "host", "--scenario", str(t)),
    "check-scenario-fifo": lambda t: (os.mkfifo(t / "f.json"), check("--backend", "host", "--scenario",
                                                                      str(t / "f.json")))[1],
    "check-scenario-2gb": lambda t: check("--backend", "host", "--scenario", sparse_file(t, "huge.json", 2 << 30)),
    "check-scenario-binary": lambda t: check("--backend", "host", "--scenario",
                                             write(t, "garbage.json", bytes(range(256)) * 4, "wb")),
    "check-scenario-bom": lambda t: check("--backend", "host", "--scenario",
                                          write(t, "bom.json", "\ufeff" + scenario_text())),
    "check-scenario-trailing-comma": lambda t: check("--backend", "host", "--scenario",
                                                     write(t, "comma.json", scenario_text()[:-1] + ",}")),
    "check-scenario-deep-nesting": lambda t: check("--backend", "host", "--scenario",
                                                   write(t, "deep.json", "[" * 100000 + "]" * 100000)),
    "check-suite-symlink-loop": _suite_loop,
    "check-scenario-dir-missing": lambda t: check("--backend", "host", "--scenario-dir", str(t / "absent")),
    "check-scenario-dir-is-file": lambda t: check("--backend", "host", "--scenario-dir",
                                                  write(t, "a.json", scenario_text())),
    "check-scenario-dir-empty-folder": lambda t: check("--backend", "host", "--scenario-dir", str(t)),
    "check-scenario-dir-empty-value": lambda t: check("--backend", "host", "--scenario-dir", ""),
    "check-memory-total": lambda t: check("--backend", "host", "--scenario", _big(t)),
    "check-memory-total-attention": lambda t: check("--backend", "host", "--scenario", _big(t, '"sparse_mqa"')),
    # mla-check: --report
    "check-report-empty": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--report", ""),
    "check-report-is-input": _report_is_input,
    "check-report-is-adapter": lambda t: check("--backend", adapter("bad_returns.py"), "--scenario", SHIPPED,
                                               "--report", str(ADAPTERS / "bad_returns.py")),
    "check-report-directory": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--report", str(t)),
    "check-report-missing-directory": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--report",
                                                      str(t / "absent" / "r.json")),
    "check-report-device": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--report", "/dev/null"),
    "check-report-disk-full": _report_full_disk,
    # mla-check: other options
    "check-no-isolate-timeout": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--no-isolate",
                                                "--timeout", "1"),
    "check-no-isolate-jobs": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--no-isolate", "-j", "2"),
    "check-timeout-nan": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--timeout", "nan"),
    "check-timeout-negative": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--timeout", "-5"),
    "check-timeout-huge": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--timeout", "1e30"),
    "check-timeout-text": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--timeout", "soon"),
    "check-jobs-negative": lambda t: check("--backend", "host", "--scenario", SHIPPED, "-j", "-1"),
    "check-jobs-huge": lambda t: check("--backend", "host", "--scenario", SHIPPED, "-j", "100000"),
    "check-seed-empty": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--seed", ""),
    "check-seed-negative": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--seed", "-1"),
    "check-seed-past-uint64": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--seed",
                                              "18446744073709551616"),
    "check-inject-empty": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--inject", ""),
    "check-inject-unknown": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--inject", "gremlins"),
    "check-check-unknown": lambda t: check("--backend", "host", "--scenario", SHIPPED, "--check", "everything"),
    "check-filter-matches-nothing": lambda t: check("--backend", "host", "--filter", "no-such-scenario*"),
    "check-backend-empty": lambda t: check("--backend", "", "--scenario", SHIPPED),
    "check-backend-unknown": lambda t: check("--backend", "tpu", "--scenario", SHIPPED),
    "check-unknown-option": lambda t: check("--backend", "host", "--scenarios", SHIPPED),
    "check-adapter-fallback-without-adapter": lambda t: check("--backend", "host", "--adapter-fallback"),
    # mla-check: adapter files (--backend python:PATH)
    "adapter-missing": lambda t: check("--backend", f"python:{t / 'absent.py'}", "--scenario", SHIPPED),
    "adapter-directory": lambda t: check("--backend", f"python:{t}", "--scenario", SHIPPED),
    "adapter-not-python": lambda t: check("--backend", "python:" + write(t, "a.txt", "DEVICE = 'cpu'\n"),
                                          "--scenario", SHIPPED),
    "adapter-too-large": lambda t: check("--backend", "python:" + sparse_file(t, "big.py", 2 << 30),
                                         "--scenario", SHIPPED),
    "adapter-binary": lambda t: check("--backend", "python:" + write(t, "bin.py", bytes(range(256)), "wb"),
                                      "--scenario", SHIPPED),
    "adapter-no-device": lambda t: check("--backend", adapter("bad_no_device.py"), "--scenario", SHIPPED),
    "adapter-import-fails": lambda t: check("--backend", adapter("bad_import_error.py"), "--scenario", SHIPPED),
    "adapter-exits-on-import": lambda t: check("--backend", adapter("bad_sys_exit.py"), "--scenario", SHIPPED),
    "adapter-wrong-supports": lambda t: check("--backend", adapter("bad_supports.py"), "--scenario", SHIPPED),
    "adapter-invalid-index-not-an-int": lambda t: _declaration(t, "bad_index.py", "sparse_mqa", "invalid_index", '"-1"'),
    "adapter-invalid-index-a-slot": lambda t: _declaration(t, "bad_index.py", "sparse_mqa", "invalid_index", "0"),
    "adapter-invalid-index-other-op": lambda t: _declaration(t, "bad_index.py", "convert", "invalid_index", "-1"),
    "adapter-dequant-unknown-rule": lambda t: _declaration(t, "bad_dequant.py", "sparse_mqa", "dequant", '"bf16"'),
    "adapter-dequant-not-a-string": lambda t: _declaration(t, "bad_dequant.py", "sparse_mqa", "dequant", "True"),
    "adapter-dequant-other-op": lambda t: _declaration(t, "bad_dequant.py", "gather", "dequant", '"bf16_scale"'),
    "adapter-wrong-signature": lambda t: check("--backend", adapter("bad_signature.py"), "--scenario", SHIPPED),
    "adapter-returns-wrong-shape": lambda t: check("--backend", adapter("bad_returns.py"), "--scenario", SHIPPED,
                                                   "-q", env={"MLA_BAD_RETURN": "shape"}),
    "adapter-returns-wrong-dtype": lambda t: check("--backend", adapter("bad_returns.py"), "--scenario", SHIPPED,
                                                   "-q", env={"MLA_BAD_RETURN": "dtype"}),
    "adapter-returns-a-list": lambda t: check("--backend", adapter("bad_returns.py"), "--scenario", SHIPPED,
                                              "-q", env={"MLA_BAD_RETURN": "type"}),
    # mla-bench: Google Benchmark flags and variables
    "bench-filter-invalid-regex": lambda t: bench("--sweep", "quick", "--benchmark_filter=("),
    "bench-filter-matches-nothing": lambda t: bench("--sweep", "quick", "--benchmark_filter=^no such benchmark$"),
    "bench-filter-only-host-capped": lambda t: bench("--sweep", "cache_path", "--benchmark_filter=rows:262144"),
    "bench-format-xml": lambda t: bench("--sweep", "quick", "--benchmark_format=xml"),
    "bench-out-format-xml": lambda t: bench("--sweep", "quick", "--benchmark_out_format=xml"),
    "bench-out-missing-directory": lambda t: bench("--sweep", "quick", f"--benchmark_out={t / 'absent' / 'o.json'}"),
    "bench-out-directory": lambda t: bench("--sweep", "quick", f"--benchmark_out={t}"),
    "bench-out-is-the-sweep": _bench_out_is_sweep,
    "bench-repetitions-zero": lambda t: bench("--sweep", "quick", "--benchmark_repetitions=0"),
    "bench-repetitions-env-text": lambda t: bench("--sweep", "quick", env={"BENCHMARK_REPETITIONS": "abc"}),
    "bench-min-time-nan": lambda t: bench("--sweep", "quick", "--benchmark_min_time=nan"),
    "bench-min-time-seconds-suffix": lambda t: bench("--sweep", "quick", QUICK_ONE, "--benchmark_repetitions=1",
                                                     "--benchmark_min_time=0.001s"),
    "bench-min-time-iterations": lambda t: bench("--sweep", "quick", QUICK_ONE, "--benchmark_repetitions=1",
                                                 "--benchmark_min_time=1x"),
    "bench-bool-flag-text": lambda t: bench("--sweep", "quick", "--benchmark_list_tests=banana"),
    "bench-time-unit": lambda t: bench("--sweep", "quick", "--benchmark_time_unit=fortnights"),
    "bench-flag-without-value": lambda t: bench("--sweep", "quick", "--benchmark_filter", "pack"),
    "bench-flag-unknown": lambda t: bench("--sweep", "quick", "--benchmark_speed=fast"),
    # mla-bench: its own options and sweep files
    "bench-sweep-empty": lambda t: bench("--sweep", ""),
    "bench-sweep-missing": lambda t: bench("--sweep", str(t / "absent.json")),
    "bench-sweep-directory": lambda t: bench("--sweep", str(t)),
    "bench-sweep-2gb": lambda t: bench("--sweep", sparse_file(t, "huge.json", 2 << 30)),
    "bench-sweep-trailing-comma": lambda t: bench("--sweep", write(t, "s.json", '{"schema": 1, "name": "t",}')),
    "bench-dump-empty": lambda t: bench("--dump", ""),
    "bench-dump-is-a-file": lambda t: bench("--dump", write(t, "f", "x")),
    "bench-lead-cycles-nan": lambda t: bench("--sweep", "quick", "--lead-cycles", "nan"),
    # compare_reports.py
    "compare-missing": lambda t: compare(str(t / "absent.json"), write(t, "n.json", report_text())),
    "compare-directory": lambda t: compare(str(t), write(t, "n.json", report_text())),
    "compare-2gb": lambda t: compare(sparse_file(t, "huge.json", 2 << 30), write(t, "n.json", report_text())),
    "compare-binary": lambda t: _compare_pair(t, bytes(range(256))),
    "compare-bom": lambda t: _compare_pair(t, "\ufeff" + report_text()),  # skipped, as the C++ tools skip it
    "compare-trailing-comma": lambda t: _compare_pair(t, report_text()[:-1] + ",}"),
    "compare-truncated": lambda t: _compare_pair(t, report_text()[:40]),
    "compare-duplicate-key": lambda t: _compare_pair(t, report_text()[:-1] + ', "schema": "x"}'),
    "compare-deep-nesting": lambda t: _compare_pair(t, '{"schema": "mla-harness.report/1", "x": '
                                                    + "[" * 100000 + "]" * 100000 + "}"),
    "compare-mixed-kinds": lambda t: _compare_pair(t, bench_text()),
    "compare-duplicate-scenario": lambda t: _compare_pair(t, _dup_scenario_report()),
    "compare-negative-counter": lambda t: _compare_pair(t, _bad_counter_report()),
    "compare-json-is-an-input": lambda t: compare(write(t, "b.json", report_text()), write(t, "n.json", report_text()),
                                                  "--json", str(t / "n.json")),
    "compare-json-empty": lambda t: compare(write(t, "b.json", report_text()), write(t, "n.json", report_text()),
                                            "--json", ""),
    "compare-negative-option": lambda t: compare(write(t, "b.json", report_text()), write(t, "n.json", report_text()),
                                                 "--drift-rel", "-1"),
}


def execute(run: Run, tmp_path):
    env = dict(os.environ)
    env.update(run.env)
    cmd = {"check": [CHECK], "bench": [BENCH], "compare": COMPARE}[run.tool] + run.argv

    def limit():
        if run.limit_file_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (run.limit_file_bytes, run.limit_file_bytes))

    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
                          preexec_fn=limit, errors="replace")


def doc_rows():
    """(case id, exit code, message fragments) of every row of the table."""
    rows = []
    for line in DOC.read_text().splitlines():
        m = re.match(r"^\|\s*`([a-z0-9-]+)`\s*\|.*\|\s*(\d)\s*\|(.*)\|\s*$", line)
        if m:
            text = m.group(3).strip()
            fragments = [f.strip() for f in text.strip("`").split("…") if f.strip()] if text.startswith("`") else []
            rows.append((m.group(1), int(m.group(2)), [f.replace("\\|", "|") for f in fragments]))
    return rows


ROWS = doc_rows()


def test_every_case_has_one_row_and_every_row_a_case():
    ids = [r[0] for r in ROWS]
    assert len(ids) == len(set(ids)), "a case has two rows"
    assert sorted(ids) == sorted(CASES), (set(ids) ^ set(CASES))


def binary_for(tool):
    return {"check": CHECK, "bench": BENCH}.get(tool)


@pytest.mark.parametrize("case, code, fragments", ROWS, ids=[r[0] for r in ROWS])
def test_the_documented_exit_code_and_message(tmp_path, case, code, fragments):
    run = CASES[case](tmp_path)
    binary = binary_for(run.tool)
    if binary and not Path(binary).exists():
        pytest.skip(f"{binary} is not built")
    if run.tool == "check" and any(str(a).startswith("python:") for a in run.argv):
        probe = subprocess.run([CHECK, "--backend", adapter("bad_returns.py"), "--list"], capture_output=True,
                               text=True, timeout=60)
        if "no Python backend" in probe.stderr:
            pytest.skip("this build has no Python adapter backend")
    if case == "bench-min-time-iterations" and "needs Google Benchmark 1.8" not in execute(run, tmp_path).stderr:
        code, fragments = 0, []  # Google Benchmark 1.8 or newer takes an iteration count
    r = execute(run, tmp_path)
    out = r.stderr + r.stdout
    assert r.returncode == code, out
    # An adapter whose import fails shows the tail of its own traceback; nothing else prints one.
    assert "Traceback" not in r.stderr or case in ("adapter-import-fails", "adapter-binary"), out
    assert "internal error" not in out, out
    position = 0
    for fragment in fragments:
        found = out.find(fragment, position)
        assert found >= 0, f"{fragment!r} not in order in:\n{out}"
        position = found + len(fragment)


def test_a_report_that_cannot_be_written_leaves_no_file_behind(tmp_path):
    if not Path(CHECK).exists():
        pytest.skip("mla-check is not built")
    r = execute(_report_full_disk(tmp_path), tmp_path)
    assert r.returncode == 3, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "the temporary report file was left behind"


def test_a_duplicate_given_twice_runs_once(tmp_path):
    if not Path(CHECK).exists():
        pytest.skip("mla-check is not built")
    run = _same_file_twice(tmp_path)
    r = execute(Run(run.argv + ["--report", str(tmp_path / "r.json")]), tmp_path)
    assert r.returncode == 0, r.stderr
    assert [s["name"] for s in json.loads((tmp_path / "r.json").read_text())["scenarios"]] == ["s"]


def test_an_input_named_as_output_is_left_unchanged(tmp_path):
    if not Path(CHECK).exists():
        pytest.skip("mla-check is not built")
    run = _report_is_input(tmp_path)
    before = (tmp_path / "a.json").read_text()
    assert execute(run, tmp_path).returncode == 2
    assert (tmp_path / "a.json").read_text() == before
