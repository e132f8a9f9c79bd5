"""What scripts/peer_check.py and scripts/peer_timing.py share: the fp8_ds_mla entry layout and the
three cache-path operations written as a PyTorch user would write them (tensor indexing,
`.to(torch.float8_e4m3fn)` after clamping to +-448, fp32 division for the scales, dtype views of
the 656-byte entry), without our kernels.
"""
import json
from pathlib import Path

import torch

# The fp8_ds_mla entry (docs/semantics.md §1); mla-bench --dump's manifest "layout" block must agree.
ENTRY_BYTES = 656
NOPE_DIMS = 512
TILE_DIMS = 128
NUM_TILES = NOPE_DIMS // TILE_DIMS
SCALE_OFFSET = 512
ROPE_OFFSET = 528
ROPE_DIMS = 64
LATENT_DIMS = NOPE_DIMS + ROPE_DIMS
KV_COLS = LATENT_DIMS
E4M3_MAX = 448.0
FLT_MIN = 1.1754943508222875e-38  # smallest normal float32, exactly representable

REPO_ROOT = Path(__file__).resolve().parent.parent


class PeerError(Exception):
    """Bad input or an unusable environment: the scripts exit 2 with its message."""


def quantize_entries(kv_c, k_pe):
    """[n, 512] and [n, 64] bf16 -> [n, 656] uint8 fp8_ds_mla entries."""
    n = kv_c.shape[0]
    x = kv_c.float().view(n, NUM_TILES, TILE_DIMS)
    amax = x.abs().amax(dim=-1)
    # A tensor divisor on purpose: PyTorch turns division by a Python scalar into a multiply by
    # its reciprocal on CUDA, which differs from the contract's fp32 division in the last bit.
    scale = torch.clamp(amax / torch.full_like(amax, E4M3_MAX), min=FLT_MIN)
    q = (x / scale.unsqueeze(-1)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return torch.cat(
        [q.view(n, NOPE_DIMS).view(torch.uint8),
         scale.contiguous().view(torch.uint8),
         k_pe.contiguous().view(torch.uint8)],
        dim=1)


def cache_pages(cache, block_size):
    """[num_blocks, page_stride] uint8 -> [num_blocks, block_size, 656] view (padding excluded)."""
    return cache[:, :block_size * ENTRY_BYTES].view(cache.shape[0], block_size, ENTRY_BYTES)


def pack_torch(kv_c, k_pe, slot_mapping, cache, block_size):
    """Writes entries slot_mapping[i] of `cache` in place; negative or out-of-pool slots are skipped."""
    n = slot_mapping.shape[0]
    entries = quantize_entries(kv_c[:n], k_pe[:n])
    num_slots = cache.shape[0] * block_size
    valid = (slot_mapping >= 0) & (slot_mapping < num_slots)
    slots = slot_mapping[valid]
    cache_pages(cache, block_size)[slots // block_size, slots % block_size] = entries[valid]


def dequantize_entries(entries):
    """[t, 656] uint8 -> [t, 576] bf16: bf16(float(fp8) * scale) and the RoPE bits."""
    t = entries.shape[0]
    nope = entries[:, :NOPE_DIMS].view(torch.float8_e4m3fn).float().view(t, NUM_TILES, TILE_DIMS)
    scales = entries[:, SCALE_OFFSET:ROPE_OFFSET].view(torch.float32)
    rope = entries[:, ROPE_OFFSET:ENTRY_BYTES].view(torch.bfloat16)
    latent = (nope * scales.unsqueeze(-1)).view(t, NOPE_DIMS).to(torch.bfloat16)
    return torch.cat([latent, rope], dim=1)


def gather_torch(cache, block_table, workspace_starts, seq_starts, num_rows, block_size, bt_width):
    """[num_rows, 576] bf16; rows without a valid source are NaN."""
    device = cache.device
    num_blocks = cache.shape[0]
    rows = torch.arange(num_rows, device=device)
    ws = workspace_starts.long()
    req = torch.searchsorted(ws, rows, right=True) - 1
    valid = req >= 0
    req = req.clamp(min=0)
    pos = rows - ws[req]
    if seq_starts is not None:
        pos = pos + seq_starts.long()[req]
    logical = torch.div(pos, block_size, rounding_mode="floor")
    valid &= (pos >= 0) & (logical < bt_width)
    phys = block_table.long()[req, logical.clamp(0, bt_width - 1)]
    valid &= (phys >= 0) & (phys < num_blocks)
    offset = pos - logical * block_size
    entries = cache_pages(cache, block_size)[phys.clamp(0, num_blocks - 1), offset.clamp(0, block_size - 1)]
    out = dequantize_entries(entries)
    return torch.where(valid.unsqueeze(1), out, torch.full_like(out, float("nan")))


def convert_torch(req_id, indices, block_table, block_size, bt_width):
    """(out [rows, K] int32, valid_count [rows] int32): request-local positions -> global slots."""
    num_reqs = block_table.shape[0]
    tok = indices.long()
    req = req_id.long()
    logical = torch.div(tok, block_size, rounding_mode="floor")
    valid = (tok >= 0) & (logical < bt_width) & ((req >= 0) & (req < num_reqs)).unsqueeze(1)
    phys = block_table.long()[req.clamp(0, num_reqs - 1).unsqueeze(1), logical.clamp(0, bt_width - 1)]
    valid &= phys >= 0
    slot = phys * block_size + (tok - logical * block_size)
    out = torch.where(valid, slot, torch.full_like(slot, -1)).to(torch.int32)
    return out, valid.sum(dim=1, dtype=torch.int32)


def write_json(path, document):
    """Writes `document` to `path` through a temporary file and a rename (never half a file); NaN
    and infinities are refused (JSON has none)."""
    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    tmp.replace(out)
