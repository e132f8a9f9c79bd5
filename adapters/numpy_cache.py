"""The cache path (pack, gather + upconvert, top-k index conversion) in NumPy, on the host.

An adapter (docs/adapters.md) that implements the fp8_ds_mla semantics of docs/semantics.md
sections 1-3 independently of the harness's kernels; CI runs the suite's cache-path checks
through it on machines without a GPU or PyTorch:

    mla-check --backend python:adapters/numpy_cache.py --check pack --check gather --check convert

bf16 buffers arrive as uint16 arrays of bf16 bits (NumPy has no bfloat16); every operation
writes its outputs in place.
"""
import numpy as np

DEVICE = "cpu"

E4M3_MAX = np.float32(448.0)
FLT_MIN = np.float32(np.finfo(np.float32).tiny)
NOPE, ROPE, TILE, ENTRY = 512, 64, 128, 656
SCALES = NOPE  # byte offset of the four fp32 scales
ROPE_AT = NOPE + 16  # byte offset of the RoPE bf16 values


def versions():
    return {"numpy": np.__version__}


def _bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(x):
    """Round-to-nearest-even fp32 -> bf16 bits; NaN -> quiet NaN with its sign."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) | 0x0040).astype(np.uint16), rounded)


def _e4m3_encode(x):
    """fp32 -> E4M3 "fn" bits: nearest even, finite overflow saturates to +-448, NaN -> 0x7F."""
    u = x.astype(np.float32).view(np.uint32)
    sign = ((u >> 24) & 0x80).astype(np.uint8)
    mag = np.abs(x.astype(np.float32)).astype(np.float64)
    # Quantum of each magnitude: 2^(e - 3) in the normal range, 2^-9 below 2^-6.
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    e = np.maximum(e, -6.0)
    quantum = np.exp2(e - 3.0)
    steps = np.round(mag / quantum)  # half to even; exact (power-of-two quantum)
    value = steps * quantum
    value = np.minimum(value, 448.0)
    # Bits of the rounded value (a carry into the next binade is handled by recomputing e).
    e2 = np.floor(np.log2(np.where(value > 0, value, 1.0)))
    normal = value >= 2.0 ** -6
    exp_bits = np.where(normal, e2 + 7.0, 0.0)
    man = np.where(normal, value / np.exp2(e2) * 8.0 - 8.0, value / 2.0 ** -9)
    code = (exp_bits.astype(np.int64) << 3) | np.round(man).astype(np.int64)
    code = np.where(value == 0, 0, code).astype(np.uint8)
    out = sign | code
    return np.where(np.isnan(x), np.uint8(0x7F), out)


def _e4m3_decode(bits):
    b = bits.astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp = (b >> 3) & 0xF
    man = b & 0x7
    value = np.where(exp == 0, man * 2.0 ** -9, (1.0 + man / 8.0) * np.exp2(exp - 7.0))
    value = np.where((exp == 0xF) & (man == 0x7), np.nan, value)
    return (sign * value).astype(np.float32)


def _entry_view(cache):
    return cache  # [num_blocks, block_size, 656] uint8, strided by the page


def pack(kv_c, k_pe, slot_mapping, cache, num_tokens, block_size, **_):
    capacity = cache.shape[0] * block_size
    for i in range(num_tokens):
        slot = int(slot_mapping[i])
        if slot < 0 or slot >= capacity:
            continue
        x = _bf16_to_f32(kv_c[i, :NOPE]).reshape(4, TILE)
        a = np.abs(x)
        amax = np.where(np.isnan(a), np.float32(0), a).max(axis=1).astype(np.float32)
        scale = np.maximum(amax / E4M3_MAX, FLT_MIN).astype(np.float32)
        q = _e4m3_encode((x / scale[:, None]).astype(np.float32)).reshape(NOPE)
        entry = cache[slot // block_size, slot % block_size]
        entry[:NOPE] = q
        entry[SCALES:ROPE_AT] = scale.astype("<f4").view(np.uint8)
        entry[ROPE_AT:] = np.ascontiguousarray(k_pe[i, :ROPE]).astype("<u2").view(np.uint8)


def _dequant(entry):
    scale = entry[SCALES:ROPE_AT].copy().view("<f4").astype(np.float32)
    x = _e4m3_decode(entry[:NOPE]).reshape(4, TILE) * scale[:, None]
    rope = entry[ROPE_AT:].copy().view("<u2")
    return np.concatenate([_f32_to_bf16(x.astype(np.float32)).reshape(NOPE), rope])


def gather(cache, block_table, workspace_starts, seq_starts, dst, num_rows, num_reqs, block_size, **_):
    num_blocks = cache.shape[0]
    width = block_table.shape[1]
    for o in range(num_rows):
        r = int(np.searchsorted(workspace_starts, o, side="right")) - 1
        row = dst[o]
        if r < 0:
            row[:] = 0x7FC0
            continue
        p = o - int(workspace_starts[r]) + (int(seq_starts[r]) if seq_starts is not None else 0)
        if p < 0 or p // block_size >= width:
            row[:] = 0x7FC0
            continue
        phys = int(block_table[r, p // block_size])
        if phys < 0 or phys >= num_blocks:
            row[:] = 0x7FC0
            continue
        row[:] = _dequant(cache[phys, p % block_size])


def convert(req_id, indices, block_table, out, valid_count, prefill_req, prefill_workspace_starts, block_size,
            topk, num_prefills, dcp_world_size, dcp_rank, dcp_interleave, **_):
    num_reqs, width = block_table.shape
    world, rank, inter = dcp_world_size, dcp_rank, dcp_interleave
    for t in range(out.shape[0]):
        r = int(req_id[t])
        p = int(prefill_req[t]) if prefill_req is not None else -1
        count = 0
        for j in range(topk):
            tok = int(indices[t, j])
            slot = -1
            if r < 0 or r >= num_reqs or tok < 0:
                pass
            elif p >= 0:
                # A workspace row that does not fit int32 (or a negative start) is invalid.
                if p < num_prefills and 0 <= int(prefill_workspace_starts[p]) + tok <= 2**31 - 1:
                    slot = int(prefill_workspace_starts[p]) + tok
            else:
                local = tok
                if world > 1:
                    if (tok // inter) % world != rank:
                        local = -1
                    else:
                        local = (tok // (world * inter)) * inter + tok % inter
                if local >= 0 and local // block_size < width:
                    phys = int(block_table[r, local // block_size])
                    if phys >= 0 and phys * block_size + local % block_size <= 2**31 - 1:
                        slot = phys * block_size + local % block_size
            out[t, j] = slot
            count += slot >= 0
        if valid_count is not None:
            valid_count[t] = count
