#!/usr/bin/env bash
# Session 25, call 7 (cc1f1e0's tree + docs): does the L2 traffic set the clock? A timing probe
# (halfkv.patch: odd key tiles not loaded; results wrong) against main in 3 s loops of unmasked
# 4 x 1024 over 1024 keys, alternated, twice; nvidia-smi every 100 ms. Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
D=docs/results/2026-11-30-h200-t/call7
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
mark() { echo "$(date +%s.%N) $*" >> $L/marks.txt; }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main /tmp/bin/halfkv && cp build/bin/mla-bench /tmp/bin/main/
git apply $D/halfkv.patch && cmake --build build -j16 --target mla-bench > $L/build-halfkv.log 2>&1; el "built halfkv rc=$?"
cp build/bin/mla-bench /tmp/bin/halfkv/; git apply -R $D/halfkv.patch
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,nounits -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
S='H:128/reqs:4/tokens:4096/keys:1024/mask:none'
for r in 1 2; do
  for v in main halfkv; do
    sleep 2; mark "$v$r start"
    timeout 30 /tmp/bin/$v/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/$S/manual" --benchmark_min_time=3s --benchmark_repetitions=1 --benchmark_out=$L/loop-$v-$r.json --benchmark_out_format=json > $L/loop-$v-$r.log 2>&1; el "loop $v $r rc=$?"
    mark "$v$r end"
  done
  save
done
kill $SMI
el done; save
