#!/usr/bin/env bash
# Prepared in session 24 for the next session (not run: no device time left). Head groups chosen per
# problem (head-groups.patch, against c78a0c1's tree; kernels/common/dense_item_order.h and its
# unit test, which pass on the CPU): main built first, then the patch applied in the same tree;
# the dense kernel tests and memcheck with the patch, two A/B rounds, SDPA beside them.
# Run from the repository root on the device machine: bash docs/results/2026-11-30-h200-s/next/script.sh
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build-main.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main /tmp/bin/hga && cp build/bin/mla-bench /tmp/bin/main/
git apply docs/results/2026-11-30-h200-s/next/head-groups.patch; el "patch rc=$?"
cmake -S . -B build $CFG > $L/cfg2.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-hga.log 2>&1; el "built hga rc=$?"
cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/hga/
git apply -R docs/results/2026-11-30-h200-s/next/head-groups.patch
MLA_REQUIRE_CUDA=1 timeout 120 /tmp/bin/hga/mla_tests_kernels > $L/gtest-hga.log 2>&1; el "hga kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-hga.log | head -8 | tee -a $L/timeline.txt
MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/bin/hga/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-memcheck.log 2>&1; el "memcheck rc=$?"
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main hga; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
timeout 150 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/hga-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
el done; save
