#!/usr/bin/env bash
# Session 21's first call (pass carry [".devrun"]), ~6 min. sdb = branch wip/dense-s-double (S
# double-buffered; its session-20 build hung in DenseMhaMatchesHost, a shuffle inside a lane-0
# branch, fixed since; compiled and reviewed, never run): tests (on a hang, a watchdog build names
# the stuck mbarrier), A/B against main, and if faster the suite, sanitizers and the SDPA peer.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $L/gpu.txt 2>&1
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
if [ $rc != 0 ]; then
  cmake -S . -B build-wd $CFG -DCMAKE_CUDA_FLAGS=-DMLA_MBAR_WATCHDOG > $L/cfg-wd.log 2>&1
  cmake --build build-wd -j16 --target mla_tests_kernels > $L/build-wd.log 2>&1; el "built sdb watchdog rc=$?"
  MLA_REQUIRE_CUDA=1 timeout 90 build-wd/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/gtest-wd.log 2>&1; el "watchdog run rc=$?"
  grep -m 20 "mbar_wait stuck" $L/gtest-wd.log | tee -a $L/timeline.txt
  git checkout -- $K; save; exit 0
fi
# Per-step stamps of sdb (a diagnostic copy, variants/sdbt): compare with session 20's main
# (docs/results/2026-11-30-h200-o/call2/trace-ttrace-*.txt: 3612 cycles per tile and warpgroup).
cp .devrun/variants/sdbt/* kernels/cuda/
cmake --build build -j16 --target mla-bench > $L/build-sdbt.log 2>&1; el "built sdbt rc=$?"
mkdir -p /tmp/bin/sdbt && cp build/bin/mla-bench /tmp/bin/sdbt/
cp .devrun/variants/sdb/* kernels/cuda/
S1='^dense_mha/H:128/reqs:4/tokens:4096/keys:4096/mask:none'
S2='^dense_mha/H:128/reqs:1/tokens:8192/'
for sh in 1 2; do
  f=$S1; [ $sh = 2 ] && f=$S2
  MLA_TILE_TRACE_FILE=$L/trace-sdbt-$sh.bin timeout 60 /tmp/bin/sdbt/mla-bench --backend cuda --sweep attention --benchmark_filter="$f" --benchmark_repetitions=1 > $L/trace-sdbt-$sh.log 2>&1; el "trace sdbt $sh rc=$?"
  timeout 30 python3 .devrun/tile_trace.py $L/trace-sdbt-$sh.bin --sdb > $L/trace-sdbt-$sh.txt 2>&1; cat $L/trace-sdbt-$sh.txt >> $L/timeline.txt
done
save
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main sdb; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
timeout 150 /tmp/bin/sdb/mla-check --backend cuda --jobs 12 --report $L/check-cuda.json > $L/check.log 2>&1; el "suite rc=$?"; tail -2 $L/check.log | tee -a $L/timeline.txt
save
for tool in memcheck synccheck initcheck; do
  MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/sdb/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool-sdb.log 2>&1; el "sdb $tool rc=$?"
  tail -1 $L/san-$tool-sdb.log >> $L/timeline.txt
done
save
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/sdb-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
git checkout -- $K
el done; save
