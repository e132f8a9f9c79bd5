#!/usr/bin/env bash
# Session 24 call 4: ncu of main (uniform producer) on the eighteenth session's two shapes, to set
# its spill requests and L2 traffic beside 8e7338d's (docs/results/2026-11-30-h200-r/call4), and of
# ours and cuDNN's kernel on unmasked 4 x 1024 over 1024 keys (the shape furthest behind).
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
SECT="--section SpeedOfLight --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats"
i=0
for shape in 'reqs:8/tokens:8192' 'reqs:4/tokens:4096/keys:4096/mask:none' 'reqs:4/tokens:4096/keys:1024/mask:none'; do
  i=$((i+1))
  timeout 100 ncu --clock-control none --kernel-name regex:dense_mha_wgmma --launch-skip 1 --launch-count 1 $SECT \
    build/bin/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/H:128/$shape/" --benchmark_min_time=0.001s --benchmark_repetitions=1 > $L/ncu-ours-$i.txt 2>&1; el "ours $shape rc=$?"
  save
done
shape='reqs:4/tokens:4096/keys:1024/mask:none'
timeout 140 ncu --clock-control none --kernel-name regex:'cudnn|fmha|flash' --launch-skip 2 --launch-count 1 $SECT \
  python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter "H:128/$shape\$" --iters 20 --warmup 1 > $L/ncu-sdpa-3.txt 2>&1; el "sdpa $shape rc=$?"
el done; save
