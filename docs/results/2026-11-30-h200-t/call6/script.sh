#!/usr/bin/env bash
# Session 25, call 6 (8c1788a's tree + docs): ncu counters of one launch, ours and cuDNN's kernel
# (through SDPA) on unmasked 4 x 1024 over 1024 keys: L2 / DRAM / L1 bytes and instructions by
# pipe, to find what the extra energy per call is spent on. Run from the repository root.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 --target mla-bench > $L/build.log 2>&1; el "built rc=$?"
M=gpc__cycles_elapsed.max,lts__t_bytes.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__t_bytes.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_lsu.sum,smsp__inst_executed_pipe_uniform.sum,smsp__inst_executed_pipe_tensor_op_gmma.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,smsp__inst_executed_op_global_st.sum,smsp__inst_executed_op_local_ld.sum,smsp__inst_executed_op_local_st.sum,smsp__thread_inst_executed.sum,smsp__sass_thread_inst_executed_op_shuffle_pred_on.sum
shape='reqs:4/tokens:4096/keys:1024/mask:none'
timeout 100 ncu --clock-control none --kernel-name regex:dense_mha_wgmma --launch-skip 1 --launch-count 1 --metrics $M \
  build/bin/mla-bench --backend cuda --sweep attention --benchmark_filter="^dense_mha/H:128/$shape/" --benchmark_min_time=0.001s --benchmark_repetitions=1 > $L/ncu-ours.txt 2>&1; el "ours rc=$?"
save
timeout 140 ncu --clock-control none --kernel-name regex:'cudnn|fmha|flash' --launch-skip 2 --launch-count 1 --metrics $M \
  python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter "H:128/$shape\$" --iters 20 --warmup 1 > $L/ncu-sdpa.txt 2>&1; el "sdpa rc=$?"
el done; save
