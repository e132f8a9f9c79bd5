#!/usr/bin/env bash
# Session 19, call 3: main vs lsum (per-thread l partials) vs s2h (S in two m64n64 halves, softmax per half as each lands, + lsum).
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K=kernels/cuda/dense_mha_wgmma_kernel.cu; W=kernels/cuda/wgmma_device.cuh
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/main/
V="lsum s2h"
for v in $V; do
  cp .devrun/variants/$v/*.cu* kernels/cuda/
  cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-$v.log 2>&1; el "built $v rc=$?"
  grep -E "C75" $L/build-$v.log | head -3 >> $L/timeline.txt
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/$v/
  git checkout -- $K $W
done
for v in $V; do
  MLA_REQUIRE_CUDA=1 timeout 60 /tmp/bin/$v/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-$v.log 2>&1; el "$v Cuda tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |Failure|SKIPPED" $L/gtest-$v.log | head -6 | tee -a $L/timeline.txt
done
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main $V; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
for tool in memcheck synccheck initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/s2h/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool-s2h.log 2>&1; el "s2h $tool rc=$?"
  tail -2 $L/san-$tool-s2h.log >> $L/timeline.txt
done
el done; save
