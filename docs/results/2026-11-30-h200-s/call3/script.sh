#!/usr/bin/env bash
# Session 24 call 3: main with the uniform producer: the suite on the GPU (mla-check --backend
# cuda), all kernel tests, a third round of mla-bench's attention sweep against the peers by
# mla-bench's protocol.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $L/gpu.txt 2>&1
git log --oneline -3 > $L/tree.txt; git status --short >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla-check mla_tests_kernels > $L/build.log 2>&1; el "built rc=$?"
MLA_REQUIRE_CUDA=1 timeout 120 build/bin/mla_tests_kernels > $L/gtest-kernels.log 2>&1; el "kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-kernels.log | head -12 | tee -a $L/timeline.txt
timeout 200 build/bin/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check-cuda.log 2>&1; el "suite rc=$?"
tail -n 3 $L/check-cuda.log >> $L/timeline.txt
save
timeout 150 build/bin/mla-bench --backend cuda --sweep attention --benchmark_out=$L/ours-3.json --benchmark_out_format=json > $L/ours-3.log 2>&1; el "ours 3 rc=$?"
timeout 200 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --ours $L/ours-3.json --out $L/peer-3.json > $L/peer-3.log 2>&1; el "peer 3 rc=$?"
el done; save
