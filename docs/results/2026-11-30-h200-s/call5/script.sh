#!/usr/bin/env bash
# Session 24 call 5: the LSE stores. Probes nolse (LSE never stored) and lset (stored as [H][total_q],
# one 32-byte sector per warp store; wrong layout, timing only), and hgroup (items ordered in groups
# of 8 heads per (request, query tile), correct): A/B against main, hgroup's dense tests.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
cp kernels/cuda/dense_mha_wgmma_kernel.cu /tmp/main_kernel.cu
for v in hgroup nolse lset; do
  cp .devrun/variants/$v/dense_mha_wgmma_kernel.cu kernels/cuda/
  T="mla-bench"; [ $v = hgroup ] && T="mla-bench mla_tests_kernels"
  cmake --build build -j16 --target $T > $L/build-$v.log 2>&1; el "built $v rc=$?"
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench /tmp/bin/$v/
  [ $v = hgroup ] && cp build/bin/mla_tests_kernels /tmp/bin/$v/
done
cp /tmp/main_kernel.cu kernels/cuda/dense_mha_wgmma_kernel.cu
MLA_REQUIRE_CUDA=1 timeout 60 /tmp/bin/hgroup/mla_tests_kernels --gtest_filter='CudaAttention*:*Dense*' > $L/gtest-hgroup.log 2>&1; el "hgroup dense tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-hgroup.log | head -8 | tee -a $L/timeline.txt
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main hgroup nolse lset; do
    timeout 45 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
el done; save
