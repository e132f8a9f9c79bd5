#!/usr/bin/env bash
# The memory checker of `ctest -T memcheck` (CMakeLists.txt: MEMORYCHECK_COMMAND, memory check type
# CudaSanitizer): runs compute-sanitizer with CTest's arguments and decides the test's outcome.
#
#   ctest --test-dir build -L gpu -T memcheck -j 6                           (memcheck)
#   MLA_SANITIZER_TOOL=racecheck ctest --test-dir build -L gpu -T memcheck -j 6
#
# CTest calls it as `ctest-compute-sanitizer.sh --log-file FILE OPTIONS... TEST_COMMAND...`
# (OPTIONS: MEMORYCHECK_COMMAND_OPTIONS, or ctest --overwrite MemoryCheckCommandOptions=...).
# CTest reads FILE for its defect summary (Testing/Temporary/MemoryChecker.N.log, and the
# "-- Processing memory checking output" table): every finding is listed there, including the ones
# that do not fail the test (below).
#
# The tool: $MLA_SANITIZER_TOOL when set (memcheck, racecheck, initcheck or synccheck; it replaces a
# --tool of the options), else the options' --tool, else memcheck. An --error-exitcode of the
# options is dropped: the outcome is decided here, from the test's own exit status and the log:
#   - the test's exit status when it is not 0 (the test failed, whatever the sanitizer found);
#   - 98 when the sanitizer itself failed ("Internal Sanitizer Error") before any finding;
#   - 99 when the sanitizer reported an error or a hazard, except: racecheck hazards that all lie in
#     kernels outside this project (no function in namespace mla::, e.g. cuBLAS's nvjet_* GEMM
#     kernels, which racecheck reports on a healthy GPU) pass, with a note naming the kernels,
#     unless MLA_SANITIZER_EXTERNAL_OK=0;
#   - 97 when the log has no summary line (the sanitizer did not finish), unless the process never
#     used CUDA (compute-sanitizer's "terminated before first instrumented API call"): nothing to
#     check, 0;
#   - 0 otherwise.
# The sanitizer: $MLA_COMPUTE_SANITIZER, else compute-sanitizer on PATH, in $CUDA_HOME/bin or in
# /usr/local/cuda/bin.
set -u -o pipefail

me="ctest-compute-sanitizer"
sanitizer="${MLA_COMPUTE_SANITIZER:-}"
if [[ -z "$sanitizer" ]]; then
  for c in "$(command -v compute-sanitizer 2>/dev/null)" "${CUDA_HOME:+$CUDA_HOME/bin/compute-sanitizer}" \
           /usr/local/cuda/bin/compute-sanitizer; do
    if [[ -n "$c" && -x "$c" ]]; then sanitizer="$c"; break; fi
  done
fi
if [[ -z "$sanitizer" ]]; then
  echo "$me: compute-sanitizer not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin; or set MLA_COMPUTE_SANITIZER)" >&2
  exit 2
fi

# The arguments, with the tool chosen and without --error-exitcode.
tool="" log="" args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tool) tool="${2:-}"; shift 2 ;;
    --error-exitcode) shift 2 ;;
    --log-file) log="${2:-}"; args+=("$1" "$log"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
tool="${MLA_SANITIZER_TOOL:-${tool:-memcheck}}"
own_log=0
if [[ -z "$log" ]]; then  # run by hand: a log of our own, shown at the end
  log="$(mktemp)"
  own_log=1
  args=(--log-file "$log" "${args[@]}")
fi

"$sanitizer" --tool "$tool" "${args[@]}"
rc=$?
if [[ "$own_log" == 1 ]]; then cat "$log" >&2; fi
finish() {
  [[ "$own_log" == 1 ]] && rm -f "$log"
  exit "$1"
}

if [[ "$rc" != 0 ]]; then
  finish "$rc"
fi
if [[ ! -r "$log" ]]; then
  echo "$me: no sanitizer log at $log" >&2
  finish 97
fi
summary="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 | sed 's/^=* *//')"
findings=0
grep -qE '^=+ +(Error: Race reported|Invalid |Uninitialized |Barrier error|Program hit )' "$log" && findings=1
if grep -q 'Internal Sanitizer Error' "$log" && [[ "$findings" == 0 ]]; then
  echo "$me: $tool itself failed (Internal Sanitizer Error): the test is unchecked" >&2
  finish 98
fi
if [[ -z "$summary" ]]; then
  if grep -q 'terminated before first instrumented API call' "$log"; then
    finish 0  # the process made no CUDA call: nothing to check
  fi
  echo "$me: $tool wrote no summary line to $log: the test is unchecked" >&2
  finish 97
fi
if [[ "$summary" =~ ^(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards) ]] && [[ "$findings" == 0 ]]; then
  finish 0
fi

if [[ "$tool" == racecheck ]] && ! grep -q 'Internal Sanitizer Error' "$log"; then
  # "Error: Race reported between Read access at FN+0x2050 in FILE:LINE" and its "and Write access
  # at FN+0x20f0 [in FILE:LINE] [24 hazards]" line (no "in" part without line information). The
  # functions are the innermost ones (often an inlined device helper rather than the kernel).
  kernels="$(sed -nE 's/^=+ +(Error: Race reported between|and) [A-Za-z]+ access at (.+)\+0x[0-9a-f]+( in [^ ]+)?( \[[0-9]+ hazards?\])?$/\2/p' "$log" |
    sort -u | paste -sd ';' -)"
  reported=$(grep -c 'Race reported' "$log")
  parsed=$(grep -cE '^=+ +Error: Race reported between [A-Za-z]+ access at ' "$log")
  if [[ -n "$kernels" && "$reported" == "$parsed" ]] && ! grep -q 'mla::' <<<"$kernels"; then
    if [[ "${MLA_SANITIZER_EXTERNAL_OK:-1}" != 0 ]]; then
      echo "$me: EXTERNAL: every racecheck hazard lies outside this project's kernels ($summary; in: $kernels)" >&2
      finish 0
    fi
    echo "$me: racecheck hazards, all outside this project's kernels, fail with MLA_SANITIZER_EXTERNAL_OK=0 ($summary; in: $kernels)" >&2
    finish 99
  fi
  [[ -n "$kernels" ]] && summary="$summary; in: $kernels"
fi
echo "$me: $tool: $summary" >&2
finish 99
