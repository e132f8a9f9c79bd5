#!/usr/bin/env bash
# compute-sanitizer over the scenario suite on the CUDA backend: one process per (tool, scenario
# file), up to MLA_JOBS at once, each `mla-check --backend cuda --no-isolate --scenario FILE` under
# `compute-sanitizer --tool TOOL --error-exitcode 99` (in-process: the sanitizer watches the process
# that runs the kernels). Scenario files come from `mla-check --list` with the extra arguments, so
# --filter / --exclude-tag select them as they would the suite.
#
#   scripts/sanitize_suite.sh RESULTS_DIR [mla-check selection arguments...]
#   (e.g. --scenario-dir DIR for the scenario files in DIR only)
#
# Writes RESULTS_DIR/sanitizer/TOOL/SCENARIO.log and RESULTS_DIR/sanitizer.tsv (tool, scenario,
# status, seconds, summary line), sorted, at the end; while it runs, each row is appended to
# RESULTS_DIR/sanitizer.partial.tsv as its run ends (what is left there when the script is stopped
# early; removed once sanitizer.tsv is written). Stopped by INT or TERM, it stops the runs in
# progress too and exits with 130. Status is PASS (exit 0 and a zero-error summary), ERRORS (the
# sanitizer found something: exit 99), EXTERNAL (racecheck: every reported hazard is in functions
# outside this project, none in namespace mla::, e.g. cuBLAS's nvjet_* GEMM kernels), TOOL_ERROR
# (the sanitizer itself failed: "Internal Sanitizer Error" and no finding of its own before that),
# TIMEOUT, STOPPED (the script was stopped while it ran), or FAIL (any other exit: mla-check itself
# failed). For racecheck hazards the summary names the functions of both accesses (the innermost:
# often an inlined helper rather than the kernel; cuBLAS's own GEMM kernels, nvjet_*, are reported
# by racecheck too, and are not ours). Racecheck is run on every kernel: with
# a --kernel-name or --kernel-name-exclude filter, compute-sanitizer 2025.3.1 failed with "Internal
# Sanitizer Error: failed to handle a hardware exception" in the forward step (H200, CUDA 13.0).
# Exit status: 0 when every run is PASS (or EXTERNAL, with MLA_SANITIZER_EXTERNAL_OK=1), 1
# otherwise, 2 on a usage error, 130 when stopped.
#
# Environment: MLA_BUILD_DIR (build), MLA_SANITIZER_TOOLS ("memcheck racecheck initcheck"),
# MLA_SANITIZER_TIMEOUT (seconds per process, 900), MLA_JOBS (parallel processes: at most 6 by
# default, fewer where there are fewer cores; more only when MLA_JOBS asks for it),
# MLA_SANITIZER_PER_CHECK (1: one process per scenario and check, `mla-check --check CHECK`, logs
# and rows named SCENARIO.CHECK; for scenarios too slow under a sanitizer to finish in one go).
set -u -o pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 RESULTS_DIR [mla-check selection arguments...]" >&2
  exit 2
fi
# RESULTS_DIR is taken relative to the caller's directory; everything runs from the repository root.
mkdir -p "$1/sanitizer" || exit 2
RESULTS="$(cd "$1" && pwd)"
shift
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
CHECK="${MLA_BUILD_DIR:-build}/bin/mla-check"
TOOLS="${MLA_SANITIZER_TOOLS:-memcheck racecheck initcheck}"
TIMEOUT="${MLA_SANITIZER_TIMEOUT:-900}"
# At most 6 processes unless asked: they share one GPU, and past a few the instrumented kernels
# mostly wait for each other. On an H200 (2026-11-30), racecheck runs of attention scenarios that
# did not finish in 440 s with 16 processes at once took 15-180 s with 6-10 at once
# (docs/performance.md, seventh session).
JOBS="${MLA_JOBS:-$(cores=$(nproc 2>/dev/null || echo 4); echo $((cores < 6 ? cores : 6)))}"

if [[ ! -x "$CHECK" ]]; then
  echo "$0: $CHECK was not built" >&2
  exit 2
fi
if ! command -v compute-sanitizer >/dev/null 2>&1; then
  echo "$0: compute-sanitizer not found on PATH" >&2
  exit 2
