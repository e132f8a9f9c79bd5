"""scripts/sanitize_suite.sh without a GPU: a fake mla-check answers --list, and a fake
compute-sanitizer on PATH plays each outcome (clean, errors found, mla-check failing, hanging),
so the per-run classification, the TSV and the exit status are what is tested."""
import os
import pathlib
import signal
import stat
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "sanitize_suite.sh"

FAKE_CHECK = """#!/usr/bin/env bash
# --list: NAME CHECKS FILE per scenario (the real format); anything else is never run here.
if [[ "$1" == --list ]]; then
  for n in $FAKE_SCENARIOS; do printf '%-20s %-10s %s\\n' "$n" "${FAKE_CHECKS:-pack}" "/suite dir/$n.json"; done
  exit 0
fi
exit 3
"""

FAKE_SANITIZER = """#!/usr/bin/env bash
# compute-sanitizer --tool T --error-exitcode 99 CHECK ... --scenario FILE
tool="$2"
file="${@: -1}"
name="$(basename "$file" .json)"
[[ "$file" == "/suite dir/$name.json" ]] || { echo "split path: $file"; exit 8; }
echo "$tool $name" >>"$FAKE_CALLS"
[[ -n "${FAKE_ARGS:-}" ]] && echo "${*:10}" >>"$FAKE_ARGS"
case "$name" in
  clean*)
    if [[ "$tool" == racecheck ]]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
    else echo "========= ERROR SUMMARY: 0 errors"; fi
    exit 0 ;;
  dirty*) echo "========= ERROR SUMMARY: 2 errors"; exit 99 ;;
  racycrash*) echo "========= Error: Race reported between Read access at k+0x10"
    echo "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."
    echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)"; exit 99 ;;
  racy*)  # the formats of compute-sanitizer 2025.3: without line info (cuBLAS) and with it
    echo "========= Error: Race reported between Read access at gemm_kernel_a+0x940"
    echo "=========     and Write access at gemm_kernel_a+0x36d0 [1024 hazards]"
    echo "========= Error: Race reported between Write access at mla::st(unsigned int, unsigned int)+0x10 in d.cuh:114"
    echo "=========     and Read access at mla::ld(unsigned int)+0x20 in d.cuh:110 [1 hazard]"
    echo "========= Error: Race reported between Read access at gemm_kernel_a+0x950"
    echo "========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)"; exit 99 ;;
  extcrash*)  # a library kernel's hazard, then racecheck itself failed: the rest is unchecked
    echo "========= Error: Race reported between Read access at nvjet_sm90_tst_128x256+0x9b0"
    echo "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."
    echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 99 ;;
  extwarn*)  # a library kernel's hazard and a line the parser does not know
    echo "========= Error: Race reported between Read access at nvjet_sm90_tst_128x256+0x9b0"
    echo "========= Warning: Race reported between Write access at mla::st(unsigned int)+0x10 and something new"
    echo "========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)"; exit 99 ;;
  extonly*)  # every hazard in a library kernel (cuBLAS's, say), none in namespace mla
    echo "========= Error: Race reported between Read access at nvjet_sm90_tst_128x256+0x9b0"
    echo "=========     and Write access at nvjet_sm90_tst_128x256+0x2ee0 [8 hazards]"
    echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 99 ;;
  crashy*) echo "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."
    echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 99 ;;
  broken*) echo "mla-check: invalid scenario"; exit 2 ;;
  slow*) [[ -n "${FAKE_PIDS:-}" ]] && echo $$ >>"$FAKE_PIDS"; exec sleep 5 ;;
  busy*)  # how many runs are in progress at once: each counts the others 2 s after it starts
    touch "$FAKE_BUSY/$$"; sleep 2; ls "$FAKE_BUSY" | wc -l >>"$FAKE_COUNTS"; rm "$FAKE_BUSY/$$"
    echo "========= ERROR SUMMARY: 0 errors"; exit 0 ;;
esac
exit 7
"""


