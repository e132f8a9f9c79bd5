#!/usr/bin/env bash
# Session 25, call 3 (8c1788a's tree, main with the tail order): tail2.patch (twice the tail's
# heads) against main, two A/B rounds of the dense sweep; then two rounds of mla-bench's whole
# attention sweep, each followed by peer_torch.py --attention (mla-bench's protocol, Google
# Benchmark's call-count search) on the same shapes. Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
D=docs/results/2026-11-30-h200-t
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $L/gpu.txt 2>&1
git log --oneline -2 > $L/tree.txt; git status --short >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build-main.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main /tmp/bin/tail2 && cp build/bin/mla-bench /tmp/bin/main/
git apply $D/tail2.patch; el "patch rc=$?"
cmake --build build -j16 --target mla-bench > $L/build-tail2.log 2>&1; el "built tail2 rc=$?"
cp build/bin/mla-bench /tmp/bin/tail2/; git apply -R $D/tail2.patch
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main tail2; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
for r in 1 2; do
  timeout 150 /tmp/bin/main/mla-bench --backend cuda --sweep attention --benchmark_out=$L/ours-$r.json --benchmark_out_format=json > $L/ours-$r.log 2>&1; el "ours $r rc=$?"
  timeout 200 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --ours $L/ours-$r.json --out $L/peer-$r.json > $L/peer-$r.log 2>&1; el "peer $r rc=$?"
  save
done
el done; save
