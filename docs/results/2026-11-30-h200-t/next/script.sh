#!/usr/bin/env bash
# Prepared in session 25 for the next session (not run: no device time left). Does the L2 traffic
# set the clock under the power cap? ../call7/halfkv-next.patch (a timing probe: every odd key
# tile not loaded once its stage holds an earlier tile; results wrong but finite) against main:
# 3 s loops of unmasked 4 x 1024 over 1024 keys and of 8 x 1024 causal, alternated, twice, with
# nvidia-smi every 100 ms; then ncu's L2 bytes of one probe launch. Reading: if the probe's clock
# rises well above main's (main ~1600 MHz at 692 W at the first shape, call 5 / 7), the bytes
# are where the energy goes and more query rows per K / V read is the lever.
# Run from the repository root: bash docs/results/2026-11-30-h200-t/next/script.sh
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
P=docs/results/2026-11-30-h200-t/call7/halfkv-next.patch
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
mark() { echo "$(date +%s.%N) $*" >> $L/marks.txt; }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main /tmp/bin/halfkv && cp build/bin/mla-bench /tmp/bin/main/
git apply $P && cmake --build build -j16 --target mla-bench > $L/build-halfkv.log 2>&1; el "built halfkv rc=$?"
cp build/bin/mla-bench /tmp/bin/halfkv/; git apply -R $P
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,nounits -lms 100 > $L/smi.csv 2> $L/smi.err &
SMI=$!
for S in 'H:128/reqs:4/tokens:4096/keys:1024/mask:none' 'H:128/reqs:8/tokens:8192'; do
  tag=$(echo "$S" | tr '/:' '__')
  for r in 1 2; do
    for v in main halfkv; do
      sleep 2; mark "$v-$tag-$r start"
      timeout 30 /tmp/bin/$v/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/$S/manual" --benchmark_min_time=3s --benchmark_repetitions=1 --benchmark_out=$L/loop-$v-$tag-$r.json --benchmark_out_format=json > $L/loop-$v-$tag-$r.log 2>&1; el "loop $v $S $r rc=$?"
      mark "$v-$tag-$r end"
    done
    save
  done
done
kill $SMI
M=gpc__cycles_elapsed.max,lts__t_bytes.sum,lts__t_sectors_op_read.sum,dram__bytes_read.sum,smsp__inst_executed.sum
timeout 100 ncu --clock-control none --kernel-name regex:dense_mha_wgmma --launch-skip 1 --launch-count 1 --metrics $M \
  /tmp/bin/halfkv/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/H:128/reqs:4/tokens:4096/keys:1024/" --benchmark_min_time=0.001s --benchmark_repetitions=1 > $L/ncu-halfkv.txt 2>&1; el "ncu rc=$?"
el done; save
