#!/usr/bin/env bash
# Session 22's first call (pass carry [".devrun"]), ~6 min.
# 1. Where an item's time goes in the dense wgmma kernel of 75be933 (one softmax step per 128-key
#    tile), on the shapes still behind SDPA: itrace = branch wip/dense-item-trace's kernel (main's
#    plus clock64 stamps under -DMLA_TILE_TRACE; .devrun/variants/itrace/), read by
#    .devrun/item_trace.py (= experiments/item_trace.py there).
# 2. mbarrier waits with a suspend-time hint (10 ms, as CUTLASS's barriers wait: ptxas then emits
#    NANOSLEEP.SYNCS between TRYWAITs instead of re-issuing them), every wait (hint:
#    variants/hint/wgmma_device.cuh) or the producer's only (hintp: an mbar_wait_hint for its
#    q_empty / k_empty / v_empty waits): Cuda* tests, two A/B rounds against main.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K="kernels/cuda/dense_mha_wgmma_kernel.cu"
cp .devrun/variants/itrace/dense_mha_wgmma_kernel.cu kernels/cuda/
cmake -S . -B build-tr $CFG -DCMAKE_CUDA_FLAGS=-DMLA_TILE_TRACE > $L/cfg-tr.log 2>&1
cmake --build build-tr -j16 --target mla-bench > $L/build-tr.log 2>&1; el "built itrace rc=$?"
grep -E "C75" $L/build-tr.log | head -3 >> $L/timeline.txt
git checkout -- $K
i=0
for f in '^dense_mha/H:128/reqs:8/tokens:8192/' '^dense_mha/H:128/reqs:1/tokens:4096/' \
         '^dense_mha/H:128/reqs:4/tokens:4096/keys:1024/mask:none' '^dense_mha/H:128/reqs:4/tokens:4096/keys:4096/mask:none' \
         '^dense_mha/H:128/reqs:1/tokens:8192/'; do
  i=$((i+1))
  MLA_TILE_TRACE_FILE=$L/tiles-$i.bin MLA_ITEM_TRACE_FILE=$L/items-$i.bin timeout 60 build-tr/bin/mla-bench --backend cuda \
    --sweep attention --benchmark_filter="$f" --benchmark_repetitions=1 > $L/trace-$i.log 2>&1; el "trace $i ($f) rc=$?"
  timeout 60 python3 .devrun/item_trace.py --tiles $L/tiles-$i.bin --items $L/items-$i.bin > $L/trace-$i.txt 2>&1
  cat $L/trace-$i.txt >> $L/timeline.txt
  save
done
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
MLA_REQUIRE_CUDA=1 timeout 240 build/bin/mla_tests_kernels > $L/gtest-main.log 2>&1; el "main all kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-main.log | head -6 | tee -a $L/timeline.txt
for v in hint hintp; do
  cp .devrun/variants/$v/* kernels/cuda/
  cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-$v.log 2>&1; el "built $v rc=$?"
  grep -E "C75" $L/build-$v.log | head -3 >> $L/timeline.txt
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/$v/
  MLA_REQUIRE_CUDA=1 timeout 90 /tmp/bin/$v/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-$v.log 2>&1; el "$v Cuda tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-$v.log | head -4 | tee -a $L/timeline.txt
  git checkout -- kernels/cuda/
done
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main hint hintp; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
el done; save
