"""tests/memcheck/ctest-compute-sanitizer.sh without a GPU: a fake compute-sanitizer
(MLA_COMPUTE_SANITIZER) writes each outcome's log where --log-file says, so the tool choice, the
arguments passed on and the outcome rules are what is tested; and `ctest -T memcheck` with this
build's DartConfiguration.tcl, so that CTest calls the script the way the script expects."""
import os
import pathlib
import re
import shutil
import stat
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "memcheck" / "ctest-compute-sanitizer.sh"

# Arguments: --tool T [other options...] --log-file F TEST [ARGS...]. The test's last argument
# names the outcome; the arguments are recorded in $FAKE_ARGS; the test is run when it exists.
FAKE_SANITIZER = r"""#!/usr/bin/env bash
echo "$*" >>"$FAKE_ARGS"
tool="" log=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tool) tool="$2"; shift 2 ;;
    --log-file) log="$2"; shift 2 ;;
    --*) shift 2 ;;
    *) break ;;
  esac
done
outcome="${@: -1}"
rc=0
if [[ -x "$1" ]]; then "$@"; rc=$?; fi
{
  echo "========= COMPUTE-SANITIZER"
  case "$outcome" in
    clean)
      if [[ "$tool" == racecheck ]]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
      else echo "========= ERROR SUMMARY: 0 errors"; fi ;;
    fails) echo "========= ERROR SUMMARY: 0 errors" ;;
    invalid)
      echo "========= Invalid __global__ read of size 4 bytes"
      echo "=========     at mla::gather_kernel(int)+0x40"
      echo "========= ERROR SUMMARY: 1 error" ;;
    external)  # every hazard in a library kernel (cuBLAS's GEMM), none in namespace mla
      echo "========= Error: Race reported between Read access at nvjet_sm90_tst_128x256+0x9b0"
      echo "=========     and Write access at nvjet_sm90_tst_128x256+0x2ee0 [8 hazards]"
      echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" ;;
    ours)  # the formats of compute-sanitizer 2025.3: without line information (cuBLAS) and with it
      echo "========= Error: Race reported between Read access at nvjet_a+0x940"
      echo "=========     and Write access at nvjet_a+0x36d0 [1024 hazards]"
      echo "========= Error: Race reported between Write access at mla::st(unsigned int, unsigned int)+0x10 in d.cuh:114"
      echo "=========     and Read access at mla::ld(unsigned int)+0x20 in d.cuh:110 [1 hazard]"
      echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)" ;;
    unparsed)  # a library kernel's hazard and a line the parser does not know
      echo "========= Error: Race reported between Read access at nvjet_a+0x9b0"
      echo "========= Warning: Race reported between Write access at mla::st(unsigned int)+0x10 and something new"
      echo "========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)" ;;
    extcrash)  # a library kernel's hazard, then the tool failed: the rest is unchecked
      echo "========= Error: Race reported between Read access at nvjet_a+0x9b0"
      echo "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."
      echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" ;;
    crash)
      echo "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."
      echo "========= ERROR SUMMARY: 0 errors" ;;
    nocuda) echo "========= Error: Target application terminated before first instrumented API call" ;;
    nosummary) echo "========= (nothing more)" ;;
  esac
} >"${log:-/dev/stderr}"
exit "$rc"
"""


