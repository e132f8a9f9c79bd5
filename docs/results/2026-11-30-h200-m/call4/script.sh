#!/usr/bin/env bash
# Session 18, call 4: HEAD's kernels; the two sweeps added in session 17 and not yet run on a GPU.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON > $L/cfg.log 2>&1
cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built rc=$?"
timeout 90 build/bin/mla-bench --backend cuda --sweep attention --benchmark_filter='^forward/' --benchmark_repetitions=3 --benchmark_out=$L/forward.json --benchmark_out_format=json > $L/forward.log 2>&1; el "forward rc=$?"
grep median $L/forward.log | cut -c1-150 | tee -a $L/timeline.txt; save
timeout 60 build/bin/mla-bench --backend cuda --sweep cache_path --benchmark_filter='^pack/' --benchmark_repetitions=3 --benchmark_out=$L/pack.json --benchmark_out_format=json > $L/pack.log 2>&1; el "pack rc=$?"
grep median $L/pack.log | cut -c1-150 | tee -a $L/timeline.txt; save
timeout 90 python3 scripts/peer_torch.py --no-check --device cuda --sweep cache_path --filter '^pack/' --out $L/peer-pack.json > $L/peer-pack.log 2>&1; el "peer pack rc=$?"
tail -12 $L/peer-pack.log | cut -c1-150 | tee -a $L/timeline.txt
el done; save
