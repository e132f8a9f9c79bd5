#!/usr/bin/env bash
# Session 23 call 1: main's kernel tests (616d334's test refactor), traffic probes, cluster kernel tests + A/B.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/main/
MLA_REQUIRE_CUDA=1 timeout 120 /tmp/bin/main/mla_tests_kernels > $L/gtest-main.log 2>&1; el "main all kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-main.log | head -12 | tee -a $L/timeline.txt
save
for v in halfkv noq nostore; do
  cp .devrun/variants/$v/* kernels/cuda/
  cmake --build build -j16 --target mla-bench > $L/build-$v.log 2>&1; el "built $v rc=$?"
  mkdir -p /tmp/bin/$v && cp build/bin/mla-bench /tmp/bin/$v/
  git checkout -- kernels/cuda/
done
cp .devrun/variants/cluster/* kernels/cuda/
cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-cluster.log 2>&1; el "built cluster rc=$?"
grep -E "error|C75" $L/build-cluster.log | head -5 >> $L/timeline.txt
mkdir -p /tmp/bin/cluster && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/cluster/
git checkout -- kernels/cuda/
MLA_REQUIRE_CUDA=1 timeout 100 /tmp/bin/cluster/mla_tests_kernels --gtest_filter='CudaAttention*:*Dense*' > $L/gtest-cluster.log 2>&1; crc=$?; el "cluster dense tests rc=$crc"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-cluster.log | head -12 | tee -a $L/timeline.txt
save
VS="main halfkv noq nostore"; [ $crc -eq 0 ] && VS="$VS cluster"
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in $VS; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
if [ $crc -eq 0 ]; then
  MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/bin/cluster/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-memcheck.log 2>&1; el "memcheck rc=$?"
  grep "ERROR SUMMARY" $L/san-memcheck.log | tail -1 >> $L/timeline.txt
fi
el done; save
