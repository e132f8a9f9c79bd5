#!/usr/bin/env bash
# Session 25, call 2: the tail order (tail-order.patch: head-major, the last heads tile-major;
# kernels/common/dense_item_order.h) against main (d3a6c17), same tree: main built first, then the
# patch applied; all kernel tests, memcheck of the dense tests, the suite on the GPU, three A/B
# rounds of the dense sweep. Run from the repository root: bash docs/results/2026-11-30-h200-t/call2.sh
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
D=docs/results/2026-11-30-h200-t
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build-main.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main /tmp/bin/tail && cp build/bin/mla-bench /tmp/bin/main/
git apply $D/tail-order.patch; el "patch rc=$?"
cmake -S . -B build $CFG > $L/cfg2.log 2>&1; cmake --build build -j16 --target mla-bench mla-check mla_tests_kernels > $L/build-tail.log 2>&1; el "built tail rc=$?"
cp build/bin/mla-bench build/bin/mla-check build/bin/mla_tests_kernels /tmp/bin/tail/
MLA_REQUIRE_CUDA=1 timeout 120 /tmp/bin/tail/mla_tests_kernels > $L/gtest-tail.log 2>&1; el "tail kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-tail.log | head -8 | tee -a $L/timeline.txt
MLA_REQUIRE_CUDA=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/bin/tail/mla_tests_kernels --gtest_filter='*Dense*' > $L/san-memcheck.log 2>&1; el "memcheck rc=$?"
grep -E "tests? from .* ran|ERROR SUMMARY" $L/san-memcheck.log | tee -a $L/timeline.txt
timeout 120 /tmp/bin/tail/mla-check --backend cuda --jobs 0 --report $L/check-tail.json -q > $L/check-tail.log 2>&1; el "mla-check cuda rc=$?"
tail -3 $L/check-tail.log | tee -a $L/timeline.txt
git apply -R $D/tail-order.patch
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2 3; do
  for v in main tail; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
el done; save
