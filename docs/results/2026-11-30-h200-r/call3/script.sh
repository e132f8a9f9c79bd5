#!/usr/bin/env bash
# Session 23 call 3: the tree with the narrow last tile (main) against 616d334's kernel (prev):
# all kernel tests, initcheck / racecheck, two A/B rounds, SDPA in the same call.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
git diff HEAD --stat > $L/tree.txt; git log --oneline -1 >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built main rc=$?"
grep -E "error|C75" $L/build.log | grep -v C7519 | head -5 >> $L/timeline.txt
mkdir -p /tmp/bin/main && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/main/
cp .devrun/variants/prev/* kernels/cuda/
cmake --build build -j16 --target mla-bench > $L/build-prev.log 2>&1; el "built prev rc=$?"
mkdir -p /tmp/bin/prev && cp build/bin/mla-bench /tmp/bin/prev/
git checkout -- kernels/cuda/ 2>/dev/null; git stash list > /dev/null
MLA_REQUIRE_CUDA=1 timeout 100 /tmp/bin/main/mla_tests_kernels > $L/gtest-main.log 2>&1; el "main all kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-main.log | head -12 | tee -a $L/timeline.txt
for tool in initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/main/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep "ERROR SUMMARY" $L/san-$tool.log | tail -1 >> $L/timeline.txt
done
MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/bin/main/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMhaNeighbourRequestStaysOut' > $L/san-racecheck.log 2>&1; el "racecheck rc=$?"
grep "RACECHECK SUMMARY" $L/san-racecheck.log | tail -1 >> $L/timeline.txt
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main prev; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/main-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
el done; save
