#!/usr/bin/env bash
# Session 22 call 6: ncu source counters of main's dense kernel at 8 x 512 (reqs:8/tokens:4096), where
# the epilogue costs the most (noepi probe: 0.82x); per-instruction stall reasons.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
SH="--sweep attention --benchmark_filter=^dense_mha/H:128/reqs:8/tokens:4096/ --benchmark_min_time=0.001s --benchmark_repetitions=1"
timeout 120 ncu --clock-control none --kernel-name regex:dense_mha_wgmma --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis -o $L/dense build/bin/mla-bench --backend cuda $SH > $L/ncu-run.txt 2>&1; el "ncu rc=$?"
ncu -i $L/dense.ncu-rep --page source --print-source sass --csv > $L/dense-src.csv 2>$L/ncu-src.err; el "src rc=$?"
ncu -i $L/dense.ncu-rep > $L/ncu-dense.txt 2>&1; rm -f $L/dense.ncu-rep; gzip -9 $L/dense-src.csv
el done; save
