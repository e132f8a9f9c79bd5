#!/usr/bin/env bash
# Session 27 (the twenty-second device session), call 1: ../../2026-11-30-h200-u/next/script.sh as
# prepared in session 26, with a time guard (a dense round not begun after 420 s, a loop not after 500 s, to end inside
# the device's 600 s limit). Since this session both tools run a lead before each flush (mla-bench --lead-cycles,
# default 200000; peer_torch.py takes the count from --ours): the first GPU run of the lead's test,
# then the comparison with SDPA under one protocol: the whole attention sweep and its peers, the
# dense shapes twice more, and 3 s loops of the shapes that decide issue 5 with nvidia-smi.
# About 8 minutes (build ~80 s, tests ~30 s, sweep and peers ~3 min, dense rounds ~2.5 min,
# loops ~2 min): split it if the device's 600 s limit is near (everything is saved as it goes).
# Run from the repository root: bash docs/results/2026-11-30-h200-u/next/script.sh
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
left() { [ $(( $(date +%s)-t0 )) -lt $1 ] || { el "skipped: $2"; return 1; }; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
mark() { echo "$(date +%s.%N) $*" >> $L/marks.txt; }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
grep -n 'kDefaultLeadCycles =' apps/mla_bench/l2_flush.h >> $L/tree.txt; grep -n '^LEAD_CYCLES' scripts/peer_torch.py >> $L/tree.txt
sha256sum apps/mla_bench/l2_flush.h apps/mla_bench/l2_flush.cpp scripts/peer_torch.py >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_apps > $L/build.log 2>&1; el "built rc=$?"
B=build/bin
MLA_REQUIRE_CUDA=1 timeout 60 $B/mla_tests_apps > $L/gtest-apps.log 2>&1; el "apps tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-apps.log | tee -a $L/timeline.txt
MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/mla_tests_apps > $L/san-apps.log 2>&1; el "apps memcheck rc=$?"
timeout 150 $B/mla-bench --backend cuda --sweep attention --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-1.json --benchmark_out_format=json > $L/ours-1.log 2>&1; el "ours 1 rc=$?"
timeout 150 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --ours $L/ours-1.json --out $L/peer-1.json > $L/peer-1.log 2>&1; el "peer 1 rc=$?"
save
for r in 2 3; do
  left 420 "dense round $r" || continue
  timeout 60 $B/mla-bench --backend cuda --sweep attention --benchmark_filter='^dense_mha/' --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-$r.json --benchmark_out_format=json > $L/ours-$r.log 2>&1; el "ours $r rc=$?"
  timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/ours-$r.json --out $L/peer-$r.json > $L/peer-$r.log 2>&1; el "peer $r rc=$?"
  save
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,nounits -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
for SI in 'H:128/reqs:4/tokens:4096/keys:1024/mask:none 5000' 'H:128/reqs:8/tokens:8192 4000' 'H:128/reqs:4/tokens:4096 8000'; do
  left 500 "loop $SI" || continue
  set -- $SI; S=$1; N=$2; tag=$(echo "$S" | tr '/:' '__')
  sleep 2; mark "ours-$tag start"
  timeout 40 $B/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/$S/manual" --benchmark_min_time=3s --benchmark_repetitions=1 --benchmark_out=$L/loop-ours-$tag.json --benchmark_out_format=json > $L/loop-ours-$tag.log 2>&1; el "loop ours $S rc=$?"
  mark "ours-$tag end"; sleep 2; mark "sdpa-$tag start"
  timeout 60 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter "$S\$" --iters $N --warmup 3 --ours $L/loop-ours-$tag.json --out $L/loop-sdpa-$tag.json > $L/loop-sdpa-$tag.log 2>&1; el "loop sdpa $S rc=$?"
  mark "sdpa-$tag end"
done
kill $SMI
el done; save
