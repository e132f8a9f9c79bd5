#!/usr/bin/env bash
# Session 25, call 4 (8c1788a's tree, main with the tail order): initcheck, synccheck and racecheck
# of the dense tests; a probe of the last wave on the unmasked 4 x 1024 over 1024 keys (4096 equal
# items: 31.03 waves on 132 CTAs, 32 on 128, 33.03 on 124) and on 8 x 1024 causal, CTAs capped by
# MLA_DENSE_WGMMA_MAX_CTAS, alternated, two rounds. Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built rc=$?"
for tool in initcheck synccheck; do
  MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 build/bin/mla_tests_kernels --gtest_filter='*Dense*' > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep -E "tests? from .* ran|ERROR SUMMARY" $L/san-$tool.log | tee -a $L/timeline.txt
done
MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 build/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMhaNeighbourRequestStaysOut' > $L/san-racecheck.log 2>&1; el "racecheck rc=$?"
grep "RACECHECK SUMMARY" $L/san-racecheck.log | tee -a $L/timeline.txt
save
F='--benchmark_filter=^dense_mha/H:128/reqs:(4/tokens:4096/keys:1024|8/tokens:8192/manual) --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for c in 132 128 124; do
    MLA_DENSE_WGMMA_MAX_CTAS=$c timeout 60 build/bin/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/ctas$c-$r.json > $L/ctas$c-$r.log 2>&1; el "ctas $c round $r rc=$?"
  done
  save
done
el done; save
