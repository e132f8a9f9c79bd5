#!/usr/bin/env bash
# Session 27 (the twenty-second device session), call 4: the rest of call 3's cache-path sweep (its
# 300 s limit stopped mla-bench after 54 of the 58 shapes: with the lead, a 5 us kernel takes about
# 150 us of wall time per timed call), then the bit-exact peer check of the cache path and the
# cache-path peer's timing with the same (default) lead. Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz --exclude=L/dump L); }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built rc=$?"
B=build/bin
timeout 90 $B/mla-bench --backend cuda --benchmark_filter='^convert/B:64/K:128/rows:(512|4096|16384|65536)/' --benchmark_out=$L/bench-rest.json --benchmark_out_format=json > $L/bench-rest.log 2>&1; el "bench rest rc=$?"
save
timeout 60 $B/mla-bench --backend cuda --dump $L/dump > $L/peer-dump.log 2>&1; el "dump rc=$?"
timeout 150 python3 scripts/peer_torch.py --dump $L/dump --device cuda --out $L/peer_torch.json > $L/peer.log 2>&1; el "peer rc=$?"
el done; save
