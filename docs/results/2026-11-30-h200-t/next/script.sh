#!/usr/bin/env bash
# Prepared in session 25 (the twentieth device session) for the next one; not run (no device time
# left). First: the peers again with the fixed flush (1f5489d: the flush reads its buffer as int64;
# before, it wrote and read an int64 copy of it before every call); every peer ratio so far was
# taken with the old flush. Then: does the L2 traffic set the clock under the power cap?
# ../call7/halfkv-next.patch (a timing probe: every odd key tile not loaded once its stage holds
# an earlier tile; results wrong but finite) against main in 3 s loops, beside SDPA's own loop,
# with nvidia-smi every 100 ms; ncu's L2 bytes of one probe launch.
# About 8 minutes (build ~50 s, whole sweep and its peers ~3 min, dense again ~1.5 min, loops ~2 min).
# Run from the repository root: bash docs/results/2026-11-30-h200-t/next/script.sh
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
P=docs/results/2026-11-30-h200-t/call7/halfkv-next.patch
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
mark() { echo "$(date +%s.%N) $*" >> $L/marks.txt; }
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt
# The device copy's .git can be stale: say which flush the peer script in this tree has.
grep -n 'def read_flush\|return flush' scripts/peer_torch.py >> $L/tree.txt; sha256sum scripts/peer_torch.py >> $L/tree.txt
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built main rc=$?"
mkdir -p /tmp/bin/main /tmp/bin/halfkv && cp build/bin/mla-bench /tmp/bin/main/
git apply $P || { el "patch failed"; save; exit 1; }
cmake --build build -j16 --target mla-bench > $L/build-halfkv.log 2>&1; el "built halfkv rc=$?"
cp build/bin/mla-bench /tmp/bin/halfkv/; git apply -R $P
# The peers with the fixed flush: the whole attention sweep once, the dense shapes a second time.
# Per-repetition rows as well (their iteration counts, to set beside the peer's calls).
timeout 150 /tmp/bin/main/mla-bench --backend cuda --sweep attention --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-1.json --benchmark_out_format=json > $L/ours-1.log 2>&1; el "ours 1 rc=$?"
timeout 200 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --ours $L/ours-1.json --out $L/peer-1.json > $L/peer-1.log 2>&1; el "peer 1 rc=$?"
timeout 60 /tmp/bin/main/mla-bench --backend cuda --sweep attention --benchmark_filter='^dense_mha/' --benchmark_repetitions=5 --benchmark_report_aggregates_only=false --benchmark_out=$L/ours-2.json --benchmark_out_format=json > $L/ours-2.log 2>&1; el "ours 2 rc=$?"
timeout 150 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/ours-2.json --out $L/peer-2.json > $L/peer-2.log 2>&1; el "peer 2 rc=$?"
save
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
    sleep 2; mark "sdpa-$tag-$r start"
    timeout 60 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter "$S\$" --iters 5000 --warmup 3 > $L/loop-sdpa-$tag-$r.log 2>&1; el "loop sdpa $S $r rc=$?"
    mark "sdpa-$tag-$r end"
    save
  done
done
kill $SMI
M=gpc__cycles_elapsed.max,lts__t_bytes.sum,lts__t_sectors_op_read.sum,dram__bytes_read.sum,smsp__inst_executed.sum
timeout 100 ncu --clock-control none --kernel-name regex:dense_mha_wgmma --launch-skip 1 --launch-count 1 --metrics $M \
  /tmp/bin/halfkv/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/H:128/reqs:4/tokens:4096/keys:1024/" --benchmark_min_time=0.001s --benchmark_repetitions=1 > $L/ncu-halfkv.txt 2>&1; el "ncu rc=$?"
el done; save
