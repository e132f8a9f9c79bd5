#!/usr/bin/env bash
# Session 19, call 4: main (q-regs + per-thread l) verified (Cuda* tests, suite, sanitizers), A/B
# against fexp / p4 (softmax variants), SDPA peer on the same shapes.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt 2>&1
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K=kernels/cuda/dense_mha_wgmma_kernel.cu
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 > $L/build.log 2>&1; el "built main rc=$?"
grep -E "C75" $L/build.log | head -3 >> $L/timeline.txt
mkdir -p /tmp/bin/main && cp build/bin/mla-bench build/bin/mla_tests_kernels build/bin/mla-check /tmp/bin/main/
V="fexp p4"
for v in $V; do
  cp .devrun/variants/$v/*.cu kernels/cuda/
  cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-$v.log 2>&1; el "built $v rc=$?"
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/$v/
  git checkout -- $K
done
MLA_REQUIRE_CUDA=1 timeout 100 /tmp/bin/main/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-cuda.log 2>&1; el "main Cuda tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" $L/gtest-cuda.log | head -8 | tee -a $L/timeline.txt
for v in $V; do
  MLA_REQUIRE_CUDA=1 timeout 60 /tmp/bin/$v/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/gtest-$v.log 2>&1; el "$v dense tests rc=$?"
done
save
timeout 150 /tmp/bin/main/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main $V; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/main-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
save
for tool in memcheck synccheck initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/main/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "main $tool rc=$?"
  tail -1 $L/san-$tool.log >> $L/timeline.txt
done
el done; save
