#!/bin/sh
# Compiler launcher of the sm_90a object library (kernels/CMakeLists.txt): runs the compiler
# command given as arguments, unchanged, and reads ptxas's messages on standard error:
#
# 1. A "Potential Performance Loss" message of ptxas fails the compile: the message is passed on,
#    followed by one line saying so, and the exit status is 1 (the compiler's own when it failed).
#    These messages (C75xx) say that ptxas serialized a kernel's wgmma, or ignored its setmaxnreg:
#    the kernel still computes the right values, so no correctness test notices, but every product
#    waits for the one before (no product overlaps another or the softmax), or the warpgroups keep
#    the register split the kernel was written against. Causes: code placed after a wgmma issue
#    inside a loop (in the crossover sparse MQA, the next block's Q copies there cost about 12 %
#    per tile on an H100), a wait for an earlier product issued after a later one (C7514),
#    non-wgmma writes to an accumulator while its product is in flight (C7515).
#
# 2. Exactly one kind of line is dropped, ptxas's advisory
#      ptxas info    : (C7519) warpgroup.arrive is injected in around line N by compiler to allow use
#      of registers in GMMA in function '_ZN3mla11dense_wgmma...'
#    for the dense wgmma kernels (kernels/cuda/dense_mha/dense_mha_wgmma.cu). Why it is harmless:
#    the kernel issues wgmma.fence once before a branch that chooses between two wgmma sequences
#    (the first key tile, wide or narrow; the last P V, 8 or 4 k16 steps) and commits after the
#    branches join. ptxas wants the fence in the same basic block as the wgmma it orders, so it adds
#    a warpgroup.arrive at the start of each branch (and an empty wgmma at the join for the commit).
#    The program's order of register writes and wgmma issues is already correct; the injected
#    instructions are the ones the fence stands for. Moving the fence and commit into each branch
#    silences ptxas but changes the kernel's register allocation and schedule throughout, which
#    needs a GPU to validate.
#
# Every other line (spills, errors, other advisories) is passed on unchanged. Standard output is the
# compiler's.
set -u
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
trap 'exit 130' INT TERM  # through the EXIT trap, which removes the file
"$@" 2>"$err"
status=$?
grep -v -E "^ptxas info +: \(C7519\) warpgroup\.arrive is injected in around line [0-9]+ by compiler to allow use of registers in GMMA in function '_ZN3mla11dense_wgmma[A-Za-z0-9_]*'\$" "$err" >&2
if [ "$status" -eq 0 ] && grep -q -E "Potential Performance Loss" "$err"; then
  echo "error: ptxas reported a performance loss in an sm_90a kernel (message above): serialized wgmma or an ignored setmaxnreg; see kernels/cmake/ptxas_wgmma_launcher.sh" >&2
  exit 1
fi
exit $status
