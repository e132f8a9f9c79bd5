#!/usr/bin/env bash
# One command for a GPU machine: configure, build, test (GPU tests included: they must not skip
# for want of a GPU), check the suite and the failure injections on the CUDA backend, sanitize,
# benchmark the cache path and attention, compare both against plain-PyTorch peers, and plot the
# sweeps (RESULTS_DIR/plots, where the Python has matplotlib). Every stage's log and JSON goes to
# RESULTS_DIR; a failed stage is recorded and the next one still runs; a summary table is printed
# at the end (and kept in RESULTS_DIR/summary.tsv), and the exit status is non-zero when any stage
# failed. Nothing falls back to the host: without a working GPU the GPU stages FAIL.
#
#   scripts/run_gpu.sh [RESULTS_DIR]          (default results/YYYYmmdd-HHMMSS)
#
# Stages and what they write in RESULTS_DIR (NAME.log for each):
#   configure, build                 cmake, with MLA_ENABLE_CUDA=ON (and MLA_REQUIRE_CUDA=ON: see
#                                    below)
#   ctest                            every CTest test but gpu.scenario.* (the check stage runs the
#                                    same scenarios on the GPU), with MLA_REQUIRE_CUDA=1: a GPU test
#                                    that finds no usable CUDA backend fails instead of skipping
#   check                            mla-check --backend cuda on the suite: check.json
#   inject-list, inject-NAME         mla-check --list-injections, then one mla-check --backend cuda
#                                    --inject NAME per listed injection (each must be caught:
#                                    exit 1): inject-NAME.json
#   sanitizer-TOOL                   ctest -L gpu -T memcheck with MLA_SANITIZER_TOOL=TOOL, for each
#                                    tool: the GPU GoogleTest cases and gpu.scenario.* (every scenario
#                                    on the CUDA backend) under compute-sanitizer, through
#                                    tests/memcheck/ctest-compute-sanitizer.sh: sanitizer/TOOL/ (CTest's
#                                    logs: MemoryChecker.N.log per test, LastDynamicAnalysis*.log)
#   bench, stream-mix                mla-bench --backend cuda, cache_path sweep: bench.json
#   bench-attention                  mla-bench --backend cuda --sweep attention (sparse MQA, dense
#                                    MHA, the forward step): bench-attention.json
#   peer-dump, peer-check, peer      mla-bench --dump, peer_check.py: bit-exact check of the
#                                    cache-path operations on the GPU (dump/, peer_check.json);
#                                    peer_timing.py: their timing (peer_torch.json)
#   peer-attention                   peer_timing.py --sweep attention --ours bench-attention.json
#                                    (SDPA for dense MHA, gather + matmul for sparse MQA, on the
#                                    GPU): peer_attention.json
#   plots                            plot_sweep.py over bench*.json and the peers': plots/
#
# Environment:
#   MLA_CUDA_ARCH=90            CMAKE_CUDA_ARCHITECTURES
#   MLA_BUILD_DIR=build         build directory
#   MLA_JOBS=N                  parallel build jobs and ctest tests (default: all cores), mla-check
#                               scenario processes (default: mla-check's own, at most 8 on the GPU)
#                               and tests under a sanitizer (default: at most 6 at once)
#   MLA_SKIP_BUILD=1            skip configure + build (use an existing build)
#   MLA_SKIP_CTEST=1  MLA_SKIP_CHECK=1  MLA_SKIP_INJECT=1  MLA_SKIP_SANITIZER=1
#   MLA_SKIP_BENCH=1  MLA_SKIP_BENCH_ATTENTION=1  MLA_SKIP_PEER=1  MLA_SKIP_PEER_ATTENTION=1
#                               skip that stage (MLA_SKIP_BENCH: bench and stream-mix)
#   MLA_CTEST_ARGS=...          extra ctest arguments (e.g. -L kernels, -R Cuda)
#   MLA_REQUIRE_CUDA=1          for the ctest and sanitizer stages (default 1; configured as the
#                               cache option MLA_REQUIRE_CUDA too): the GPU tests fail, with their
#                               skip message, when the CUDA backend is unavailable; 0 lets them
#                               skip. Skips that are legitimate on a working GPU (not compute
#                               capability 9.0, built without sm_90a) stay skips either way
#   MLA_SANITIZER_TOOLS="memcheck racecheck initcheck"      compute-sanitizer tools to run
#   MLA_SANITIZER_ARGS=...      extra ctest arguments for the sanitizer stages, e.g. a selection
#                               (-R 'gpu[.]scenario[.]attn_') or --timeout
#   MLA_SANITIZER_EXTERNAL_OK=1 (default 1) racecheck hazards that all lie in kernels outside this
#                               project (cuBLAS's nvjet_* GEMMs) do not fail their test; 0 makes
#                               them fail it. CTest's defect summary lists them either way
#   MLA_CHECK_ARGS=...          extra mla-check arguments for the suite run
#   MLA_INJECT_ARGS=...         extra mla-check arguments for the injection runs (e.g. --scenario X)
#   MLA_BENCH_ARGS=...          extra mla-bench arguments, bench stage (e.g. --quick, --benchmark_filter=gather)
#   MLA_ATTENTION_SWEEP=attention  the sweep of bench-attention and peer-attention (e.g. quick)
#   MLA_BENCH_ATTENTION_ARGS=...   extra mla-bench arguments, bench-attention stage (e.g.
#                               --benchmark_filter=sparse_mqa --benchmark_repetitions=3)
#   MLA_PEER_ARGS=...           extra scripts/peer_timing.py arguments, peer stage (e.g. --sweep quick)
#   MLA_PEER_ATTENTION_ARGS=... extra scripts/peer_timing.py arguments, peer-attention stage (e.g.
#                               --filter dense_mha --iters 20)
#   MLA_PYTHON=python3          the Python that holds PyTorch (stages that need it are skipped,
#                               SKIP, where it has none)
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
# mla-check's processes share the GPU: --jobs only when MLA_JOBS asks, else mla-check's own cap.
CHECK_JOBS="${MLA_JOBS:-0}"
ATTENTION_SWEEP="${MLA_ATTENTION_SWEEP:-attention}"
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
  require_cuda=ON
  [[ "${MLA_REQUIRE_CUDA:-1}" == 0 ]] && require_cuda=OFF
  stage configure 0 -- cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMLA_ENABLE_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=${MLA_CUDA_ARCH:-90}" "-DMLA_REQUIRE_CUDA=$require_cuda"
  stage build 0 -- cmake --build "$BUILD" -j "$JOBS"
