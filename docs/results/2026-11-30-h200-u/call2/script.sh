#!/usr/bin/env bash
# Session 26, call 2 (397f055's tree: the first GPU run of 9b7a4f8's rule, no tail = 0): all kernel
# tests with MLA_REQUIRE_CUDA=1, memcheck of the dense tests, the suite on the GPU; then 3 s loops,
# ours (mla-bench, min_time 3 s) and SDPA (peer_torch.py --iters N, the fixed flush), alternated,
# twice, on the two shapes that were behind SDPA by the old flush and on causal 8k, with nvidia-smi
# every 100 ms (smi.csv; the loops' epoch seconds in marks.txt). Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
mark() { echo "$(date +%s.%N) $*" >> $L/marks.txt; }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
grep -n 'return 0\|return std::min\|tail' kernels/common/dense_item_order.h | head -20 >> $L/tree.txt
sha256sum kernels/common/dense_item_order.h scripts/peer_torch.py >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla-check mla_tests_kernels > $L/build.log 2>&1; el "built rc=$?"
B=build/bin
MLA_REQUIRE_CUDA=1 timeout 150 $B/mla_tests_kernels > $L/gtest.log 2>&1; el "kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest.log | head -8 | tee -a $L/timeline.txt
MLA_REQUIRE_CUDA=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/mla_tests_kernels --gtest_filter='*Dense*' > $L/san-memcheck.log 2>&1; el "memcheck rc=$?"
tail -2 $L/san-memcheck.log | tee -a $L/timeline.txt
timeout 150 $B/mla-check --backend cuda --jobs 0 --report $L/check.json -q > $L/check.log 2>&1; el "mla-check cuda rc=$?"
tail -3 $L/check.log | tee -a $L/timeline.txt
save
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,nounits -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
for r in 1 2; do
  for SI in 'H:128/reqs:4/tokens:4096/keys:1024/mask:none 5000' 'H:128/reqs:8/tokens:8192 4000' 'H:128/reqs:1/tokens:8192 700'; do
    set -- $SI; S=$1; N=$2; tag=$(echo "$S" | tr '/:' '__')
    sleep 2; mark "ours-$tag-$r start"
    timeout 40 $B/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/$S/manual" --benchmark_min_time=3s --benchmark_repetitions=1 --benchmark_out=$L/loop-ours-$tag-$r.json --benchmark_out_format=json > $L/loop-ours-$tag-$r.log 2>&1; el "loop ours $S $r rc=$?"
    mark "ours-$tag-$r end"; sleep 2; mark "sdpa-$tag-$r start"
    timeout 60 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter "$S\$" --iters $N --warmup 3 --out $L/loop-sdpa-$tag-$r.json > $L/loop-sdpa-$tag-$r.log 2>&1; el "loop sdpa $S $r rc=$?"
    mark "sdpa-$tag-$r end"
  done
  save
done
kill $SMI
el done; save