fi

# --list prints "NAME CHECKS FILE" per scenario (names and checks have no spaces; the file may).
# Each entry here: RUN NAME, a tab, the check to run alone (empty: all), a tab, FILE. Logs are
# named after the run (scenario names are unique).
PER_CHECK="${MLA_SANITIZER_PER_CHECK:-0}"
mapfile -t FILES < <("$CHECK" --list "$@" | sed -nE 's/^([^ ]+) +([^ ]+) +(.+)$/\1\t\2\t\3/p' |
  while IFS=$'\t' read -r name checks file; do
    if [[ "$PER_CHECK" == 1 ]]; then
      for c in ${checks//,/ }; do printf '%s.%s\t%s\t%s\n' "$name" "$c" "$c" "$file"; done
    else
      printf '%s\t\t%s\n' "$name" "$file"
    fi
  done)
if [[ ${#FILES[@]} -eq 0 ]]; then
  echo "$0: no scenario selected" >&2
  exit 2
fi

# One run: TOOL "NAME<tab>CHECK<tab>FILE" -> one TSV row on stdout.
run_one() {
  local tool="$1" name="${2%%$'\t'*}" rest="${2#*$'\t'}" check file log start rc secs summary status only=()
  check="${rest%%$'\t'*}"  # (not `read`: a tab is IFS white space, an empty field would vanish)
  file="${rest#*$'\t'}"
  if [[ -n "$check" ]]; then only=(--check "$check"); fi
  mkdir -p "$RESULTS/sanitizer/$tool"
  log="$RESULTS/sanitizer/$tool/$name.log"
  start=$(date +%s)
  # In the background, registered in $RUNNING until its row is out: a file named after the timeout's
  # PID, holding this shell's (stop_runs).
  timeout -k 30 "$TIMEOUT" compute-sanitizer --tool "$tool" --error-exitcode 99 \
    "$CHECK" --backend cuda --no-isolate --quiet "${only[@]}" --scenario "$file" >"$log" 2>&1 &
  local tpid=$!
  echo "$BASHPID" >"$RUNNING/$tpid"
  # A stop between xargs starting this shell and the line above has not seen this run: stop it here.
  [[ -e "$RUNNING/.stop" ]] && kill -TERM "$tpid" 2>/dev/null
  wait "$tpid"
  rc=$?
  secs=$(( $(date +%s) - start ))
  summary="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 | sed 's/^=* *//')"
  local crashed=0 external=0
  grep -q 'Internal Sanitizer Error' "$log" && crashed=1
  if [[ "$tool" == racecheck && "$rc" == 99 ]]; then
    local kernels
    # "Error: Race reported between Read access at FN+0x2050 in FILE:LINE" and its "and Write
    # access at FN+0x20f0 [in FILE:LINE] [24 hazards]" line (no "in" part without line info).
    kernels="$(sed -nE 's/^=+ +(Error: Race reported between|and) [A-Za-z]+ access at (.+)\+0x[0-9a-f]+( in [^ ]+)?( \[[0-9]+ hazards?\])?$/\2/p' "$log" |
      sort -u | paste -sd ';' -)"
    [[ -n "$kernels" ]] && summary="$summary; in: $kernels"
    # EXTERNAL: every hazard parsed (each "Race reported" line is an "Error: Race reported
    # between" one), none in namespace mla (our kernels, and the device helpers racecheck names
    # when inlined), and racecheck finished (after an Internal Sanitizer Error the kernels it had
    # not reached are unchecked).
    local reported parsed
    reported=$(grep -c 'Race reported' "$log")
    parsed=$(grep -cE '^=+ +Error: Race reported between [A-Za-z]+ access at ' "$log")
    if [[ -n "$kernels" && "$reported" == "$parsed" && "$crashed" == 0 ]] && ! grep -q 'mla::' <<<"$kernels"; then
      external=1
    fi
  fi
  # The sanitizer failed: TOOL_ERROR, unless it had reported a finding of its own before.
  if [[ "$crashed" == 1 ]] && ! grep -qE '^=+ +(Error: Race reported|Invalid |Uninitialized )' "$log"; then
    rc=tool
  fi
  if [[ -e "$RUNNING/.stop" ]]; then rc=stopped; fi
  case "$rc" in
    stopped) status=STOPPED; summary="${summary:-stopped with the script, no summary line}" ;;
    tool) status=TOOL_ERROR ;;
    0) if [[ "$summary" =~ ^(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards) ]]; then status=PASS; else status=FAIL; fi ;;
    99) if [[ "$external" == 1 ]]; then status=EXTERNAL; else status=ERRORS; fi ;;
    124 | 137) status=TIMEOUT ;;
    *) status=FAIL ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$name" "$status" "$secs" "${summary:-exit $rc, no summary line}"
  rm -f "$RUNNING/$tpid"
}
RUNNING="$RESULTS/sanitizer.running"  # a file per run in progress, named after its timeout's PID
rm -rf "$RUNNING"
mkdir -p "$RUNNING" || exit 2
export -f run_one
export RESULTS CHECK TIMEOUT RUNNING

