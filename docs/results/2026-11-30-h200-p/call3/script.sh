#!/usr/bin/env bash
# Session 21 call 3: the working tree (wgmma kernel with 128-key softmax steps, host emulation,
# new test cases) verified: all GPU tests, suite, sanitizers; A/B against the previous kernel
# (old = 9342878's) and a variant (vlate: V waited after S's issue); SDPA peer.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/gpu.txt 2>&1
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K="kernels/cuda/dense_mha_wgmma_kernel.cu"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 > $L/build.log 2>&1; el "built head rc=$?"
grep -E "C75|warning" $L/build.log | head -5 >> $L/timeline.txt
mkdir -p /tmp/bin/head && cp build/bin/mla-bench build/bin/mla_tests_kernels build/bin/mla-check /tmp/bin/head/
MLA_REQUIRE_CUDA=1 timeout 200 build/bin/mla_tests_kernels > $L/gtest-kernels.log 2>&1; el "mla_tests_kernels rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|tests ran" $L/gtest-kernels.log | head -12 | tee -a $L/timeline.txt
save
for v in old vlate; do
  cp .devrun/variants/$v/dense_mha_wgmma_kernel.cu kernels/cuda/
  cmake --build build -j16 --target mla-bench > $L/build-$v.log 2>&1; el "built $v rc=$?"
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench /tmp/bin/$v/
done
git checkout -- $K
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in old head vlate; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
timeout 150 /tmp/bin/head/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
save
for tool in memcheck synccheck initcheck racecheck; do
  MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/head/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep "ERROR SUMMARY" $L/san-$tool.log | tail -1 >> $L/timeline.txt
  save
done
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/head-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
el done; save
