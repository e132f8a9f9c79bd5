#!/usr/bin/env bash
# Session 19, call 2: main (q-regs merged) + softmax diagnostics and poly-exp variants; ncu of main.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K=kernels/cuda/dense_mha_wgmma_kernel.cu
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/main/
V="polyhalf polyquarter noexp nopack nosm"
for v in $V; do
  cp .devrun/variants/$v/dense_mha_wgmma_kernel.cu $K
  cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-$v.log 2>&1; el "built $v rc=$?"
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/$v/
done
git checkout -- $K; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-restore.log 2>&1; el "restored main rc=$?"
for v in main polyhalf polyquarter; do
  MLA_REQUIRE_CUDA=1 timeout 60 /tmp/bin/$v/mla_tests_kernels --gtest_filter='CudaAttentionTest.*' > $L/gtest-$v.log 2>&1; el "$v attention tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |Failure" $L/gtest-$v.log | head -4 | tee -a $L/timeline.txt
done
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main $V; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
B=/tmp/bin/main/mla-bench
SH="--sweep attention --benchmark_filter=^dense_mha/H:128/reqs:1/tokens:8192/ --benchmark_min_time=0.001s --benchmark_repetitions=1"
timeout 120 ncu --clock-control none --kernel-name regex:dense_mha_wgmma --launch-skip 1 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis -o $L/dense $B --backend cuda $SH > $L/ncu-run.txt 2>&1; el "ncu rc=$?"
ncu -i $L/dense.ncu-rep --page source --print-source sass --csv > $L/dense-src.csv 2>$L/ncu-src.err; el "src rc=$?"; ncu -i $L/dense.ncu-rep > $L/ncu-dense.txt 2>&1; rm -f $L/dense.ncu-rep
save
timeout 100 ncu --clock-control none --kernel-name regex:dense_mha_wgmma --launch-skip 1 --launch-count 1 --metrics 'regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$' $B --backend cuda $SH > $L/ncu-pipes.txt 2>&1; el "ncu pipes rc=$?"
timeout 100 ncu --clock-control none --kernel-name regex:dense_mha_wgmma --launch-skip 1 --launch-count 1 --metrics 'regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$' $B --backend cuda $SH > $L/ncu-inst.txt 2>&1; el "ncu inst rc=$?"
el done; save
