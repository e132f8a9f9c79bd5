#!/usr/bin/env bash
# Session 21 call 4: the committed tree (kernel as timed in call 3; DenseMhaMatchesHost without the
# scale-1 / scale-2 cases): every GPU test, the dense tests under memcheck / synccheck / initcheck,
# racecheck on one small dense test, and the suite.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON > $L/cfg.log 2>&1
cmake --build build -j16 > $L/build.log 2>&1; el "built rc=$?"
grep -E "C75|warning" $L/build.log | head -5 >> $L/timeline.txt
MLA_REQUIRE_CUDA=1 timeout 200 build/bin/mla_tests_kernels > $L/gtest-kernels.log 2>&1; el "mla_tests_kernels rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" $L/gtest-kernels.log | head -12 | tee -a $L/timeline.txt
save
for tool in memcheck synccheck initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 build/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $L/san-$tool.log | tail -2 >> $L/timeline.txt
done
MLA_REQUIRE_CUDA=1 timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 build/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMhaNeighbourRequestStaysOut' > $L/san-racecheck.log 2>&1; el "racecheck rc=$?"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED" $L/san-racecheck.log | tail -2 >> $L/timeline.txt
save
timeout 150 build/bin/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
el done; save