fi

have() { [[ -x "$BIN/$1" ]]; }

# --- Tests --------------------------------------------------------------------------------------
if skipped MLA_SKIP_CTEST; then
  skip ctest "MLA_SKIP_CTEST=1"
else
  # MLA_REQUIRE_CUDA: the GPU tests' "CUDA backend unavailable" skip is a failure here
  # (tests/kernels/cuda/require_cuda.h); without it a machine whose GPU does not work would pass.
  # gpu.scenario.*: the check stage runs the same scenarios on the GPU, with a report.
  # shellcheck disable=SC2086
  stage ctest 0 -- env MLA_REQUIRE_CUDA="${MLA_REQUIRE_CUDA:-1}" ctest --test-dir "$BUILD" --output-on-failure \
    -j "$JOBS" -E '^gpu[.]scenario[.]' ${MLA_CTEST_ARGS:-}
fi

# --- Suite and injections -----------------------------------------------------------------------
if skipped MLA_SKIP_CHECK; then
  skip check "MLA_SKIP_CHECK=1"
elif ! have mla-check; then
  record check FAIL 0 "$BIN/mla-check was not built"
else
  # --backend cuda, not auto: without a working GPU this fails (exit 2) instead of passing on the host.
  # shellcheck disable=SC2086
  stage check 0 -- "$BIN/mla-check" --backend cuda --jobs "$CHECK_JOBS" --report "$RESULTS/check.json" \
    ${MLA_CHECK_ARGS:-}
fi

if skipped MLA_SKIP_INJECT; then
  skip inject "MLA_SKIP_INJECT=1"
elif ! have mla-check; then
  record inject FAIL 0 "$BIN/mla-check was not built"
