#!/usr/bin/env bash
# Session 20, call 3: V released early (vearly: wait for P V half 1 inside the softmax; pvfirst: both P V halves before S)
# (pp: turn = P V half 0 + S issue; pph: turn held through P V half 1's issue), their traces
# (ppt, ppht), tests, A/B against main.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/gpu.txt 2>&1
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K=kernels/cuda/dense_mha_wgmma_kernel.cu
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/main/
V="vearly pvfirst vearlyt pvfirstt"
for v in $V; do
  cp .devrun/variants/$v/* kernels/cuda/
  cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-$v.log 2>&1; el "built $v rc=$?"
  grep -E "C75" $L/build-$v.log | head -3 >> $L/timeline.txt
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/$v/
  git checkout -- $K
done
ok=()
for v in vearly pvfirst; do
  MLA_REQUIRE_CUDA=1 timeout 60 /tmp/bin/$v/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-$v.log 2>&1; rc=$?; el "$v Cuda tests rc=$rc"
  grep -E "^\[  (PASSED|FAILED) |Failure" $L/gtest-$v.log | head -4 | tee -a $L/timeline.txt
  [ $rc = 0 ] && ok+=($v)
done
save
S1='^dense_mha/H:128/reqs:4/tokens:4096/keys:4096/mask:none'
S2='^dense_mha/H:128/reqs:1/tokens:8192/'
for v in vearlyt pvfirstt; do
  for sh in 1 2; do
    f=$S1; [ $sh = 2 ] && f=$S2
    MLA_TILE_TRACE_FILE=$L/trace-$v-$sh.bin timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention --benchmark_filter="$f" --benchmark_repetitions=1 > $L/trace-$v-$sh.log 2>&1; el "trace $v $sh rc=$?"
    timeout 30 python3 .devrun/tile_trace.py $L/trace-$v-$sh.bin > $L/trace-$v-$sh.txt 2>&1; cat $L/trace-$v-$sh.txt >> $L/timeline.txt
  done
done
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main ${ok[@]+"${ok[@]}"}; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
for v in ${ok[@]+"${ok[@]}"}; do
  for tool in memcheck synccheck; do
    MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/$v/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool-$v.log 2>&1; el "$v $tool rc=$?"
    tail -1 $L/san-$tool-$v.log >> $L/timeline.txt
  done
done
el done; save
