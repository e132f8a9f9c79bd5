#!/bin/sh
# Compiler launcher of the sm_90a object library (kernels/CMakeLists.txt): runs the compiler
# command given as arguments, unchanged, and passes its standard error on without exactly one kind
# of line, ptxas's advisory
#   ptxas info    : (C7519) warpgroup.arrive is injected in around line N by compiler to allow use
#   of registers in GMMA in function '_ZN3mla11dense_wgmma...'
# for the dense wgmma kernels (kernels/cuda/dense_mha/dense_mha_wgmma.cu). Standard output and the
# exit status are the compiler's.
#
# What the line reports, and why it is harmless: the kernel issues wgmma.fence once before a branch
# that chooses between two wgmma sequences (the first key tile, wide or narrow; the last P V, 8 or
# 4 k16 steps) and commits after the branches join. ptxas wants the fence in the same basic block
# as the wgmma it orders, so it adds a warpgroup.arrive at the start of each branch (and an empty
# wgmma at the join for the commit). The program's order of register writes and wgmma issues is
# already correct; the injected instructions are the ones the fence stands for. Moving the fence
# and commit into each branch silences ptxas but changes the kernel's register allocation and
# schedule throughout, which needs a GPU to validate. No other ptxas message (spills, the C751x
# serialization warnings, errors) is touched.
set -u
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
"$@" 2>"$err"
status=$?
grep -v -E "^ptxas info +: \(C7519\) warpgroup\.arrive is injected in around line [0-9]+ by compiler to allow use of registers in GMMA in function '_ZN3mla11dense_wgmma[A-Za-z0-9_]*'\$" "$err" >&2
exit $status
