#!/usr/bin/env bash
# Session 23 call 6: sustained 8 x 1024 causal loops (4 s) of main and of hint2 (mbarrier waits with a
# 10 ms suspend-time hint) with nvidia-smi sampling clocks / power every 100 ms.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
cp .devrun/variants/hint2/* kernels/cuda/
cmake --build build -j16 --target mla-bench > $L/build-hint2.log 2>&1; el "built hint2 rc=$?"
mkdir -p /tmp/bin/hint2 && cp build/bin/mla-bench /tmp/bin/hint2/
git checkout -- kernels/cuda/
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
for v in main hint2 main hint2; do
  sleep 2; date +%H:%M:%S.%N >> $L/marks.txt; echo "$v start" >> $L/marks.txt
  timeout 40 /tmp/bin/$v/mla-bench --backend cuda --sweep attention --benchmark_filter='^dense_mha/H:128/reqs:8/tokens:8192/' --benchmark_min_time=4s --benchmark_repetitions=1 > $L/$v-loop.log 2>&1
  date +%H:%M:%S.%N >> $L/marks.txt; echo "$v end" >> $L/marks.txt; el "$v rc=$?"
  save
done
kill $SMI; el done; save
