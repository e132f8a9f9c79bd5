#!/usr/bin/env bash
# Session 27 (the twenty-second device session), call 3: what call 2's run_gpu.sh did not reach
# (its 330 s limit ran out in the injections, 80 s each now that the suite has its attention
# scenarios): the cache-path sweep, stream-mix, the bit-exact peer check and the cache-path peer's
# timing, all with the lead (scripts/run_gpu.sh, the other stages skipped); then the sparse shapes
# with a 400000-cycle lead for both tools (call 1 ran them at 200000). Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
left() { [ $(( $(date +%s)-t0 )) -lt $1 ] || { el "skipped: $2"; return 1; }; }
save() { (cd /tmp && tar czf $OUT/logs.tgz --exclude=L/run_gpu/dump L); }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
sha256sum apps/mla_bench/l2_flush.h apps/mla_bench/l2_flush.cpp scripts/peer_torch.py >> $L/tree.txt
MLA_CUDA_ARCH=90 MLA_JOBS=16 MLA_SKIP_CTEST=1 MLA_SKIP_CHECK=1 MLA_SKIP_INJECT=1 MLA_SKIP_SANITIZER=1 \
  MLA_SKIP_BENCH_ATTENTION=1 MLA_SKIP_PEER_ATTENTION=1 \
  timeout 300 scripts/run_gpu.sh $L/run_gpu > $L/run_gpu.log 2>&1; el "run_gpu rc=$?"
cat $L/run_gpu/summary.tsv | tee -a $L/timeline.txt
save
B=build/bin
if left 360 "sparse lead 400000"; then
  timeout 120 $B/mla-bench --backend cuda --sweep attention --lead-cycles 400000 --benchmark_filter='^sparse_mqa/' --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-sparse-lead400000.json --benchmark_out_format=json > $L/ours-sparse-lead400000.log 2>&1; el "ours sparse rc=$?"
  timeout 100 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter sparse --ours $L/ours-sparse-lead400000.json --out $L/peer-sparse-lead400000.json > $L/peer-sparse-lead400000.log 2>&1; el "peer sparse rc=$?"
fi
el done; save
