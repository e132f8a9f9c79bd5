#!/usr/bin/env bash
# Session 20, call 6: sdb = S double-buffered (S_{t+1} on the tensor cores during the softmax of
# S_t; P V of tile t-1 before it; Q from shared memory, released after the last S). Tests, A/B,
# and, if faster, the suite and sanitizers on it.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
K="kernels/cuda/dense_mha_wgmma_kernel.cu kernels/cuda/wgmma_device.cuh"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
cp .devrun/variants/sdb/* kernels/cuda/
cmake --build build -j16 > $L/build-sdb.log 2>&1; el "built sdb rc=$?"
grep -E "C75" $L/build-sdb.log | head -3 >> $L/timeline.txt
mkdir -p /tmp/bin/sdb && cp build/bin/mla-bench build/bin/mla_tests_kernels build/bin/mla-check /tmp/bin/sdb/
MLA_REQUIRE_CUDA=1 timeout 60 /tmp/bin/sdb/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-sdb.log 2>&1; rc=$?; el "sdb Cuda tests rc=$rc"
grep -E "^\[  (PASSED|FAILED) |Failure" $L/gtest-sdb.log | head -6 | tee -a $L/timeline.txt
save
[ $rc = 0 ] || { el "sdb failed its tests"; save; exit 0; }
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for v in main sdb; do
  timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-1.json > $L/$v-1.log 2>&1; el "$v 1 rc=$?"
done
save
faster=$(python3 -c "
import json
def load(f): return {b['run_name']:b['real_time'] for b in json.load(open(f))['benchmarks'] if b.get('aggregate_name')=='median'}
a=load('$L/main-1.json'); b=load('$L/sdb-1.json'); r=[b[k]/a[k] for k in a]
print(1 if sum(r)/len(r) < 0.99 else 0); print(min(r), max(r), file=open('$L/ratio.txt','w'))" 2>>$L/timeline.txt)
el "faster=$faster $(cat $L/ratio.txt)"
if [ "$faster" = 1 ]; then
  timeout 150 /tmp/bin/sdb/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
  save
  for tool in memcheck synccheck initcheck; do
    MLA_REQUIRE_CUDA=1 timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/sdb/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool-sdb.log 2>&1; el "sdb $tool rc=$?"
    tail -1 $L/san-$tool-sdb.log >> $L/timeline.txt
  done
  save
fi
for v in main sdb; do
  timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-2.json > $L/$v-2.log 2>&1; el "$v 2 rc=$?"
done
el done; save