def write_exe(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake(tmp_path):
    write_exe(tmp_path / "compute-sanitizer", FAKE_SANITIZER)
    # The test: exits 3 for the outcome "fails", 0 otherwise.
    write_exe(tmp_path / "the-test", '#!/bin/sh\necho "the test ran: $*"\n[ "$1" != fails ]\n[ $? = 0 ] || exit 3\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLA_SANITIZER_")}
    env.update(MLA_COMPUTE_SANITIZER=str(tmp_path / "compute-sanitizer"), FAKE_ARGS=str(tmp_path / "args.txt"))
    return tmp_path, env


def run(fake, outcome, *options, **env_extra):
    tmp_path, env = fake
    log = tmp_path / "MemoryChecker.7.log"
    proc = subprocess.run(["bash", str(SCRIPT), "--log-file", str(log), *options, str(tmp_path / "the-test"),
                           outcome], env=dict(env, **env_extra), capture_output=True, text=True, timeout=60)
    args = (tmp_path / "args.txt").read_text().splitlines()
    return proc, args


def test_clean_memcheck_passes_and_the_tool_is_memcheck_by_default(fake):
    proc, args = run(fake, "clean", "--error-exitcode", "99", "--print-limit", "5")
    assert proc.returncode == 0, proc.stderr
    assert "the test ran: clean" in proc.stdout
    (line,) = args
    assert line.startswith("--tool memcheck --log-file ")
    assert "--print-limit 5" in line and "--error-exitcode" not in line  # the outcome is decided here


def test_the_tool_comes_from_the_environment_before_the_options(fake):
    _, args = run(fake, "clean", "--tool", "initcheck")
    _, args = run(fake, "clean", "--tool", "initcheck", MLA_SANITIZER_TOOL="racecheck")
    assert [a.split()[1] for a in args] == ["initcheck", "racecheck"]


@pytest.mark.parametrize("outcome,tool,code", [
    ("invalid", "memcheck", 99),   # a finding
    ("fails", "memcheck", 3),      # the test's own failure, whatever the sanitizer says
    ("crash", "memcheck", 98),     # the tool failed before any finding: unchecked
    ("nosummary", "initcheck", 97),
    ("nocuda", "memcheck", 0),     # a process without CUDA: nothing to check
    ("ours", "racecheck", 99),     # a hazard in namespace mla
    ("unparsed", "racecheck", 99),  # a hazard line the parser does not know is not excused
    ("extcrash", "racecheck", 99),  # the tool failed after a finding: unchecked, and not excused
])
def test_outcomes(fake, outcome, tool, code):
    proc, _ = run(fake, outcome, MLA_SANITIZER_TOOL=tool)
    assert proc.returncode == code, proc.stderr


def test_racecheck_hazards_only_outside_the_project_pass_with_a_note(fake):
    proc, _ = run(fake, "external", MLA_SANITIZER_TOOL="racecheck")
    assert proc.returncode == 0, proc.stderr
    assert "EXTERNAL" in proc.stderr and "nvjet_sm90_tst_128x256" in proc.stderr
    proc, _ = run(fake, "external", MLA_SANITIZER_TOOL="racecheck", MLA_SANITIZER_EXTERNAL_OK="0")
    assert proc.returncode == 99
    assert "nvjet_sm90_tst_128x256" in proc.stderr


def test_a_project_hazard_names_the_functions(fake):
    proc, _ = run(fake, "ours", MLA_SANITIZER_TOOL="racecheck")
    assert ("racecheck: RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings); "
            "in: mla::ld(unsigned int);mla::st(unsigned int, unsigned int);nvjet_a") in proc.stderr


def test_without_a_log_file_the_log_is_shown(fake):
    tmp_path, env = fake
    proc = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "the-test"), "invalid"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 99
    assert "Invalid __global__ read" in proc.stderr


def test_no_sanitizer_is_an_error(fake):
    tmp_path, env = fake
    env = dict(env, MLA_COMPUTE_SANITIZER="", PATH="/nonexistent", CUDA_HOME=str(tmp_path / "none"))
    if pathlib.Path("/usr/local/cuda/bin/compute-sanitizer").exists():
        pytest.skip("a compute-sanitizer is installed in /usr/local/cuda/bin")
    proc = subprocess.run(["/bin/bash", str(SCRIPT), "/bin/true"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "compute-sanitizer not found" in proc.stderr


@pytest.fixture
def dart_configuration():
    build = pathlib.Path(os.environ.get("MLA_BINARY_DIR", ROOT / "build"))
    dart = build / "DartConfiguration.tcl"
    if not dart.exists():
        pytest.skip(f"no configured build at {build} (MLA_BINARY_DIR)")
    return dart.read_text()


def test_the_build_configures_this_script_as_ctests_memory_checker(dart_configuration):
    config = dict(re.findall(r"^(\w+): ?(.*)$", dart_configuration, re.M))
    assert config["MemoryCheckType"] == "CudaSanitizer"
    assert pathlib.Path(config["MemoryCheckCommand"]).resolve() == SCRIPT.resolve()
    assert config["MemoryCheckCommandOptions"]  # not empty: CTest would put its own options instead


def test_ctest_memcheck_runs_the_tests_under_it(fake, dart_configuration):
    """ctest -T memcheck with this build's DartConfiguration.tcl over two tests of its own: the
    script's outcome is the test's, and CTest's defect summary reads the log it wrote."""
    tmp_path, env = fake
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "DartConfiguration.tcl").write_text(
        re.sub(r"^BuildDirectory:.*$", f"BuildDirectory: {tests}", dart_configuration, flags=re.M))
    the_test = tmp_path / "the-test"
    (tests / "CTestTestfile.cmake").write_text(
        f'add_test(clean "{the_test}" clean)\nadd_test(invalid "{the_test}" invalid)\n')
    proc = subprocess.run(["ctest", "-T", "memcheck", "--output-on-failure"], cwd=tests, env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert re.search(r"clean \.+ +Passed", out), out
    assert re.search(r"invalid \.+\*+Failed", out), out
    assert re.search(r"Invalid __global__ read - 1", out), out  # CTest's defect summary
