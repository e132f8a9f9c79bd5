#!/usr/bin/env bash
# Session 22 call 2: the epilogue split and the producer's fetch timing (itrace2).
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cp .devrun/variants/itrace2/dense_mha_wgmma_kernel.cu kernels/cuda/
cmake -S . -B build-tr $CFG -DCMAKE_CUDA_FLAGS=-DMLA_TILE_TRACE > $L/cfg-tr.log 2>&1
cmake --build build-tr -j16 --target mla-bench > $L/build-tr.log 2>&1; el "built itrace2 rc=$?"
git checkout -- kernels/cuda/
i=0
for f in '^dense_mha/H:128/reqs:8/tokens:8192/' '^dense_mha/H:128/reqs:4/tokens:4096/keys:1024/mask:none' \
         '^dense_mha/H:128/reqs:4/tokens:4096/keys:4096/mask:none' '^dense_mha/H:128/reqs:8/tokens:4096/'; do
  i=$((i+1))
  MLA_TILE_TRACE_FILE=$L/tiles-$i.bin MLA_ITEM_TRACE_FILE=$L/items-$i.bin timeout 60 build-tr/bin/mla-bench --backend cuda \
    --sweep attention --benchmark_filter="$f" --benchmark_repetitions=1 > $L/trace-$i.log 2>&1; el "trace $i ($f) rc=$?"
  timeout 60 python3 .devrun/item_trace2.py --tiles $L/tiles-$i.bin --items $L/items-$i.bin > $L/trace-$i.txt 2>&1
  save
done
el done; save
