"""mla-check --fuzz as a user sees it: argument checks (exit 2 with a message naming the option),
a clean run on the host backend, the same cases for the same seed, the budget, and an injected
failure found, shrunk and written as a scenario file that reproduces it. The binary comes from
$MLA_CHECK_BIN (set by CTest)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from built_tools import skip_unless_built

BIN = os.environ.get("MLA_CHECK_BIN", "build/bin/mla-check")


def run(*args, cwd=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=900, cwd=cwd)


binary_exists = skip_unless_built(BIN)


@pytest.mark.parametrize("n", ["0", "-1", "abc", "1.5", "", "1000001", "99999999999999999999999"])
def test_bad_number_of_cases_exits_2(n):
    r = run("--fuzz", n, "--backend", "host")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--fuzz" in r.stderr


@pytest.mark.parametrize("option", ["--fuzz-budget", "--fuzz-shrink-budget"])
@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "ten", "1e9", ""])
def test_bad_budget_exits_2_naming_the_option(option, value):
    r = run("--fuzz", "3", option, value, "--backend", "host")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{option}: '{value}' is not a number of seconds" in r.stderr


@pytest.mark.parametrize("value", ["-1", "x", "", "18446744073709551615"])
def test_bad_start_exits_2(value):
    r = run("--fuzz", "3", "--fuzz-start", value, "--backend", "host")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"--fuzz-start: '{value}' is not a case index" in r.stderr


@pytest.mark.parametrize("extra", [["--scenario", "vllm_mixed_small"], ["--filter", "gather"], ["--list"],
                                   ["--no-isolate"], ["--exclude-tag", "gpu-only"]])
def test_fuzz_refuses_scenario_selection(extra):
    r = run("--fuzz", "2", "--backend", "host", *extra)
    assert r.returncode == 2
    assert "--fuzz generates its scenarios" in r.stderr


def test_fuzz_options_need_fuzz():
    r = run("--fuzz-budget", "10", "--backend", "host", "--scenario", "vllm_mixed_small")
    assert r.returncode == 2 and "need --fuzz N" in r.stderr


def test_fuzz_out_must_be_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = run("--fuzz", "2", "--fuzz-out", str(f), "--backend", "host")
    assert r.returncode == 2 and "is not a directory" in r.stderr


def report_of(path):
    return json.loads(Path(path).read_text())


def test_a_clean_run_passes_and_reports_every_case(tmp_path):
    rep = tmp_path / "r.json"
    r = run("--fuzz", "6", "--seed", "11", "--backend", "host", "--jobs", "2", "--report", str(rep),
            "--fuzz-out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    names = [s["name"] for s in report_of(rep)["scenarios"]]
    assert names == [f"fuzz_s11_c{i}" for i in range(6)]
    assert "fuzz: seed 11, 6 of 6 cases ran" in r.stdout
    assert "no failing case" in r.stdout
    assert not (tmp_path / "out").exists(), "nothing failed: nothing written"


def test_same_seed_same_cases(tmp_path):
    # Compared: every case's checks, ids, verdicts and sizes (a failing case's shrinking is cut
    # short: its result depends on time, the cases' do not).
    def checks(seed, name):
        rep = tmp_path / name
        r = run("--fuzz", "5", "--seed", str(seed), "--backend", "host", "--jobs", "2", "--report", str(rep),
                "--fuzz-shrink-budget", "1", "--fuzz-out", str(tmp_path / ("out-" + name)))
        assert r.returncode in (0, 1), r.stdout + r.stderr
        cases = report_of(rep)["scenarios"][:5]
        assert [s["name"] for s in cases] == [f"fuzz_s{seed}_c{i}" for i in range(5)]
        return [[(c["id"], c["verdict"], c["metrics"]["elements"]) for c in s["checks"]] for s in cases]
    a = checks(3, "a.json")
    assert a == checks(3, "b.json")
    assert a != checks(4, "c.json")


def test_start_runs_one_case_alone(tmp_path):
    def case(*args):
        rep = tmp_path / "r.json"
        r = run("--seed", "9", "--backend", "host", "--check", "gather", "--check", "convert", "--report", str(rep),
                "--fuzz-out", str(tmp_path / "out"), *args)
        assert r.returncode == 0, r.stdout + r.stderr
        return report_of(rep)["scenarios"]
    third = case("--fuzz", "3", "--jobs", "2")[2]
    alone = case("--fuzz", "1", "--fuzz-start", "2")
    assert [s["name"] for s in alone] == ["fuzz_s9_c2"]
    assert [c["id"] for c in alone[0]["checks"]] == [c["id"] for c in third["checks"]]
    assert third["repro"].endswith("--fuzz 1 --fuzz-start 2 --seed 9 --check gather --check convert")


def test_the_budget_stops_new_cases(tmp_path):
    r = run("--fuzz", "100000", "--fuzz-budget", "0.001", "--seed", "1", "--backend", "host", "--jobs", "1",
            "--fuzz-out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fuzz: seed 1, 1 of 100000 cases ran" in r.stdout and "--fuzz-budget spent" in r.stdout


def test_check_limits_the_generated_checks(tmp_path):
    rep = tmp_path / "r.json"
    r = run("--fuzz", "8", "--seed", "2", "--check", "convert", "--backend", "host", "--jobs", "2", "--report", str(rep),
            "--fuzz-out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    for s in report_of(rep)["scenarios"]:
        assert {c["check"] for c in s["checks"]} == {"convert"}


def test_an_injected_failure_is_found_shrunk_and_written(tmp_path):
    out = tmp_path / "found"
    rep = tmp_path / "r.json"
    r = run("--fuzz", "60", "--seed", "1", "--backend", "host", "--jobs", "2", "--inject", "ignore-seq-starts",
            "--fuzz-out", str(out), "--report", str(rep))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "injection ignore-seq-starts: caught" in r.stdout
    files = sorted(out.glob("*_gather_fail.json"))
    assert len(files) == 1, r.stdout
    scenario = json.loads(files[0].read_text())
    assert scenario["name"] == files[0].stem and scenario["checks"] == ["gather"]
    assert len(scenario["batch"]["seq_lens"]) <= 4 and max(scenario["batch"]["seq_lens"]) <= 64
    assert "ignore-seq-starts" in scenario["description"]
    # After the cases, the report holds the written cases' runs, whose repro lines run the files.
    entries = report_of(rep)["scenarios"]
    written = [s for s in entries if s["name"] == files[0].stem]
    assert len(written) == 1 and entries.index(written[0]) >= 60
    assert written[0]["file"] == str(files[0]) and written[0]["repro"].endswith("--scenario " + str(files[0]))
    # The file is an ordinary scenario: it fails with the injection and passes without it.
    again = run("--scenario", str(files[0]), "--backend", "host", "--inject", "ignore-seq-starts")
    assert again.returncode == 1 and "caught in" in again.stdout and "gather FAIL" in again.stdout
    assert run("--scenario", str(files[0]), "--backend", "host").returncode == 0