TSV="$RESULTS/sanitizer.tsv"
PARTIAL="$RESULTS/sanitizer.partial.tsv"
QUEUE="$RESULTS/sanitizer.queue"
: >"$PARTIAL"
for tool in $TOOLS; do
  for f in "${FILES[@]}"; do printf '%s\n%s\n' "$tool" "$f"; done
done >"$QUEUE"

# Stopped (INT / TERM): no new run starts, and the runs in progress stop too. Each `timeout` runs
# in a process group of its own, out of reach of a signal to ours (Ctrl-C), so each is told by PID
# (it passes the signal on to the sanitizer and its target); their rows say STOPPED.
stop_runs() {
  trap - INT TERM
  : >"$RUNNING/.stop"
  [[ -n "$XARGS" ]] && kill -TERM "$XARGS" 2>/dev/null
  local f i
  for f in "$RUNNING"/[0-9]*; do kill -TERM "${f##*/}" 2>/dev/null; done
  [[ -n "$XARGS" ]] && wait "$XARGS" 2>/dev/null
  # Until every run's shell has written its row (each ends when its timeout does: as background
  # jobs they ignore Ctrl-C's INT); at most ~40 s (timeout's -k 30).
  for ((i = 0; i < 400; ++i)); do
    local busy=0
    for f in "$RUNNING"/[0-9]*; do
      [[ -e "$f" ]] && kill -0 "$(cat "$f" 2>/dev/null)" 2>/dev/null && busy=1
    done
    ((busy)) || break
    sleep 0.1
  done
  rm -rf "$RUNNING" "$QUEUE"
  echo "$0: stopped; the rows of the runs that ended are in $PARTIAL" >&2
  exit 130
}
XARGS=""  # (set before the trap: a signal before xargs starts finds nothing to kill)
trap stop_runs INT TERM
xargs -d '\n' -n 2 -P "$JOBS" -a "$QUEUE" bash -c 'run_one "$0" "$1"' >>"$PARTIAL" &
XARGS=$!
wait "$XARGS"
trap - INT TERM
sort "$PARTIAL" >"$TSV"
rm -rf "$PARTIAL" "$RUNNING" "$QUEUE"

total=$(wc -l <"$TSV")
passed=$(awk -F'\t' '$3 == "PASS"' "$TSV" | wc -l)
external=$(awk -F'\t' '$3 == "EXTERNAL"' "$TSV" | wc -l)
for tool in $TOOLS; do
  printf '%-10s %s\n' "$tool" "$(awk -F'\t' -v t="$tool" '$1 == t { n[$3]++ } END { for (s in n) printf "%s %d  ", s, n[s] }' "$TSV")"
done
awk -F'\t' '$3 != "PASS" { print "  " $1 " " $2 ": " $3 " (" $5 ")" }' "$TSV"
echo "sanitizer: $passed of $total runs clean, $external with hazards only outside this project (${#FILES[@]} runs per tool: $TOOLS); $TSV"
if [[ "${MLA_SANITIZER_EXTERNAL_OK:-0}" == 1 ]]; then
  [[ $((passed + external)) == "$total" ]]
else
  [[ "$passed" == "$total" ]]
fi
