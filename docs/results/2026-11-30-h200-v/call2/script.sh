#!/usr/bin/env bash
# Session 27 (the twenty-second device session), call 2: scripts/run_gpu.sh end to end at the tree
# to be submitted (configure, build, every CTest test with MLA_REQUIRE_CUDA=1, the suite and the
# injections on the GPU, the cache-path sweep and its peer, now with the lead; no sanitizer, no
# attention sweep: call 1 has it), then the dense shapes again with other leads for both tools
# (400000, 100000, 0 cycles; call 1 ran 200000): does the order of ours and SDPA depend on the
# lead? A lead stage not begun after 480 s is skipped. Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
left() { [ $(( $(date +%s)-t0 )) -lt $1 ] || { el "skipped: $2"; return 1; }; }
save() { (cd /tmp && tar czf $OUT/logs.tgz --exclude=L/run_gpu/dump L); }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
sha256sum apps/mla_bench/l2_flush.h apps/mla_bench/l2_flush.cpp scripts/peer_torch.py >> $L/tree.txt
MLA_CUDA_ARCH=90 MLA_JOBS=16 MLA_SKIP_SANITIZER=1 MLA_SKIP_BENCH_ATTENTION=1 MLA_SKIP_PEER_ATTENTION=1 \
  timeout 330 scripts/run_gpu.sh $L/run_gpu > $L/run_gpu.log 2>&1; el "run_gpu rc=$?"
tail -25 $L/run_gpu.log | tee -a $L/timeline.txt
save
B=build/bin
for lead in 400000 100000 0; do
  left 480 "lead $lead" || continue
  timeout 60 $B/mla-bench --backend cuda --sweep attention --lead-cycles $lead --benchmark_filter='^dense_mha/' --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-lead$lead.json --benchmark_out_format=json > $L/ours-lead$lead.log 2>&1; el "ours lead $lead rc=$?"
  timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/ours-lead$lead.json --out $L/peer-lead$lead.json > $L/peer-lead$lead.log 2>&1; el "peer lead $lead rc=$?"
  save
done
el done; save
