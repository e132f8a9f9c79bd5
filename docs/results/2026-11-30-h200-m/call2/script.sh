#!/usr/bin/env bash
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
cmake -S . -B build-wd -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON -DCMAKE_CUDA_FLAGS=-DMLA_MBAR_WATCHDOG > $L/cfg.log 2>&1
cmake --build build-wd -j16 --target mla_tests_kernels > $L/build.log 2>&1; el "built rc=$?"
MLA_REQUIRE_CUDA=1 timeout 90 build-wd/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/gtest.log 2>&1; el "gtest rc=$?"
grep -E "stuck" $L/gtest.log | sort | uniq -c | sort -rn | head -40 >> $L/timeline.txt
grep -E "RUN|OK \]|FAILED|Failure|MLA_DENSE|dense " $L/gtest.log | head -30 >> $L/timeline.txt
save
