#!/usr/bin/env bash
# Session 22 call 3: staged epilogue (stmatrix + ld.shared + coalesced stores): tests, sanitizers, A/B x2.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
for v in staged; do
  cp .devrun/variants/$v/* kernels/cuda/
  cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-$v.log 2>&1; el "built $v rc=$?"
  grep -E "C75" $L/build-$v.log | head -3 >> $L/timeline.txt
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/$v/
  MLA_REQUIRE_CUDA=1 timeout 200 /tmp/bin/$v/mla_tests_kernels > $L/gtest-$v.log 2>&1; el "$v all kernel tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-$v.log | head -6 | tee -a $L/timeline.txt
  git checkout -- kernels/cuda/
done
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main staged; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
for tool in memcheck synccheck initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/staged/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  tail -2 $L/san-$tool.log >> $L/timeline.txt
done
MLA_REQUIRE_CUDA=1 timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/bin/staged/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMhaNeighbourRequestStaysOut' > $L/san-racecheck.log 2>&1; el "racecheck rc=$?"
tail -2 $L/san-racecheck.log >> $L/timeline.txt
el done; save
