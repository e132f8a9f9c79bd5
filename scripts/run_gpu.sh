#!/usr/bin/env bash
# One command for a GPU machine: configure, build, test, check, inject, sanitize, benchmark,
# compare against a plain-PyTorch peer, and plot the sweep (RESULTS_DIR/plots, where the Python
# has matplotlib). Every stage's log goes to RESULTS_DIR; a failed stage is
# recorded and the next one still runs; a summary table is printed at the end, and the exit
# status is non-zero when any stage failed.
#
#   scripts/run_gpu.sh [RESULTS_DIR]          (default results/YYYYmmdd-HHMMSS)
#
# Environment:
#   MLA_CUDA_ARCH=90            CMAKE_CUDA_ARCHITECTURES
#   MLA_BUILD_DIR=build         build directory
#   MLA_JOBS=N                  parallel build jobs, mla-check scenario processes, sanitizer processes (default: all cores; sanitizer processes at most 6)
#   MLA_SKIP_BUILD=1            skip configure + build (use an existing build)
#   MLA_SKIP_CTEST=1  MLA_SKIP_CHECK=1  MLA_SKIP_INJECT=1  MLA_SKIP_SANITIZER=1
#   MLA_SKIP_BENCH=1  MLA_SKIP_PEER=1                       skip that stage
#   MLA_SANITIZER_TOOLS="memcheck racecheck initcheck"      compute-sanitizer tools to run
#   MLA_SANITIZER_ARGS=...      mla-check selection under the sanitizers (e.g. --filter X)
#   MLA_SANITIZER_TIMEOUT=900   seconds per sanitizer process
#   MLA_SANITIZER_PER_CHECK=1   one sanitizer process per tool, scenario and check (mla-check --check)
#   MLA_CHECK_ARGS=...          extra mla-check arguments for the suite run
#   MLA_INJECT_ARGS=...         extra mla-check arguments for the injection runs (e.g. --scenario X)
#   MLA_BENCH_ARGS=...          extra mla-bench arguments (e.g. --quick, --benchmark_filter=gather)
#   MLA_PEER_ARGS=...           extra scripts/peer_torch.py arguments (e.g. --sweep quick)
#   MLA_PYTHON=python3          the Python that holds PyTorch
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2

RESULTS="${1:-results/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$RESULTS"
RESULTS="$(cd "$RESULTS" && pwd)"
BUILD="${MLA_BUILD_DIR:-build}"
BIN="$BUILD/bin"
JOBS="${MLA_JOBS:-$(nproc 2>/dev/null || echo 4)}"
PYTHON="${MLA_PYTHON:-python3}"
INJECTIONS=(unbounded-convert ignore-seq-starts flat-fp8-gather page-size-576 full-batch-metadata split-mismatch)
SUMMARY="$RESULTS/summary.tsv"
: >"$SUMMARY"
ANY_FAILED=0

# record NAME STATUS SECONDS NOTE: one row of the summary (STATUS: PASS, FAIL or SKIP).
record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$SUMMARY"
  [[ "$2" == FAIL ]] && ANY_FAILED=1
  printf '== %-28s %-4s (%ss) %s\n' "$1" "$2" "$3" "$4"
}

# stage NAME EXPECTED_RC -- COMMAND...: runs COMMAND with its output in RESULTS/NAME.log (and on
# the terminal); PASS when its exit status is EXPECTED_RC.
stage() {
  local name="$1" expected="$2"
  shift 3
  local log="$RESULTS/$name.log" start rc
  echo
  echo "== $name: $*"
  start=$(date +%s)
  { echo "\$ $*"; "$@"; } 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local secs=$(( $(date +%s) - start ))
  if [[ "$rc" == "$expected" ]]; then
    record "$name" PASS "$secs" "exit $rc (expected $expected), log $name.log"
  else
    record "$name" FAIL "$secs" "exit $rc (expected $expected), log $name.log"
  fi
  return 0
}

skip() { record "$1" SKIP 0 "$2"; }

skipped() { [[ "${!1:-0}" == 1 ]]; }

# --- Environment --------------------------------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "--- nvidia-smi"; nvidia-smi 2>&1 || true
  echo "--- nvcc"; nvcc --version 2>&1 || true
  echo "--- cmake"; cmake --version 2>&1 | head -1 || true
  echo "--- compute-sanitizer"; compute-sanitizer --version 2>&1 | head -2 || true
  echo "--- python"; "$PYTHON" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1 || true
} >"$RESULTS/environment.txt"

# --- Build --------------------------------------------------------------------------------------
if skipped MLA_SKIP_BUILD; then
  skip configure "MLA_SKIP_BUILD=1"
  skip build "MLA_SKIP_BUILD=1"
else
  stage configure 0 -- cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMLA_ENABLE_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=${MLA_CUDA_ARCH:-90}"
  stage build 0 -- cmake --build "$BUILD" -j "$JOBS"
fi

have() { [[ -x "$BIN/$1" ]]; }

