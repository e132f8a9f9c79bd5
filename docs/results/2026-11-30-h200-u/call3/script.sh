#!/usr/bin/env bash
# Session 26, call 3 (397f055's tree): a third round of the dense shapes and SDPA (the fixed flush,
# mla-bench's protocol), then compute-sanitizer over every test that runs a kernel (memcheck,
# initcheck, synccheck; racecheck of the attention tests). Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
sha256sum kernels/common/dense_item_order.h scripts/peer_torch.py >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built rc=$?"
B=build/bin
timeout 60 $B/mla-bench --backend cuda --sweep attention --benchmark_filter='^dense_mha/' --benchmark_repetitions=5 --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-3.json --benchmark_out_format=json > $L/ours-3.log 2>&1; el "ours 3 rc=$?"
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/ours-3.json --out $L/peer-3.json > $L/peer-3.log 2>&1; el "peer 3 rc=$?"
save
G='Cuda*:*Dense*:*Sparse*:Fp8E4m3Cuda*'
for tool in memcheck initcheck synccheck; do
  MLA_REQUIRE_CUDA=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/mla_tests_kernels --gtest_filter="$G" > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep -E "^\[  (PASSED|FAILED) |ERROR SUMMARY" $L/san-$tool.log | tee -a $L/timeline.txt
  save
done
MLA_REQUIRE_CUDA=1 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/mla_tests_kernels --gtest_filter='CudaAttentionTest.*' > $L/san-racecheck.log 2>&1; el "racecheck rc=$?"
grep -E "^\[  (PASSED|FAILED) |RACECHECK SUMMARY|ERROR SUMMARY" $L/san-racecheck.log | tee -a $L/timeline.txt
el done; save
