#!/usr/bin/env bash
# Session 21 call 2: s128 = one online-softmax step per 128-key tile (S_t issued first, then the
# whole P_{t-1} V, no O rescale between its halves). Tests (expected: some DenseMhaMatchesHost
# cases differ from the 64-step host), A/B against main, suite (vs the reference), sanitizers, SDPA.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/gpu.txt 2>&1
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K="kernels/cuda/dense_mha_wgmma_kernel.cu"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
cp .devrun/variants/s128/dense_mha_wgmma_kernel.cu kernels/cuda/
cmake --build build -j16 > $L/build-s128.log 2>&1; el "built s128 rc=$?"
grep -E "C75" $L/build-s128.log | head -3 >> $L/timeline.txt
mkdir -p /tmp/bin/s128 && cp build/bin/mla-bench build/bin/mla_tests_kernels build/bin/mla-check /tmp/bin/s128/
MLA_REQUIRE_CUDA=1 timeout 90 /tmp/bin/s128/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-s128.log 2>&1; rc=$?; el "s128 Cuda tests rc=$rc"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-s128.log | head -12 | tee -a $L/timeline.txt
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main s128; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
timeout 150 /tmp/bin/s128/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
save
for tool in memcheck synccheck initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool /tmp/bin/s128/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool-s128.log 2>&1; el "s128 $tool rc=$?"
  grep "ERROR SUMMARY" $L/san-$tool-s128.log | tail -1 >> $L/timeline.txt
done
save
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/s128-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
git checkout -- $K
el done; save
