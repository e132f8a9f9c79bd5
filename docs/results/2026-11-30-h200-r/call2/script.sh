#!/usr/bin/env bash
# Session 23 call 2: narrow last tile (narrow: S m64n64 + 32-score softmax + P V over 4 k16 steps;
# narrowpv: the full S, the narrow softmax and P V), the fixed halfkv probe; tests, A/B, memcheck, suite.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
for v in narrow narrowpv halfkv2; do
  cp .devrun/variants/$v/* kernels/cuda/
  T="mla-bench"; [ $v != halfkv2 ] && T="mla-bench mla_tests_kernels"; [ $v = narrow ] && T="$T mla-check"
  cmake --build build -j16 --target $T > $L/build-$v.log 2>&1; el "built $v rc=$?"
  grep -E "error|C75" $L/build-$v.log | grep -v C7519 | head -5 >> $L/timeline.txt
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench /tmp/bin/$v/
  [ $v != halfkv2 ] && cp build/bin/mla_tests_kernels /tmp/bin/$v/
  [ $v = narrow ] && cp build/bin/mla-check /tmp/bin/$v/
  git checkout -- kernels/cuda/
done
MLA_REQUIRE_CUDA=1 timeout 100 /tmp/bin/narrow/mla_tests_kernels > $L/gtest-narrow.log 2>&1; el "narrow all kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-narrow.log | head -12 | tee -a $L/timeline.txt
MLA_REQUIRE_CUDA=1 timeout 60 /tmp/bin/narrowpv/mla_tests_kernels --gtest_filter='CudaAttention*' > $L/gtest-narrowpv.log 2>&1; el "narrowpv attention tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-narrowpv.log | head -12 | tee -a $L/timeline.txt
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main narrow narrowpv halfkv2; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
for tool in memcheck synccheck; do
  MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/narrow/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep "ERROR SUMMARY" $L/san-$tool.log | tail -1 >> $L/timeline.txt
done
save
timeout 150 /tmp/bin/narrow/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check-cuda.log 2>&1; el "suite rc=$?"
tail -3 $L/check-cuda.log >> $L/timeline.txt
el done; save
