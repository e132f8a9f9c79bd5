"""FlashMLA (github.com/deepseek-ai/FlashMLA) under test: its Hopper sparse decode over the
fp8_ds_mla cache, through its public Python API (get_mla_metadata, flash_mla_with_kvcache with
is_fp8_kvcache=True and indices).

    mla-check --backend python:adapters/flashmla.py [--adapter-fallback]
    mla-bench --backend python:adapters/flashmla.py --sweep attention --benchmark_filter=sparse_mqa

The `flash_mla` package must be importable by the interpreter the harness embeds (e.g. the
directory holding the built flash_mla/ package on PYTHONPATH). FlashMLA has no kernel for the
harness's other operations; with --adapter-fallback they run on the harness's own CUDA backend,
so the whole mixed-batch step runs around FlashMLA's sparse decode.

Mapping (docs/adapters.md): each of the harness's T query tokens is one FlashMLA sequence of one
query (b = T, s_q = 1); the cache [num_blocks, block_size, 656] bytes is viewed as FlashMLA's
[num_blocks, block_size, 1, 656] float8_e4m3fn cache (padded pages through its stride); the
indices are the harness's global slots (FlashMLA's "indices_in_kvcache"), every invalid one given
as -1 (SUPPORTS invalid_index, below); its keys are judged against the cache dequantized as it
reads it (SUPPORTS dequant, below). One convention is translated, not a semantic difference: a
row with no valid index has LSE +inf in FlashMLA and -inf in the harness (docs/semantics.md §4.1);
its output is 0 in both.
"""
import os
import subprocess

import torch

import flash_mla

DEVICE = "cuda"
# Instantiated for 64 and 128 query heads on sm_90; top-k is processed in tiles of 64 tokens.
# Index contract, narrower than the harness's (docs/semantics.md §4.1: any index outside the pool
# is invalid and skipped): FlashMLA's sparse decode treats an index as invalid only when it is -1;
# it reads any other index as a slot, its page being the index (as unsigned) divided by the page
# size, so -2, INT32_MIN or a slot past the pool is read out of bounds (under the suite's indices
# the combine kernel reports an illegal memory access). Hence "invalid_index": -1: the harness gives
# each of its invalid indices to this adapter as -1 and notes how many in the report.
# Dequantization, other than docs/semantics.md §1.2 (bf16(f32(e4m3 * scale))): its Hopper sparse FP8
# decode (csrc/sm90/decode/sparse_fp8) rounds each tile's fp32 scale to bf16 first
# (`scales[i] = (bf16)scales_float[i]`) and multiplies in bf16 (`__float22bfloat162_rn(fp8 values) *
# scale_bf162`): bf16(e4m3 * bf16(scale)), the exact product rounded once. About a quarter of the
# dequantized values differ by one bf16 step, which takes its cosine past the sparse_mqa tolerance
# against §1.2's reference. Hence "dequant": "bf16_scale": the harness judges it against the
# reference dequantized that way and notes it in the report.
SUPPORTS = {"sparse_mqa": {"heads": [64, 128], "sm": [90], "topk_multiple": 64, "invalid_index": -1,
                           "dequant": "bf16_scale"}}

_schedules = {}


def versions():
    v = {"flash_mla": getattr(flash_mla, "__version__", "unknown"), "torch": torch.__version__}
    revision = os.environ.get("FLASH_MLA_REVISION")
    if revision:
        v["flash_mla_git"] = revision
    else:
        try:
            here = os.path.dirname(os.path.abspath(flash_mla.__file__))
            v["flash_mla_git"] = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"],
                                                capture_output=True, text=True, timeout=10).stdout.strip() or "unknown"
        except Exception:
            v["flash_mla_git"] = "unknown"
    return v


def sparse_mqa(q, cache, indices, out, lse, scale, tokens, heads, topk, **_):
    k_cache = cache.view(torch.float8_e4m3fn).unsqueeze(2)       # [num_blocks, B, 1, 656]
    idx = indices.unsqueeze(1)                                    # [T, 1, K]
    if not idx.is_contiguous():
        idx = idx.contiguous()
    # The schedule depends only on the shapes here (no per-sequence lengths in sparse mode), so it
    # is made once per shape, as an engine makes it once per step for all layers.
    key = (tokens, heads, topk, cache.shape[1], q.device.index)
    meta = _schedules.get(key)
    if meta is None:
        meta = flash_mla.get_mla_metadata()[0]
        _schedules[key] = meta
    o, l = flash_mla.flash_mla_with_kvcache(
        q.unsqueeze(1), k_cache, None, None, 512, meta,
        softmax_scale=scale, is_fp8_kvcache=True, indices=idx)
    out.copy_(o.view(tokens, heads, 512))
    l = l.view(tokens, heads)
    lse.copy_(torch.where(torch.isposinf(l), torch.full_like(l, float("-inf")), l))
