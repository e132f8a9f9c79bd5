#!/usr/bin/env bash
# Session 24 call 2: the uniform producer (this tree) against SDPA by one protocol: two rounds of
# mla-bench's attention sweep and peer_torch.py (mla-bench's protocol), the old 30-call peer
# protocol once, 4 s loops of 8 x 1024 causal; nvidia-smi clocks / power all along. initcheck and
# racecheck of the uniform producer.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
mark() { echo "$(date +%s.%N) $*" >> $L/marks.txt; }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $L/gpu.txt 2>&1
git log --oneline -3 > $L/tree.txt; git status --short >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build.log 2>&1; el "built rc=$?"
MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool initcheck --error-exitcode 9 build/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-initcheck.log 2>&1; el "initcheck rc=$?"
grep "ERROR SUMMARY" $L/san-initcheck.log | tail -1 >> $L/timeline.txt
MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 build/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMhaNeighbourRequestStaysOut' > $L/san-racecheck.log 2>&1; el "racecheck rc=$?"
grep "RACECHECK SUMMARY" $L/san-racecheck.log | tail -1 >> $L/timeline.txt
save
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,nounits -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
for r in 1 2; do
  mark "ours$r start"
  timeout 150 build/bin/mla-bench --backend cuda --sweep attention --benchmark_out=$L/ours-$r.json --benchmark_out_format=json > $L/ours-$r.log 2>&1; el "ours $r rc=$?"
  mark "ours$r end"; sleep 1; mark "peer$r start"
  timeout 200 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --ours $L/ours-$r.json --out $L/peer-$r.json > $L/peer-$r.log 2>&1; el "peer $r rc=$?"
  mark "peer$r end"; save
done
mark "burst start"
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --iters 30 --ours $L/ours-1.json --out $L/peer-burst.json > $L/peer-burst.log 2>&1; el "peer burst rc=$?"
mark "burst end"
S1='H:128/reqs:8/tokens:8192'
sleep 2; mark "loop-ours start"
timeout 40 build/bin/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/$S1/manual" --benchmark_min_time=4s --benchmark_repetitions=1 --benchmark_out=$L/loop-ours.json --benchmark_out_format=json > $L/loop-ours.log 2>&1; el "loop ours rc=$?"
mark "loop-ours end"; sleep 2; mark "loop-sdpa start"
timeout 60 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter "$S1\$" --iters 5000 --warmup 3 > $L/loop-sdpa.log 2>&1; el "loop sdpa rc=$?"
mark "loop-sdpa end"
kill $SMI
el done; save
