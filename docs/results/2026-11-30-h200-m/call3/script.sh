#!/usr/bin/env bash
# Session 18, call 1: the dense kernel's cross-item overlap (next item's S_0 under the epilogue).
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/gpu.txt 2>&1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON > $L/cfg.log 2>&1
cmake --build build -j16 > $L/build.log 2>&1; el "built rc=$?"
grep -E "spill|C75" $L/build.log | head -5 >> $L/timeline.txt
# The old kernel beside it (HEAD's dense_mha_wgmma_kernel.cu), mla-bench only.
mkdir -p /tmp/old && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/old && tar xf -)
cp .devrun/dense_orig.cu /tmp/old/kernels/cuda/dense_mha_wgmma_kernel.cu
(cd /tmp/old && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON > $L/cfg-old.log 2>&1 && cmake --build build -j16 --target mla-bench > $L/build-old.log 2>&1); el "built old rc=$?"
MLA_REQUIRE_CUDA=1 timeout 100 build/bin/mla_tests_kernels --gtest_filter='Cuda*' > $L/gtest-cuda.log 2>&1; rc=$?; el "gtest rc=$rc"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|FAILED" $L/gtest-cuda.log | head -12 | tee -a $L/timeline.txt
save
if [ $rc != 0 ]; then
  cmake -S . -B build-wd -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON -DCMAKE_CUDA_FLAGS=-DMLA_MBAR_WATCHDOG > $L/cfg-wd.log 2>&1
  cmake --build build-wd -j16 --target mla_tests_kernels > $L/build-wd.log 2>&1; el "built wd rc=$?"
  MLA_REQUIRE_CUDA=1 timeout 90 build-wd/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/gtest-wd.log 2>&1; el "gtest wd rc=$?"
  grep -E "stuck" $L/gtest-wd.log | sort | uniq -c | sort -rn | head -40 >> $L/timeline.txt
  grep -E "RUN|OK \]|FAILED|Failure|MLA_DENSE|dense " $L/gtest-wd.log | head -30 >> $L/timeline.txt
  save; exit 1
fi
timeout 150 build/bin/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2 3; do
  timeout 120 /tmp/old/build/bin/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/old-$r.json > $L/old-$r.log 2>&1; el "old $r rc=$?"
  timeout 120 build/bin/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/new-$r.json > $L/new-$r.log 2>&1; el "new $r rc=$?"
  save
done
timeout 200 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/new-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
save
for tool in memcheck racecheck synccheck initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 build/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "$tool dense tests rc=$?"; tail -3 $L/san-$tool.log | tee -a $L/timeline.txt
done
save
timeout 100 build/bin/mla-bench --backend cuda --sweep attention --benchmark_filter='^forward/' --benchmark_repetitions=3 > $L/forward.log 2>&1; el "forward rc=$?"
timeout 100 build/bin/mla-bench --backend cuda --sweep cache_path --benchmark_filter='^pack/' --benchmark_repetitions=3 > $L/pack.log 2>&1; el "pack rc=$?"
el done; save
