"""A timing fixture: sparse MQA only (no gemm, no dense MHA, no cache path), on the host.

mla-bench times it on a sweep with attention shapes (tests/apps/test_mla_bench_cli.py): the GEMM
ceiling is measured by the harness's own host backend, and the shapes of the operations it lacks
are skipped with the reason. It writes zeros (finite, as mla-bench's sanity check of the first
run requires) whatever the inputs: it is never a correctness check.
"""
DEVICE = "cpu"


def sparse_mqa(out, lse, **_):
    out[...] = 0
    lse[...] = 0.0
