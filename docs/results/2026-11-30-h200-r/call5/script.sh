#!/usr/bin/env bash
# Session 23 call 5: SM clock, power and throttle reasons while ours and SDPA run 8 x 1024 causal in a loop
# (ncu had ours at 1.18M cycles / 697 us and cuDNN at 1.28M / 739 us; mla-bench times ours at ~770 us).
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
sleep 2; date +%H:%M:%S.%N > $L/mark-idle-end.txt
el "ours start"; date +%H:%M:%S.%N > $L/mark-ours-start.txt
timeout 60 build/bin/mla-bench --backend cuda --sweep attention --benchmark_filter='^dense_mha/H:128/reqs:8/tokens:8192/' --benchmark_min_time=6s --benchmark_repetitions=1 --benchmark_out=$L/ours.json --benchmark_out_format=json > $L/ours.log 2>&1
date +%H:%M:%S.%N > $L/mark-ours-end.txt; el "ours end rc=$?"
sleep 3
date +%H:%M:%S.%N > $L/mark-sdpa-start.txt; el "sdpa start"
timeout 90 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter 'H:128/reqs:8/tokens:8192$' --iters 6000 --warmup 3 > $L/sdpa.log 2>&1
date +%H:%M:%S.%N > $L/mark-sdpa-end.txt; el "sdpa end rc=$?"
sleep 1; kill $SMI
el done; save
