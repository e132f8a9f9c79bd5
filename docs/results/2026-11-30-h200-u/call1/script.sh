#!/usr/bin/env bash
# Session 26, call 1 (397f055's tree): the peers again with the fixed flush (1f5489d), the first
# part of ../../2026-11-30-h200-t/next/script.sh: the whole attention sweep once and the dense
# shapes a second time, each followed by peer_torch.py --attention (mla-bench's protocol) on the
# same shapes, per-repetition rows kept. Then the unmasked shapes (4096 equal items, 31.03 waves on
# 132 CTAs) with the CTAs capped at 128 (32 full waves) against main, three rounds alternated.
# Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
# The device copy's .git can be stale: say which flush the peer script in this tree has.
grep -n 'def read_flush\|return flush' scripts/peer_torch.py >> $L/tree.txt; sha256sum scripts/peer_torch.py >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
B=build/bin/mla-bench
timeout 150 $B --backend cuda --sweep attention --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-1.json --benchmark_out_format=json > $L/ours-1.log 2>&1; el "ours 1 rc=$?"
timeout 150 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --ours $L/ours-1.json --out $L/peer-1.json > $L/peer-1.log 2>&1; el "peer 1 rc=$?"
save
timeout 60 $B --backend cuda --sweep attention --benchmark_filter='^dense_mha/' --benchmark_repetitions=5 --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-2.json --benchmark_out_format=json > $L/ours-2.log 2>&1; el "ours 2 rc=$?"
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/ours-2.json --out $L/peer-2.json > $L/peer-2.log 2>&1; el "peer 2 rc=$?"
save
F='--benchmark_filter=^dense_mha/H:128/reqs:4/tokens:4096/keys: --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2 3; do
  timeout 40 $B --backend cuda --sweep attention $F --benchmark_out=$L/main-$r.json > $L/main-$r.log 2>&1; el "main $r rc=$?"
  MLA_DENSE_WGMMA_MAX_CTAS=128 timeout 40 $B --backend cuda --sweep attention $F --benchmark_out=$L/cta128-$r.json > $L/cta128-$r.log 2>&1; el "cta128 $r rc=$?"
done
el done; save
