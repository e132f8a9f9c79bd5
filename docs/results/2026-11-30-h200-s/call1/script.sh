#!/usr/bin/env bash
# Session 24 call 1: uprod (producer warp index via __shfl_sync) vs main: kernel tests + sanitizers,
# sustained loops with nvidia-smi power/clock/energy sampling (ours main/uprod, SDPA), two A/B rounds.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built uprod rc=$?"
grep -E "error|spill|C75" $L/build.log | grep -v C7519 | head -5 >> $L/timeline.txt
mkdir -p /tmp/bin/uprod && cp build/bin/mla-bench build/bin/mla_tests_kernels /tmp/bin/uprod/
cp kernels/cuda/dense_mha_wgmma_kernel.cu /tmp/uprod_kernel.cu
cp .devrun/variants/main/* kernels/cuda/
cmake --build build -j16 --target mla-bench > $L/build-main.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main && cp build/bin/mla-bench /tmp/bin/main/
cp /tmp/uprod_kernel.cu kernels/cuda/dense_mha_wgmma_kernel.cu
MLA_REQUIRE_CUDA=1 timeout 120 /tmp/bin/uprod/mla_tests_kernels > $L/gtest-uprod.log 2>&1; el "uprod all kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" $L/gtest-uprod.log | head -12 | tee -a $L/timeline.txt
for tool in memcheck synccheck; do
  MLA_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/uprod/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool.log 2>&1; el "$tool rc=$?"
  grep "ERROR SUMMARY" $L/san-$tool.log | tail -1 >> $L/timeline.txt
done
save
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,total_energy_consumption,temperature.gpu,clocks_event_reasons.active --format=csv,nounits -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
mark() { echo "$(date +%s.%N) $*" >> $L/marks.txt; }
S1='H:128/reqs:8/tokens:8192'; S2='H:128/reqs:4/tokens:4096/keys:4096/mask:none'
for shape in "$S1" "$S2"; do
  tag=$(echo "$shape" | tr '/:' '__')
  for v in main uprod main uprod; do
    sleep 2; mark "$v $tag start"
    timeout 40 /tmp/bin/$v/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/$shape/manual" --benchmark_min_time=4s --benchmark_repetitions=1 --benchmark_out=$L/loop-$v-$tag-$(date +%s).json --benchmark_out_format=json > $L/loop-$v-$tag.log 2>&1
    mark "$v $tag end"; el "$v $tag rc=$?"
  done
  sleep 2; mark "sdpa $tag start"
  timeout 60 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter "$shape\$" --iters 5000 --warmup 3 > $L/loop-sdpa-$tag.log 2>&1
  mark "sdpa $tag end"; el "sdpa $tag rc=$?"
  save
done
kill $SMI
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  for v in main uprod; do
    timeout 60 /tmp/bin/$v/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
el done; save
