#!/usr/bin/env bash
# Session 22 call 4: staged epilogue traced (itrace2 stamps); probes nostore / noepi against main.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cp .devrun/variants/staged-tr/* kernels/cuda/
cmake -S . -B build-tr $CFG -DCMAKE_CUDA_FLAGS=-DMLA_TILE_TRACE > $L/cfg-tr.log 2>&1
cmake --build build-tr -j16 --target mla-bench > $L/build-tr.log 2>&1; el "built staged-tr rc=$?"
git checkout -- kernels/cuda/
i=0
for f in '^dense_mha/H:128/reqs:8/tokens:8192/' '^dense_mha/H:128/reqs:4/tokens:4096/keys:1024/mask:none'; do
  i=$((i+1))
  MLA_TILE_TRACE_FILE=$L/tiles-$i.bin MLA_ITEM_TRACE_FILE=$L/items-$i.bin timeout 60 build-tr/bin/mla-bench --backend cuda \
    --sweep attention --benchmark_filter="$f" --benchmark_repetitions=1 > $L/trace-$i.log 2>&1; el "trace $i ($f) rc=$?"
  timeout 60 python3 .devrun/item_trace2.py --tiles $L/tiles-$i.bin --items $L/items-$i.bin > $L/trace-$i.txt 2>&1
  save
done
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
for v in nostore noepi; do
  cp .devrun/variants/$v/* kernels/cuda/
  cmake --build build -j16 --target mla-bench > $L/build-$v.log 2>&1; el "built $v rc=$?"
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench /tmp/bin/$v/
  git checkout -- kernels/cuda/
done
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main nostore noepi; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
el done; save
