#!/usr/bin/env bash
# Session 22 call 5: tmast (staged epilogue, TMA stores of whole 16-row groups): all kernel tests,
# A/B x2 against main, sanitizers, SDPA peer, suite.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/gpu.txt 2>&1
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
cp .devrun/variants/tmast/* kernels/cuda/
cmake --build build -j16 --target mla-bench mla_tests_kernels mla-check > $L/build-tmast.log 2>&1; el "built tmast rc=$?"
grep -E "C75|warning" $L/build-tmast.log | head -5 >> $L/timeline.txt
mkdir -p /tmp/bin/tmast && cp build/bin/mla-bench build/bin/mla_tests_kernels build/bin/mla-check /tmp/bin/tmast/
git checkout -- kernels/cuda/
MLA_REQUIRE_CUDA=1 timeout 200 /tmp/bin/tmast/mla_tests_kernels > $L/gtest-tmast.log 2>&1; el "tmast all kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" $L/gtest-tmast.log | head -8 | tee -a $L/timeline.txt
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main tmast; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
for tool in memcheck synccheck initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/tmast/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep "ERROR SUMMARY" $L/san-$tool.log | tail -1 >> $L/timeline.txt
done
MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/bin/tmast/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMhaNeighbourRequestStaysOut' > $L/san-racecheck.log 2>&1; el "racecheck rc=$?"
grep "RACECHECK SUMMARY" $L/san-racecheck.log | tail -1 >> $L/timeline.txt
save
timeout 100 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/tmast-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
save
timeout 130 /tmp/bin/tmast/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
el done; save
