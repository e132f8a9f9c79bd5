#!/usr/bin/env bash
# Session 19's first call (pass carry [".devrun"]), ~9 min. The dense variants prepared in session
# 18 and never run on a GPU: qregs = branch wip/dense-q-regs (Q as wgmma's register operand, the Q
# buffer released at item start), qcross = wip/dense-q-regs-cross (that + the last P V and
# epilogue under the next item's S_0). Each: the Cuda dense tests (a hang -> the watchdog build
# says where), memcheck/synccheck/initcheck of them, then an A/B against main's kernel, alternated.
set -u -o pipefail
L=/tmp/L; rm -rf $L; mkdir -p $L
t0=$(date +%s); el() { echo "[$(( $(date +%s)-t0 ))s] $*" | tee -a $L/timeline.txt; }
save() { (cd /tmp && tar czf $OUT/logs.tgz L); }
CFG="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMLA_ENABLE_CUDA=ON"
cmake -S . -B build $CFG > $L/cfg.log 2>&1; cmake --build build -j16 > $L/build.log 2>&1; el "built main rc=$?"
ok=()
for v in qregs qcross; do
  rm -rf /tmp/$v && mkdir -p /tmp/$v && tar --exclude=./build --exclude=./.git -cf - . | (cd /tmp/$v && tar xf -)
  cp .devrun/variants/$v/*.cu* /tmp/$v/kernels/cuda/
  (cd /tmp/$v && cmake -S . -B build $CFG > $L/cfg-$v.log 2>&1 && cmake --build build -j16 --target mla-bench mla_tests_kernels > $L/build-$v.log 2>&1); el "built $v rc=$?"
  grep -E "C75" $L/build-$v.log | head -3 >> $L/timeline.txt
  MLA_REQUIRE_CUDA=1 timeout 60 /tmp/$v/build/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/gtest-$v.log 2>&1; rc=$?; el "$v dense tests rc=$rc"
  grep -E "^\[  (PASSED|FAILED) |Failure" $L/gtest-$v.log | head -6 | tee -a $L/timeline.txt
  if [ $rc = 0 ]; then
    ok+=($v)
    for tool in memcheck synccheck initcheck; do
      MLA_REQUIRE_CUDA=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/$v/build/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/san-$tool-$v.log 2>&1; el "$v $tool rc=$?"
    done
  elif [ $rc = 124 ]; then
    (cd /tmp/$v && cmake -S . -B build-wd $CFG -DCMAKE_CUDA_FLAGS=-DMLA_MBAR_WATCHDOG > $L/cfg-wd-$v.log 2>&1 && cmake --build build-wd -j16 --target mla_tests_kernels > $L/build-wd-$v.log 2>&1)
    MLA_REQUIRE_CUDA=1 timeout 60 /tmp/$v/build-wd/bin/mla_tests_kernels --gtest_filter='CudaAttentionTest.DenseMha*' > $L/gtest-wd-$v.log 2>&1; el "$v watchdog rc=$?"
    grep -E "stuck" $L/gtest-wd-$v.log | sort | uniq -c | sort -rn | head -20 >> $L/timeline.txt
  fi
  save
done
F='--benchmark_filter=^dense_mha/ --benchmark_repetitions=5 --benchmark_out_format=json'
for r in 1 2; do
  timeout 60 build/bin/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/main-$r.json > $L/main-$r.log 2>&1; el "main $r rc=$?"
  for v in ${ok[@]+"${ok[@]}"}; do
    timeout 60 /tmp/$v/build/bin/mla-bench --backend cuda --sweep attention $F --benchmark_out=$L/$v-$r.json > $L/$v-$r.log 2>&1; el "$v $r rc=$?"
  done
  save
done
timeout 120 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --filter dense --ours $L/main-1.json --out $L/peer-dense.json > $L/peer-dense.log 2>&1; el "peer rc=$?"
el done; save
