#!/usr/bin/env bash
# Session 26, call 4 (397f055's tree): call 3's sanitizer runs again without the fault-injection
# death test (CudaBackendFaults.*: it faults on purpose in a child process and hung under every
# tool in call 3), each tool with its own time limit; racecheck of the attention tests.
# Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla_tests_kernels > $L/build.log 2>&1; el "built rc=$?"
B=build/bin
G='Cuda*:*Dense*:*Sparse*:Fp8E4m3Cuda*:-CudaBackendFaults.*'
for tool in memcheck initcheck synccheck; do
  MLA_REQUIRE_CUDA=1 timeout 50 compute-sanitizer --tool $tool --error-exitcode 9 $B/mla_tests_kernels --gtest_filter="$G" > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep -E "^\[  (PASSED|FAILED) |ERROR SUMMARY" $L/san-$tool.log | tee -a $L/timeline.txt
  save
done
MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $B/mla_tests_kernels --gtest_filter='CudaAttentionTest.*' > $L/san-racecheck.log 2>&1; el "racecheck rc=$?"
grep -E "^\[  (PASSED|FAILED) |RACECHECK SUMMARY|ERROR SUMMARY" $L/san-racecheck.log | tee -a $L/timeline.txt
el done; save