# --- Tests --------------------------------------------------------------------------------------
if skipped MLA_SKIP_CTEST; then
  skip ctest "MLA_SKIP_CTEST=1"
else
  stage ctest 0 -- ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
fi

# --- Suite and injections -----------------------------------------------------------------------
if skipped MLA_SKIP_CHECK; then
  skip check "MLA_SKIP_CHECK=1"
elif ! have mla-check; then
  record check FAIL 0 "$BIN/mla-check was not built"
else
  # shellcheck disable=SC2086
  stage check 0 -- "$BIN/mla-check" --jobs "$JOBS" --report "$RESULTS/check.json" ${MLA_CHECK_ARGS:-}
fi

if skipped MLA_SKIP_INJECT; then
  skip inject "MLA_SKIP_INJECT=1"
elif ! have mla-check; then
  record inject FAIL 0 "$BIN/mla-check was not built"
else
  # Each injected failure must be caught: mla-check exits 1 (a check failed).
  for inj in "${INJECTIONS[@]}"; do
    # shellcheck disable=SC2086
    stage "inject-$inj" 1 -- "$BIN/mla-check" --inject "$inj" --jobs "$JOBS" --quiet --report "$RESULTS/inject-$inj.json" \
      ${MLA_INJECT_ARGS:-}
  done
fi

# --- Sanitizers ---------------------------------------------------------------------------------
if skipped MLA_SKIP_SANITIZER; then
  skip sanitizer "MLA_SKIP_SANITIZER=1"
elif ! command -v compute-sanitizer >/dev/null 2>&1; then
  record sanitizer FAIL 0 "compute-sanitizer not found on PATH"
elif ! have mla-check; then
  record sanitizer FAIL 0 "$BIN/mla-check was not built"
else
  # One process per tool and scenario (or scenario and check), MLA_JOBS at once if set in the
  # environment (sanitize_suite.sh reads it there), else at most 6: the processes share the GPU.
  # shellcheck disable=SC2086
  stage sanitizer 0 -- env MLA_BUILD_DIR="$BUILD" scripts/sanitize_suite.sh "$RESULTS" \
    ${MLA_SANITIZER_ARGS:-}
fi

# --- Benchmarks ---------------------------------------------------------------------------------
if skipped MLA_SKIP_BENCH; then
  skip bench "MLA_SKIP_BENCH=1"
elif ! have mla-bench; then
  record bench FAIL 0 "$BIN/mla-bench was not built"
else
  # shellcheck disable=SC2086
  stage bench 0 -- "$BIN/mla-bench" --backend cuda "--benchmark_out=$RESULTS/bench.json" \
    --benchmark_out_format=json ${MLA_BENCH_ARGS:-}
  # The gather's bytes without its work: the bound its figures are read against (docs/performance.md).
  if have mla-stream-mix; then
    stage stream-mix 0 -- "$BIN/mla-stream-mix"
  else
    record stream-mix FAIL 0 "$BIN/mla-stream-mix was not built"
  fi
fi

# --- Peer (PyTorch) -----------------------------------------------------------------------------
if skipped MLA_SKIP_PEER; then
  skip peer "MLA_SKIP_PEER=1"
elif ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
  skip peer "$PYTHON has no torch"
elif ! have mla-bench; then
  record peer FAIL 0 "$BIN/mla-bench was not built"
else
  stage peer-dump 0 -- "$BIN/mla-bench" --backend cuda --dump "$RESULTS/dump"
  # shellcheck disable=SC2086
  stage peer 0 -- "$PYTHON" scripts/peer_torch.py --dump "$RESULTS/dump" --out "$RESULTS/peer_torch.json" \
    ${MLA_PEER_ARGS:-}
fi

# --- Plots --------------------------------------------------------------------------------------
if [[ ! -s "$RESULTS/bench.json" ]]; then
  skip plots "no bench.json"
elif ! "$PYTHON" -c 'import matplotlib' >/dev/null 2>&1; then
  skip plots "$PYTHON has no matplotlib (scripts/requirements.txt)"
else
  peer_args=()
  [[ -s "$RESULTS/peer_torch.json" ]] && peer_args=(--peer "$RESULTS/peer_torch.json")
  stage plots 0 -- "$PYTHON" scripts/plot_sweep.py "$RESULTS/bench.json" "${peer_args[@]}" --out "$RESULTS/plots"
fi

# --- Summary ------------------------------------------------------------------------------------
echo
echo "Summary ($RESULTS)"
printf '%-28s %-5s %7s  %s\n' STAGE RESULT SECONDS NOTE
printf '%-28s %-5s %7s  %s\n' ---------------------------- ----- ------- ----
while IFS=$'\t' read -r name status secs note; do
  printf '%-28s %-5s %7s  %s\n' "$name" "$status" "$secs" "$note"
done <"$SUMMARY"
if [[ $ANY_FAILED != 0 ]]; then
  echo "FAILED: at least one stage failed"
  exit 1
fi
echo "all stages passed (or were skipped)"
exit 0
