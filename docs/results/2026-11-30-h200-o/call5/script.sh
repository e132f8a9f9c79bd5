#!/usr/bin/env bash
# Session 20, call 5 (diagnostic): per-tile trace with warpgroup 0 computing nothing (solot,
# wrong outputs): warpgroup 1's softmax without the other warpgroup's HGMMA beside it.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K=kernels/cuda/dense_mha_wgmma_kernel.cu
cp .devrun/variants/solot/* kernels/cuda/
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built solot rc=$?"
git checkout -- $K
S1='^dense_mha/H:128/reqs:4/tokens:4096/keys:4096/mask:none'
S2='^dense_mha/H:128/reqs:1/tokens:8192/'
for sh in 1 2; do
  f=$S1; [ $sh = 2 ] && f=$S2
  MLA_TILE_TRACE_FILE=$L/trace-solot-$sh.bin timeout 60 build/bin/mla-bench --backend cuda --sweep attention --benchmark_filter="$f" --benchmark_repetitions=1 > $L/trace-solot-$sh.log 2>&1; el "trace solot $sh rc=$?"
  timeout 30 python3 .devrun/tile_trace.py $L/trace-solot-$sh.bin > $L/trace-solot-$sh.txt 2>&1; cat $L/trace-solot-$sh.txt >> $L/timeline.txt
done
el done; save