else
  # The injections are the ones this mla-check knows: the first word of each line of
  # `mla-check --list-injections` (NAME caught by CHECK as VERDICT  DESCRIPTION).
  INJECTIONS=()
  list_log="$RESULTS/inject-list.log"
  list_start=$(date +%s)
  list_rc=0
  "$BIN/mla-check" --list-injections >"$list_log" 2>&1 || list_rc=$?
  list_secs=$(( $(date +%s) - list_start ))
  bad_line=""
  while read -r inj _; do
    [[ -z "$inj" ]] && continue
    if [[ "$inj" =~ ^[a-z0-9][a-z0-9-]*$ ]]; then
      INJECTIONS+=("$inj")
    else
      bad_line="$inj"
      break
    fi
  done <"$list_log"
  if [[ "$list_rc" != 0 ]]; then
    record inject-list FAIL "$list_secs" "mla-check --list-injections exited $list_rc: no injection run, log inject-list.log"
  elif [[ -n "$bad_line" ]]; then
    record inject-list FAIL "$list_secs" "mla-check --list-injections: '$bad_line' is not an injection name: no injection run, log inject-list.log"
  elif [[ ${#INJECTIONS[@]} == 0 ]]; then
    record inject-list FAIL "$list_secs" "mla-check --list-injections listed no injection, log inject-list.log"
  else
    record inject-list PASS "$list_secs" "${#INJECTIONS[@]} injections: ${INJECTIONS[*]}"
  fi
  # Each injected failure must be caught on the GPU: mla-check exits 1 (a check failed); 2 when
  # the CUDA backend is unavailable or the selection cannot exercise the injection.
  for inj in ${INJECTIONS[@]+"${INJECTIONS[@]}"}; do
    # shellcheck disable=SC2086
    stage "inject-$inj" 1 -- "$BIN/mla-check" --backend cuda --inject "$inj" --jobs "$CHECK_JOBS" --quiet \
      --report "$RESULTS/inject-$inj.json" ${MLA_INJECT_ARGS:-}
  done
fi

# --- Sanitizers ---------------------------------------------------------------------------------
# ctest -T memcheck over the tests labelled gpu, once per tool. Each test runs under
# compute-sanitizer through tests/memcheck/ctest-compute-sanitizer.sh, which fails it on a finding
# (racecheck hazards only inside cuBLAS's own GEMM kernels aside, with MLA_SANITIZER_EXTERNAL_OK=1,
# the default: they would fail every run on a healthy GPU). CTest prints a defect summary by kind
# and keeps each test's sanitizer log, copied to sanitizer/TOOL/.
have_sanitizer() {
  command -v compute-sanitizer >/dev/null 2>&1 || [[ -x "${MLA_COMPUTE_SANITIZER:-}" ]] ||
    [[ -x /usr/local/cuda/bin/compute-sanitizer ]]
}
if skipped MLA_SKIP_SANITIZER; then
  skip sanitizer "MLA_SKIP_SANITIZER=1"
elif ! have_sanitizer; then
  record sanitizer FAIL 0 "compute-sanitizer not found (PATH, /usr/local/cuda/bin, MLA_COMPUTE_SANITIZER)"
elif [[ ! -f "$BUILD/DartConfiguration.tcl" ]]; then
  record sanitizer FAIL 0 "$BUILD is not a configured build with tests (no DartConfiguration.tcl)"
else
  # At most 6 tests at once unless MLA_JOBS says otherwise: they share one GPU, and past a few the
  # instrumented kernels mostly wait for each other.
  SANITIZER_JOBS="${MLA_JOBS:-$((JOBS < 6 ? JOBS : 6))}"
  for tool in ${MLA_SANITIZER_TOOLS:-memcheck racecheck initcheck}; do
    rm -f "$BUILD"/Testing/Temporary/MemoryChecker.*.log
    # shellcheck disable=SC2086
    stage "sanitizer-$tool" 0 -- env MLA_SANITIZER_TOOL="$tool" MLA_REQUIRE_CUDA="${MLA_REQUIRE_CUDA:-1}" \
      MLA_SANITIZER_EXTERNAL_OK="${MLA_SANITIZER_EXTERNAL_OK:-1}" ctest --test-dir "$BUILD" -L gpu -T memcheck \
      -j "$SANITIZER_JOBS" --output-on-failure ${MLA_SANITIZER_ARGS:-}
    mkdir -p "$RESULTS/sanitizer/$tool"
    cp "$BUILD"/Testing/Temporary/MemoryChecker.*.log "$BUILD"/Testing/Temporary/LastDynamicAnalysis*.log \
      "$RESULTS/sanitizer/$tool/" 2>/dev/null || true
  done
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

# Attention: sparse MQA, dense MHA and the forward step, against the bf16 GEMM rate of the run.
if skipped MLA_SKIP_BENCH_ATTENTION; then
  skip bench-attention "MLA_SKIP_BENCH_ATTENTION=1"
elif ! have mla-bench; then
  record bench-attention FAIL 0 "$BIN/mla-bench was not built"
else
  # shellcheck disable=SC2086
  stage bench-attention 0 -- "$BIN/mla-bench" --backend cuda --sweep "$ATTENTION_SWEEP" \
    "--benchmark_out=$RESULTS/bench-attention.json" --benchmark_out_format=json ${MLA_BENCH_ATTENTION_ARGS:-}
fi

# --- Peer (PyTorch) -----------------------------------------------------------------------------
# --device cuda: the peers run on the GPU or fail (no CPU fallback).
if skipped MLA_SKIP_PEER; then
  skip peer "MLA_SKIP_PEER=1"
elif ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
  skip peer "$PYTHON has no torch"
elif ! have mla-bench; then
  record peer FAIL 0 "$BIN/mla-bench was not built"
else
  stage peer-dump 0 -- "$BIN/mla-bench" --backend cuda --dump "$RESULTS/dump"
  stage peer-check 0 -- "$PYTHON" scripts/peer_check.py --dump "$RESULTS/dump" --device cuda \
    --out "$RESULTS/peer_check.json"
  # shellcheck disable=SC2086
  stage peer 0 -- "$PYTHON" scripts/peer_timing.py --mla-bench "$BIN/mla-bench" --device cuda \
    --out "$RESULTS/peer_torch.json" ${MLA_PEER_ARGS:-}
fi

# SDPA (dense MHA) and gather + matmul (sparse MQA) on the attention sweep's shapes, with our
# times from bench-attention.json beside them (ours / peer).
if skipped MLA_SKIP_PEER_ATTENTION; then
  skip peer-attention "MLA_SKIP_PEER_ATTENTION=1"
elif ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
  skip peer-attention "$PYTHON has no torch"
else
  ours_args=()
  if [[ -s "$RESULTS/bench-attention.json" ]]; then
    ours_args=(--ours "$RESULTS/bench-attention.json")
  else
    echo "peer-attention: no bench-attention.json: the peer's times alone, without ours beside them"
  fi
  # shellcheck disable=SC2086
  stage peer-attention 0 -- "$PYTHON" scripts/peer_timing.py --mla-bench "$BIN/mla-bench" --sweep "$ATTENTION_SWEEP" \
    --device cuda ${ours_args[@]+"${ours_args[@]}"} --out "$RESULTS/peer_attention.json" ${MLA_PEER_ATTENTION_ARGS:-}
fi

# --- Plots --------------------------------------------------------------------------------------
bench_files=() peer_args=()
for f in bench.json bench-attention.json; do
  [[ -s "$RESULTS/$f" ]] && bench_files+=("$RESULTS/$f")
done
for f in peer_torch.json peer_attention.json; do
  [[ -s "$RESULTS/$f" ]] && peer_args+=(--peer "$RESULTS/$f")
done
if [[ ${#bench_files[@]} == 0 ]]; then
  skip plots "no bench.json or bench-attention.json"
elif ! "$PYTHON" -c 'import matplotlib' >/dev/null 2>&1; then
  skip plots "$PYTHON has no matplotlib (scripts/requirements.txt)"
else
  stage plots 0 -- "$PYTHON" scripts/plot_sweep.py "${bench_files[@]}" ${peer_args[@]+"${peer_args[@]}"} --out "$RESULTS/plots"
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
