#!/usr/bin/env bash
# Session 22 call 7 (last device seconds): itemlat (load_q addresses per item: no spill reload;
# start_read under the last P V) against main: A/B round 1, Cuda* tests, A/B round 2.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
cp .devrun/variants/itemlat/* kernels/cuda/
cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-itemlat.log 2>&1; el "built itemlat rc=$?"
mkdir -p /tmp/bin/itemlat && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/itemlat/
git checkout -- kernels/cuda/
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for v in main itemlat; do
  timeout 40 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-1.json > $L/$v-1.log 2>&1; el "$v 1 rc=$?"
done
save
MLA_REQUIRE_CUDA=1 timeout 40 /tmp/bin/itemlat/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-itemlat.log 2>&1; el "itemlat Cuda tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-itemlat.log | head -6 | tee -a $L/timeline.txt
save
for v in main itemlat; do
  timeout 40 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-2.json > $L/$v-2.log 2>&1; el "$v 2 rc=$?"
  save
done
el done; save
