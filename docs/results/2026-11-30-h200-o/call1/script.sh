#!/usr/bin/env bash
# Session 20's first call (pass carry [".devrun"]), ~7 min. 1) HEAD verified as a whole (46b6dde's
# ex2 rescale factors have only run the dense unit tests): Cuda* tests, the suite, memcheck /
# synccheck / initcheck of the dense tests. 2) A/B of two variants prepared in session 19, compiled,
# never run: sfirst = wip/dense-s-first (S_t before P V, both P V halves at once where factor_b is
# all 1), rowvote = wip/dense-row-votes (O rescale voted per row group). 3) SDPA peer.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/gpu.txt 2>&1
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K=kernels/cuda/dense_mha_wgmma_kernel.cu
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench build/bin/mla_tests_kernels build/bin/mla-check /tmp/bin/main/
V="sfirst rowvote"
for v in $V; do
  cp .devrun/variants/$v/* kernels/cuda/
  cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-$v.log 2>&1; el "built $v rc=$?"
  grep -E "C75" $L/build-$v.log | head -3 >> $L/timeline.txt
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/$v/
  git checkout -- $K kernels/cuda/wgmma_device.cuh
done
MLA_REQUIRE_CUDA=1 timeout 100 /tmp/bin/main/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-cuda.log 2>&1; el "main Cuda tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" $L/gtest-cuda.log | head -8 | tee -a $L/timeline.txt
ok=()
for v in $V; do
  MLA_REQUIRE_CUDA=1 timeout 60 /tmp/bin/$v/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-$v.log 2>&1; rc=$?; el "$v Cuda tests rc=$rc"
  grep -E "^\[  (PASSED|FAILED) |Failure" $L/gtest-$v.log | head -4 | tee -a $L/timeline.txt
  [ $rc = 0 ] && ok+=($v)
done
save
timeout 150 /tmp/bin/main/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main ${ok[@]+"${ok[@]}"}; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/main-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
save
for v in main ${ok[@]+"${ok[@]}"}; do
  for tool in memcheck synccheck initcheck; do
    MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/$v/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool-$v.log 2>&1; el "$v $tool rc=$?"
    tail -1 $L/san-$tool-$v.log >> $L/timeline.txt
  done
done
el done; save