def write_exe(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake_env(tmp_path):
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    write_exe(build / "bin" / "mla-check", FAKE_CHECK)
    tools = tmp_path / "tools"
    tools.mkdir()
    write_exe(tools / "compute-sanitizer", FAKE_SANITIZER)
    env = dict(os.environ)
    env.update(PATH=f"{tools}:{env['PATH']}", MLA_BUILD_DIR=str(build), MLA_JOBS="3",
               FAKE_CALLS=str(tmp_path / "calls.txt"))
    return tmp_path, env


def run(tmp_path, env, scenarios, **extra):
    """Runs the script from tmp_path with the relative results directory "results"."""
    env = dict(env, FAKE_SCENARIOS=" ".join(scenarios), **extra)
    results = tmp_path / "results"
    proc = subprocess.run(["bash", str(SCRIPT), "results"], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    rows = []
    tsv = results / "sanitizer.tsv"
    if tsv.exists():
        rows = [line.split("\t") for line in tsv.read_text().splitlines()]
    return proc, rows


def test_all_clean_passes_and_runs_every_tool_on_every_scenario(fake_env):
    tmp_path, env = fake_env
    proc, rows = run(tmp_path, env, ["clean_a", "clean_b"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted((r[0], r[1], r[2]) for r in rows) == sorted(
        (t, s, "PASS") for t in ("memcheck", "racecheck", "initcheck") for s in ("clean_a", "clean_b"))
    calls = (tmp_path / "calls.txt").read_text().split("\n")
    assert len([c for c in calls if c]) == 6  # the scenario files' paths hold a space: passed whole
    assert (tmp_path / "results" / "sanitizer" / "racecheck" / "clean_b.log").exists()


def test_each_failure_kind_is_classified_and_fails_the_run(fake_env):
    tmp_path, env = fake_env
    proc, rows = run(tmp_path, env, ["clean_a", "dirty_b", "broken_c", "slow_d"],
                     MLA_SANITIZER_TOOLS="memcheck", MLA_SANITIZER_TIMEOUT="1")
    assert proc.returncode == 1
    status = {r[1]: r[2] for r in rows}
    assert status == {"clean_a": "PASS", "dirty_b": "ERRORS", "broken_c": "FAIL", "slow_d": "TIMEOUT"}
    assert "1 of 4 runs clean" in proc.stdout
    assert "dirty_b: ERRORS (ERROR SUMMARY: 2 errors)" in proc.stdout


def test_exit_zero_without_a_clean_summary_is_not_a_pass(fake_env):
    tmp_path, env = fake_env
    sanitizer = pathlib.Path(env["PATH"].split(":")[0]) / "compute-sanitizer"
    write_exe(sanitizer, "#!/usr/bin/env bash\necho 'no summary'\nexit 0\n")
    proc, rows = run(tmp_path, env, ["clean_a"], MLA_SANITIZER_TOOLS="initcheck")
    assert proc.returncode == 1
    assert rows[0][2] == "FAIL"


def test_no_selected_scenario_is_a_usage_error(fake_env):
    tmp_path, env = fake_env
    proc, _ = run(tmp_path, env, [])
    assert proc.returncode == 2
    assert "no scenario selected" in proc.stderr


def test_racecheck_names_the_racy_kernels_and_a_sanitizer_failure_is_its_own_status(fake_env):
    tmp_path, env = fake_env
    proc, rows = run(tmp_path, env, ["racy_a", "crashy_b", "clean_c", "racycrash_d"], MLA_SANITIZER_TOOLS="racecheck")
    assert proc.returncode == 1
    by_name = {r[1]: r for r in rows}
    assert by_name["racy_a"][2] == "ERRORS"
    assert by_name["racy_a"][4] == ("RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings); "
                                    "in: gemm_kernel_a;mla::ld(unsigned int);mla::st(unsigned int, unsigned int)")
    assert by_name["crashy_b"][2] == "TOOL_ERROR"
    assert by_name["clean_c"][2] == "PASS"
    assert by_name["racycrash_d"][2] == "ERRORS"  # a finding before the tool failed is still one


def test_per_check_runs_one_process_per_scenario_and_check(fake_env):
    tmp_path, env = fake_env
    args = tmp_path / "args.txt"
    proc, rows = run(tmp_path, env, ["clean_a"], MLA_SANITIZER_TOOLS="memcheck", MLA_SANITIZER_PER_CHECK="1",
                     FAKE_ARGS=str(args), FAKE_CHECKS="pack,layout")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(r[1] for r in rows) == ["clean_a.layout", "clean_a.pack"]
    assert sorted(args.read_text().splitlines()) == [
        "--check layout --scenario /suite dir/clean_a.json", "--check pack --scenario /suite dir/clean_a.json"]
    assert (tmp_path / "results" / "sanitizer" / "memcheck" / "clean_a.pack.log").exists()


def test_hazards_only_outside_the_project_are_external_and_fail_unless_allowed(fake_env):
    tmp_path, env = fake_env
    proc, rows = run(tmp_path, env, ["extonly_a", "clean_b"], MLA_SANITIZER_TOOLS="racecheck")
    assert proc.returncode == 1
    by_name = {r[1]: r for r in rows}
    assert by_name["extonly_a"][2] == "EXTERNAL"
    assert by_name["extonly_a"][4].endswith("; in: nvjet_sm90_tst_128x256")
    assert "1 of 2 runs clean, 1 with hazards only outside this project" in proc.stdout
    proc, rows = run(tmp_path, env, ["extonly_a", "clean_b"], MLA_SANITIZER_TOOLS="racecheck",
                     MLA_SANITIZER_EXTERNAL_OK="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # A hazard in our code next to a library's is ours, as is a run racecheck did not finish or a
    # report line the script cannot read: still ERRORS, and never allowed.
    proc, rows = run(tmp_path, env, ["racy_a", "extcrash_b", "extwarn_c"], MLA_SANITIZER_TOOLS="racecheck",
                     MLA_SANITIZER_EXTERNAL_OK="1")
    assert proc.returncode == 1
    assert {r[1]: r[2] for r in rows} == {"racy_a": "ERRORS", "extcrash_b": "ERRORS", "extwarn_c": "ERRORS"}


def test_a_run_stopped_early_keeps_the_rows_of_the_runs_that_ended(fake_env):
    tmp_path, env = fake_env
    env = dict(env, FAKE_SCENARIOS="clean_a slow_b", MLA_SANITIZER_TOOLS="memcheck", MLA_JOBS="2",
               MLA_SANITIZER_TIMEOUT="60")
    partial = tmp_path / "results" / "sanitizer.partial.tsv"
    proc = subprocess.Popen(["bash", str(SCRIPT), "results"], env=env, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (partial.exists() and "clean_a" in partial.read_text()):
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    rows = [line.split("\t") for line in partial.read_text().splitlines()]
    assert [(r[0], r[1], r[2]) for r in rows] == [("memcheck", "clean_a", "PASS")]
    assert not (tmp_path / "results" / "sanitizer.tsv").exists()  # written, sorted, at the end


def test_a_finished_run_leaves_no_partial_file(fake_env):
    tmp_path, env = fake_env
    proc, rows = run(tmp_path, env, ["clean_a"], MLA_SANITIZER_TOOLS="memcheck")
    assert proc.returncode == 0
    assert len(rows) == 1
    assert not (tmp_path / "results" / "sanitizer.partial.tsv").exists()


def test_a_stopped_run_stops_the_sanitizers_in_progress_and_starts_no_more(fake_env):
    """TERM to the script alone (as from an outer timeout): each run's `timeout` sits in a process
    group of its own, so only the script can stop it; no sanitizer may keep the GPU busy."""
    tmp_path, env = fake_env
    pids = tmp_path / "pids.txt"
    env = dict(env, FAKE_SCENARIOS="slow_a slow_b", MLA_SANITIZER_TOOLS="memcheck", MLA_JOBS="1",
               MLA_SANITIZER_TIMEOUT="60", FAKE_PIDS=str(pids))
    proc = subprocess.Popen(["bash", str(SCRIPT), "results"], env=env, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (pids.exists() and pids.read_text().strip()):
            time.sleep(0.05)
        fake_pid = int(pids.read_text().split()[0])
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "stopped" in err
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(fake_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the sanitizer of the run in progress (pid {fake_pid}) is still running")
    assert (tmp_path / "calls.txt").read_text().split("\n")[:-1] == ["memcheck slow_a"]  # slow_b never started
    results = tmp_path / "results"
    rows = [line.split("\t") for line in (results / "sanitizer.partial.tsv").read_text().splitlines()]
    assert [r[:3] for r in rows] == [["memcheck", "slow_a", "STOPPED"]], rows
    assert not (results / "sanitizer.tsv").exists()
    assert not (results / "sanitizer.running").exists()


@pytest.mark.parametrize("jobs, most", [(None, 6), ("8", 8)])
def test_at_most_six_sanitizer_processes_at_once_unless_asked(fake_env, jobs, most):
    # They share one GPU (the default's reason: sanitize_suite.sh). nproc says 16 here.
    tmp_path, env = fake_env
    write_exe(pathlib.Path(env["PATH"].split(":")[0]) / "nproc", "#!/usr/bin/env bash\necho 16\n")
    env = {k: v for k, v in env.items() if k != "MLA_JOBS"}
    if jobs:
        env["MLA_JOBS"] = jobs
    busy = tmp_path / "busy"
    busy.mkdir()
    counts = tmp_path / "counts.txt"
    proc, rows = run(tmp_path, env, [f"busy_{i}" for i in range(9)], MLA_SANITIZER_TOOLS="memcheck",
                     FAKE_BUSY=str(busy), FAKE_COUNTS=str(counts))
    assert proc.returncode == 0, proc.stderr
    assert len(rows) == 9 and all(r[2] == "PASS" for r in rows), rows
    seen = [int(c) for c in counts.read_text().split()]
    assert max(seen) <= most, seen
    assert max(seen) > (6 if jobs else 2), seen  # and they did run side by side
