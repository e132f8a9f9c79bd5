#!/usr/bin/env bash
# Session 25, call 5 (the tail order's tree): clocks and power in 4 s loops of unmasked 4 x 1024
# over 1024 keys (the shape whose 4096 equal items leave a last wave of 4), ours (mla-bench,
# min_time 4 s) and SDPA (peer_torch.py --iters 7000), alternated, twice; nvidia-smi every 100 ms
# (smi.csv; the loops' epoch seconds in marks.txt). Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
mark() { echo "$(date +%s.%N) $*" >> $L/marks.txt; }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built rc=$?"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,nounits -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
S='H:128/reqs:4/tokens:4096/keys:1024/mask:none'
for r in 1 2; do
  sleep 2; mark "ours$r start"
  timeout 40 build/bin/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/$S/manual" --benchmark_min_time=4s --benchmark_repetitions=1 --benchmark_out=$L/loop-ours-$r.json --benchmark_out_format=json > $L/loop-ours-$r.log 2>&1; el "loop ours $r rc=$?"
  mark "ours$r end"; sleep 2; mark "sdpa$r start"
  timeout 60 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter "$S\$" --iters 7000 --warmup 3 > $L/loop-sdpa-$r.log 2>&1; el "loop sdpa $r rc=$?"
  mark "sdpa$r end"; save
done
kill $SMI
el done; save
