#!/usr/bin/env python3
"""Peer check and peer timing of mla-bench's cache-path operations, in plain PyTorch.

(a) Check: reads an `mla-bench --dump DIR` (manifest.json + raw little-endian files), recomputes
    pack, gather and convert the way a user would without our kernels (tensor indexing,
    `.to(torch.float8_e4m3fn)` after clamping to +-448, fp32 division for the scales, dtype views
    of the 656-byte entry) and compares with our outputs bit for bit (any NaN equals any NaN; NaN
    positions must match). Mismatches are printed.
(b) Timing: the same three operations on the shapes of an mla-bench sweep file (CUDA events;
    before every iteration, as in mla-bench, the lead (torch.cuda._sleep of --lead-cycles, default
    mla-bench's) and the L2 flushed by reading a buffer of twice the L2 size; median of
    --iters >= 20), with mla-bench's byte models; printed, and written as JSON with --out. On the
    GPU each shape also counts its late calls (late_queue_calls; a note is printed when there are
    any): the GPU had reached the start event before Python finished queueing the call, so
    launch time may lie in the timed region; a longer --lead-cycles avoids them. (c) counts them
    too.
(c) --attention: timing of the two attention routes on the "attention" shapes of a sweep (default
    sweep: attention), by mla-bench's protocol (Google Benchmark's: a call count searched for in
    the first repetition until a batch of calls takes the sweep's min_time_s, the sweep's
    repetitions of that many calls, the median of the repetitions' mean call times; --repetitions
    / --min-time override the sweep's values, --iters N times the median of N calls instead), with
    mla-bench's FLOP and byte models, against this script's own bf16 GEMM rate and copy
    bandwidth:
      dense_mha   torch.nn.functional.scaled_dot_product_attention in bf16 on q = [q_nope, q_pe]
                  [nq, H, 192], k = [k_nope, k_pe] [nk, H, 192], v [nk, H, 128] per request, one
                  batched call when the requests are equally long, else one call per request; the
                  mask as the shape's name says: causal self-attention is_causal=True, bottom-right
                  causal with more keys than queries (/keys:K) attn_mask =
                  torch.nn.attention.bias.causal_lower_right(nq, nk) (PyTorch >= 2.3; else an
                  explicit boolean lower-right mask, built untimed), /mask:none no mask. Each
                  result says which it used ("mask");
      sparse_mqa  index_select of the selected 576-wide bf16 rows from a bf16 cache built from
                  fp8_ds_mla entries (dequantized once, untimed), then bmm(q_lat, K^T), scale and
                  mask in fp32, logsumexp + exp (softmax), bmm(P in bf16, V = K[..., :512]).
    forward shapes have no peer. With --ours BENCH.json (mla-bench --benchmark_out, JSON) every
    shape also gets our median time and ours / peer (below 1: ours is faster), and the lead is
    the one that run names (its context's mla_lead_cycles) unless --lead-cycles is given.

Runs on the GPU machine's python3 (PyTorch with CUDA); not part of CI.
Exit status: 0 all bits match, 1 a mismatch, 2 bad usage or unreadable dump.

Examples:
  build/bin/mla-bench --backend cuda --dump /tmp/dump
  python3 scripts/peer_torch.py --dump /tmp/dump --out /tmp/peer.json
  python3 scripts/peer_torch.py --dump /tmp/dump --no-timing --device cpu
  build/bin/mla-bench --sweep attention --benchmark_out=/tmp/attn.json --benchmark_out_format=json
  python3 scripts/peer_torch.py --attention --ours /tmp/attn.json --out /tmp/peer_attn.json
  python3 scripts/peer_torch.py --attention --sweep quick --timing-device cpu   # smoke test, no GPU
"""
import argparse
import itertools
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import torch

# The fp8_ds_mla entry (SPEC.md section 1); the manifest's "layout" block must agree.
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

# mla-bench's byte models (docs/benchmarks.md).
PACK_BYTES_PER_TOKEN = 1024 + 128 + 8 + 656
GATHER_BYTES_PER_ROW = 656 + 1152
CONVERT_BYTES_PER_ELEMENT = 4 + 4
CONVERT_BYTES_PER_ROW = 4 + 4

# mla-bench's attention models (docs/benchmarks.md, apps/mla_bench/bench_attention_ops.h).
SPARSE_FLOPS_PER_SLOT = 2 * (576 + 512)      # x heads, every one of the K slots of a token
DENSE_FLOPS_PER_PAIR = 2 * (192 + 128)       # x heads, per attended (query, key) pair
SPARSE_Q_BYTES_PER_HEAD = 576 * 2
SPARSE_OUT_BYTES_PER_HEAD = 512 * 2 + 4
DENSE_Q_BYTES_PER_HEAD = 192 * 2 + 128 * 2 + 4
DENSE_KV_BYTES_PER_HEAD = 256 * 2
DENSE_KPE_BYTES = 64 * 2
QK_HEAD_DIM, V_HEAD_DIM, NOPE_HEAD_DIM = 192, 128, 128
SOFTMAX_SCALE = 1.0 / math.sqrt(192.0)
GEMM_SIZE = {"cuda": 8192, "cpu": 384}      # the GEMM ceiling's m = n = k, as mla-bench

DTYPES = {
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "uint8": torch.uint8,
}

REPO_ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------
# The operations, as a PyTorch user would write them.
# ----------------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------------
# (a) The bit-exact check of a dump.
# ----------------------------------------------------------------------------------------------

class DumpError(Exception):
    pass


def load_tensor(dump_dir, desc, device):
    path = Path(dump_dir) / desc["file"]
    if desc["dtype"] not in DTYPES:
        raise DumpError(f"{path}: unknown dtype {desc['dtype']}")
    try:
        raw = bytearray(path.read_bytes())
    except OSError as e:
        raise DumpError(f"cannot read {path}: {e}") from e
    flat = torch.frombuffer(raw, dtype=DTYPES[desc["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[desc["dtype"]])
    shape, strides = desc["shape"], desc["strides"]
    needed = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(shape) else 0
    if flat.numel() < needed:
        raise DumpError(f"{path}: {flat.numel()} elements, the shape needs {needed}")
    return torch.as_strided(flat, shape, strides).clone().to(device)


def nan_mask(bits, kind):
    if kind == "bf16":
        return (bits.int() & 0x7FFF) > 0x7F80
    if kind == "f32":
        return (bits.long() & 0x7FFFFFFF) > 0x7F800000
    if kind == "e4m3":
        return (bits.int() & 0x7F) == 0x7F
    return torch.zeros_like(bits, dtype=torch.bool)


def mismatches(ours, peer, kind):
    """Boolean mask of positions whose bits differ, counting NaN == NaN (any payload)."""
    same = ours == peer
    if kind != "int":
        same |= nan_mask(ours, kind) & nan_mask(peer, kind)
    return ~same


def report(name, ours, peer, kind, limit, describe):
    """Prints up to `limit` mismatching positions; returns the count."""
    bad = mismatches(ours, peer, kind)
    count = int(bad.sum())
    total = bad.numel()
    status = "ok" if count == 0 else "MISMATCH"
    print(f"  {name:<28} {total:>10} compared  {count:>8} differ  {status}")
    if count:
        mask = {"bf16": 0xFFFF, "f32": 0xFFFFFFFF, "e4m3": 0xFF}.get(kind)
        for idx in bad.nonzero()[:limit].tolist():
            o, p = ours[tuple(idx)].item(), peer[tuple(idx)].item()
            shown = (f"ours {o & mask:#x}  peer {p & mask:#x}" if mask else f"ours {o}  peer {p}")
            print(f"      at {describe(idx)}: {shown}")
    return count


def check_pack(dump_dir, op, device, limit):
    prm = op["params"]
    kv = load_tensor(dump_dir, op["inputs"]["kv"], device)
    slots = load_tensor(dump_dir, op["inputs"]["slot_mapping"], device)
    cache = load_tensor(dump_dir, op["inputs"]["cache"], device)
    ours = load_tensor(dump_dir, op["outputs"]["cache"], device)
    c, r = prm["kv_c"], prm["k_pe"]
    kv_c = kv[:, c["col_offset"]:c["col_offset"] + c["cols"]]
    k_pe = kv[:, r["col_offset"]:r["col_offset"] + r["cols"]]
    block_size = prm["block_size"]
    pack_torch(kv_c, k_pe, slots, cache, block_size)

    nb = cache.shape[0]
    ours_e = cache_pages(ours, block_size).reshape(nb * block_size, ENTRY_BYTES)
    peer_e = cache_pages(cache, block_size).reshape(nb * block_size, ENTRY_BYTES)

    def where(idx):
        s = idx[0]
        return f"slot {s} (block {s // block_size}, offset {s % block_size}), element {idx[1]}"

    n = report("pack fp8 bytes", ours_e[:, :NOPE_DIMS], peer_e[:, :NOPE_DIMS], "e4m3", limit, where)
    n += report("pack scales (f32 bits)", ours_e[:, SCALE_OFFSET:ROPE_OFFSET].contiguous().view(torch.int32),
                peer_e[:, SCALE_OFFSET:ROPE_OFFSET].contiguous().view(torch.int32), "f32", limit, where)
    n += report("pack rope (bf16 bits)", ours_e[:, ROPE_OFFSET:].contiguous().view(torch.int16),
                peer_e[:, ROPE_OFFSET:].contiguous().view(torch.int16), "bf16", limit, where)
    pad = block_size * ENTRY_BYTES
    if ours.shape[1] > pad:
        n += report("pack page padding bytes", ours[:, pad:], cache[:, pad:], "int", limit,
                    lambda idx: f"block {idx[0]}, padding byte {idx[1]}")
    return n


def check_gather(dump_dir, op, device, limit):
    prm = op["params"]
    cache = load_tensor(dump_dir, op["inputs"]["cache"], device)
    bt = load_tensor(dump_dir, op["inputs"]["block_table"], device)
    ws = load_tensor(dump_dir, op["inputs"]["workspace_starts"], device)
    ss = load_tensor(dump_dir, op["inputs"]["seq_starts"], device) if "seq_starts" in op["inputs"] else None
    ours = load_tensor(dump_dir, op["outputs"]["dst"], device)[:, :LATENT_DIMS]
    peer = gather_torch(cache, bt, ws, ss, prm["num_rows"], prm["block_size"], prm["block_table_width"])
    return report("gather dst (bf16 bits)", ours.contiguous().view(torch.int16), peer.view(torch.int16), "bf16",
                  limit, lambda idx: f"row {idx[0]}, column {idx[1]}")


def check_convert(dump_dir, op, device, limit):
    prm = op["params"]
    req_id = load_tensor(dump_dir, op["inputs"]["req_id"], device)
    indices = load_tensor(dump_dir, op["inputs"]["indices"], device)
    bt = load_tensor(dump_dir, op["inputs"]["block_table"], device)
    ours_out = load_tensor(dump_dir, op["outputs"]["out"], device)
    ours_vc = load_tensor(dump_dir, op["outputs"]["valid_count"], device)
    out, vc = convert_torch(req_id, indices[:, :prm["topk"]], bt, prm["block_size"], prm["block_table_width"])
    n = report("convert out", ours_out[:, :prm["topk"]], out, "int", limit,
               lambda idx: f"row {idx[0]}, column {idx[1]} (index {indices[idx[0], idx[1]].item()})")
    n += report("convert valid_count", ours_vc, vc, "int", limit, lambda idx: f"row {idx[0]}")
    return n


CHECKS = {"pack": check_pack, "gather": check_gather, "convert": check_convert}


def check_dump(dump_dir, device, limit):
    """Returns the number of mismatching elements over all operations of the dump."""
    manifest_path = Path(dump_dir) / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as e:
        raise DumpError(f"cannot read {manifest_path}: {e}") from e
    layout = manifest.get("layout", {})
    expected = {"entry_bytes": ENTRY_BYTES, "scale_offset": SCALE_OFFSET, "rope_offset": ROPE_OFFSET,
                "tile_dims": TILE_DIMS, "byte_order": "little"}
    for key, value in expected.items():
        if layout.get(key) != value:
            raise DumpError(f"{manifest_path}: layout.{key} is {layout.get(key)!r}, this script expects {value!r}")
    producer = manifest.get("producer", {})
    print(f"peer check on {device}: dump of {producer.get('backend')} ({producer.get('device')}), "
          f"mla-bench {producer.get('version')} git {producer.get('git_revision')}")
    total = 0
    for name, op in manifest["ops"].items():
        if name not in CHECKS:
            print(f"  {name}: no peer implementation, skipped")
            continue
        total += CHECKS[name](dump_dir, op, device, limit)
    return total


# ----------------------------------------------------------------------------------------------
# (b) Timing on the shapes of a sweep.
# ----------------------------------------------------------------------------------------------

def load_sweep(arg):
    path = Path(arg)
    if not path.exists():
        path = REPO_ROOT / "scenarios" / "sweeps" / f"{arg}.json"
    return json.loads(path.read_text()), path


def split_lengths(total, parts, gen):
    """`total` split into `parts` positive lengths around total / parts (same rule as mla-bench)."""
    parts = max(1, min(parts, total))
    weights = torch.randint(50, 151, (parts,), generator=gen)
    bounds = (total * weights.cumsum(0)) // int(weights.sum())
    lengths = torch.diff(bounds, prepend=torch.zeros(1, dtype=bounds.dtype))
    if bool((lengths <= 0).any()):
        lengths = torch.full((parts,), total // parts) + (torch.arange(parts) < total % parts).long()
    return lengths.tolist()


def make_layout(seq_lens, block_size, gen, spare_blocks=4):
    """Block table [R, width] int32 over a shuffled pool of pages (unused entries -1)."""
    pages = [(s + block_size - 1) // block_size for s in seq_lens]
    num_blocks = sum(pages) + spare_blocks
    width = max(pages) + 1
    pool = torch.randperm(num_blocks, generator=gen).int()
    bt = torch.full((len(seq_lens), width), -1, dtype=torch.int32)
    start = 0
    for r, n in enumerate(pages):
        bt[r, :n] = pool[start:start + n]
        start += n
    return bt, num_blocks


def slots_of(bt, req, pos, block_size):
    return bt[req, pos // block_size].long() * block_size + pos % block_size


def latent(n, device, gen):
    kv = torch.randn(n, KV_COLS, generator=gen, device="cpu")
    kv[:, :NOPE_DIMS] *= 0.1
    kv[:, NOPE_DIMS:] *= 0.5
    return kv.to(torch.bfloat16).to(device)


def setup_pack(n, block_size, device, gen):
    reqs = min(max(n // 1024, 1), 1024)
    new = split_lengths(n, reqs, gen)
    ctx = torch.randint(0, 4 * block_size, (len(new),), generator=gen).tolist()
    bt, num_blocks = make_layout([c + q for c, q in zip(ctx, new)], block_size, gen)
    req = torch.repeat_interleave(torch.arange(len(new)), torch.tensor(new))
    first = torch.tensor(ctx) - torch.cumsum(torch.tensor([0] + new[:-1]), 0)
    pos = torch.arange(n) + first[req]
    slots = slots_of(bt, req, pos, block_size).to(device)
    kv = latent(n, device, gen)
    cache = torch.empty(num_blocks, block_size * ENTRY_BYTES, dtype=torch.uint8, device=device)
    kv_c, k_pe = kv[:, :NOPE_DIMS], kv[:, NOPE_DIMS:]
    return lambda: pack_torch(kv_c, k_pe, slots, cache, block_size)


def setup_gather(rows, block_size, with_seq_starts, device, gen):
    reqs = min(max(rows // 2048, 1), 512)
    lengths = split_lengths(rows, reqs, gen)
    starts = []
    for _ in lengths:
        s = 0
        if with_seq_starts:
            s = int(torch.randint(1, 8 * block_size, (1,), generator=gen))
            if block_size > 1 and s % block_size == 0:
                s += 1
        starts.append(s)
    seq_lens = [s + n for s, n in zip(starts, lengths)]
    bt, num_blocks = make_layout(seq_lens, block_size, gen)
    cache = torch.full((num_blocks, block_size * ENTRY_BYTES), 0xFF, dtype=torch.uint8, device=device)
    # Fill every stored position with packed latent rows (pack in chunks to bound temporaries).
    req = torch.repeat_interleave(torch.arange(len(seq_lens)), torch.tensor(seq_lens))
    pos = torch.arange(len(req)) - torch.repeat_interleave(torch.cumsum(torch.tensor([0] + seq_lens[:-1]), 0),
                                                          torch.tensor(seq_lens))
    slots = slots_of(bt, req, pos, block_size).to(device)
    chunk = 1 << 18
    for i in range(0, slots.numel(), chunk):
        kv = latent(min(chunk, slots.numel() - i), device, gen)
        pack_torch(kv[:, :NOPE_DIMS], kv[:, NOPE_DIMS:], slots[i:i + chunk], cache, block_size)
    ws = torch.tensor([0] + list(torch.cumsum(torch.tensor(lengths), 0)[:-1].tolist()), dtype=torch.int32,
                      device=device)
    ss = torch.tensor(starts, dtype=torch.int32, device=device) if with_seq_starts else None
    bt_dev = bt.to(device)
    width = bt.shape[1]
    return lambda: gather_torch(cache, bt_dev, ws, ss, rows, block_size, width)


def setup_convert(rows, topk, block_size, device, gen):
    reqs = min(max(rows, 1), 1024)
    per_req = split_lengths(rows, reqs, gen)
    min_seq = max(topk, 1024)
    seq_lens = torch.randint(min_seq, 8 * min_seq + 1, (len(per_req),), generator=gen)
    bt, _ = make_layout(seq_lens.tolist(), block_size, gen)
    req_id = torch.repeat_interleave(torch.arange(len(per_req)), torch.tensor(per_req))
    # Valid positions of the row's request (timing only: duplicates within a row are allowed).
    indices = (torch.rand(rows, topk, generator=gen) * seq_lens[req_id].unsqueeze(1)).long().int()
    req_id, indices, bt = req_id.int().to(device), indices.to(device), bt.to(device)
    width = bt.shape[1]
    return lambda: convert_torch(req_id, indices, bt, block_size, width)


def sweep_shapes(sweep):
    """(name, op, items, bytes, setup) in mla-bench's order and naming."""
    shapes = []
    p = sweep.get("pack")
    if p:
        for b in p.get("block_sizes", [p.get("block_size", 64)]):
            for n in p["tokens"]:
                shapes.append((f"pack/B:{b}/tokens:{n}", "pack", n, n * PACK_BYTES_PER_TOKEN,
                               lambda dev, g, n=n, b=b: setup_pack(n, b, dev, g)))
    g_ = sweep.get("gather")
    if g_:
        for b in g_["block_sizes"]:
            for ss in g_["seq_starts"]:
                for n in g_["rows"]:
                    shapes.append((f"gather/B:{b}/seq_starts:{'on' if ss else 'off'}/rows:{n}", "gather", n,
                                   n * GATHER_BYTES_PER_ROW,
                                   lambda dev, g, n=n, b=b, ss=ss: setup_gather(n, b, ss, dev, g)))
    c = sweep.get("convert")
    if c:
        b = c["block_size"]
        for k in c["topk"]:
            for n in c["rows"]:
                shapes.append((f"convert/B:{b}/K:{k}/rows:{n}", "convert", n * k,
                               n * k * CONVERT_BYTES_PER_ELEMENT + n * CONVERT_BYTES_PER_ROW,
                               lambda dev, g, n=n, k=k, b=b: setup_convert(n, k, b, dev, g)))
    return shapes


def flush_buffer(l2, device):
    """The L2 flush buffer, mla-bench's size (2 x L2, at least 64 MiB; a whole number of int64),
    filled once."""
    n = (max(2 * l2, 64 << 20) + 7) // 8 * 8
    return torch.full((n,), 0x5A, dtype=torch.uint8, device=device)


FLUSH = "a read of the buffer: its sum as int64 (read_flush)"

# mla-bench's default lead (apps/mla_bench/l2_flush.h, L2Flusher::kDefaultLeadCycles): SM clock
# cycles one thread spins before each flush. With --ours the count comes from its JSON instead.
LEAD_CYCLES = 200000
MAX_LEAD_CYCLES = 1 << 32


def read_flush(flush):
    """Reads the whole flush buffer, as mla-bench's flush does (that one writes nothing; this one
    its 8-byte result): a sum of the buffer viewed as int64, the accumulator's own type. A
    reduction whose accumulator type is not the input's (the uint8 buffer summed with
    dtype=int64, as this script did until 2026-11-30) makes PyTorch convert the input first: an
    8x larger temporary written and read before each timed call (about 2 GB of HBM traffic for a
    126 MB buffer, ~0.5 ms on an H200), whose dirty lines can reach the timed call and which, on
    a GPU held at its power cap, changes what the call runs after (docs/performance.md,
    twentieth session)."""
    return flush.view(torch.int64).sum()


class ColdStart:
    """What runs untimed before each timed call on the GPU, as in mla-bench (apps/mla_bench/
    l2_flush.h): the lead, one thread spinning for lead_cycles SM clock cycles
    (torch.cuda._sleep, a one-thread clock64 spin like mla-bench's), then the flush (read_flush).
    The lead keeps the GPU busy while Python queues the flush, the start event and the call: without
    it, the time Python takes to launch the call after the 37 us flush lands inside the timed
    region (48-92 us, medians, from the flush's launch to SDPA's return on an H200,
    docs/performance.md, twenty-first session); with it, so long as Python queues them within the
    lead and the flush (about 140 us at the default count). Launches of a many-kernel peer queued
    within that window also run without gaps between them. The same count as mla-bench's run
    leaves the GPU about the same idle time before each call in both tools, which matters at the
    power cap. It also counts the timed calls whose region began before Python had queued them
    (note_queued, take_counts; time_cuda reports them)."""

    def __init__(self, buffer, lead_cycles):
        if lead_cycles and not hasattr(torch.cuda, "_sleep"):
            raise DumpError(f"this PyTorch ({torch.__version__}) has no torch.cuda._sleep for the lead; "
                            "--lead-cycles 0 times without one")
        self.buffer, self.lead_cycles = buffer, lead_cycles
        self.calls = self.late = 0

    def __call__(self):
        if self.lead_cycles:
            torch.cuda._sleep(self.lead_cycles)
        read_flush(self.buffer)

    def note_queued(self, started):
        """After a timed call and its stop event are queued: started is whether the GPU had
        already reached the start event (start.query()). If it had, the timed region began before
        Python finished queueing the call, so part of its launching may lie inside it: the lead
        and the flush may have been too short for this caller. (If it had not, the whole call was
        queued before its region began: no launch gap is possible.)"""
        self.calls += 1
        self.late += bool(started)

    def take_counts(self):
        """(timed calls, late ones) since the last take; the counts start again from 0."""
        counts = (self.calls, self.late)
        self.calls = self.late = 0
        return counts


def counting_late_calls(flush, timing):
    """timing() (a shape's guarded_timing) with flush's late-queue counts started afresh, so that
    a shape that failed part-way leaves nothing to the next: (its result, (timed calls, late
    ones)), or (its result, None) where flush is None (the CPU, or no flush)."""
    if flush is None:
        return timing(), None
    flush.take_counts()
    result = timing()
    return result, flush.take_counts()


def late_queue_note(counts):
    """The note printed under a shape whose timed region began, in some of its calls, before the
    call was queued (counts: counting_late_calls's); None when it never did."""
    if not counts or not counts[1]:
        return None
    calls, late = counts
    return (f"in {late} of {calls} timed calls the GPU reached the start event before Python had queued "
            f"the call: launch time may be inside the timed region (a longer --lead-cycles avoids it)")


def lead_description(lead_cycles):
    return (f"torch.cuda._sleep({lead_cycles}) before each flush" if lead_cycles else "none")


def guarded_timing(name, op, width, results, measure, also=()):
    """measure() -> per-call seconds. On out of device memory (or an exception of type `also`)
    prints why, records {"name", "op", "error"} in results, frees PyTorch's cached memory and
    returns None; the inputs measure() built are gone by then."""
    try:
        return measure()
    except torch.cuda.OutOfMemoryError as e:
        print(f"  {name:<{width}} does not fit: {str(e).splitlines()[0]}")
        results.append({"name": name, "op": op, "error": "out of memory"})
    except also as e:
        print(f"  {name:<{width}} failed: {str(e).splitlines()[0]}")
        results.append({"name": name, "op": op, "error": str(e).splitlines()[0]})
    torch.cuda.empty_cache()
    return None


def time_cuda(fn, flush, iters, warmup):
    """Per-iteration seconds: flush() (untimed: a ColdStart, the lead then the read; none where
    flush is None), event, fn, event, then whether the GPU already reached the start event
    (flush.note_queued), synchronize. The flush reads its buffer (read_flush), as mla-bench does:
    a written flush would leave dirty lines whose write-back lands in the timed region
    (docs/benchmarks.md)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        if flush is not None:
            flush()
        start.record()
        fn()
        stop.record()
        if flush is not None:
            flush.note_queued(start.query())
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return times


def copy_bandwidth(device, iters=9):
    """Device-to-device copy of a 2 GiB buffer: (read + written) / median time."""
    n = 2 << 30
    src = torch.full((n,), 0x5A, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    times = time_cuda(lambda: dst.copy_(src), None, iters, 2)
    del src, dst
    return 2.0 * n / statistics.median(times)


def run_timing(sweep_arg, iters, warmup, name_filter, seed, lead_cycles=LEAD_CYCLES):
    if not torch.cuda.is_available():
        print("peer timing: no CUDA device; skipped")
        return None
    device = torch.device("cuda")
    sweep, sweep_path = load_sweep(sweep_arg)
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
    flush = ColdStart(flush_buffer(l2, device), lead_cycles)
    copy_bw = copy_bandwidth(device)
    print(f"peer timing on {props.name}: sweep {sweep_path}, L2 {l2} bytes (flush reads {flush.buffer.numel()}), "
          f"lead {lead_cycles} cycles, copy {copy_bw / 1e9:.1f} GB/s, median of {iters}")
    print(f"  {'benchmark':<40} {'median us':>11} {'GB/s':>9} {'% copy':>7} {'items/s':>10}")
    results = []
    gen = torch.Generator().manual_seed(seed)
    for name, op, items, nbytes, setup in sweep_shapes(sweep):
        if name_filter and not re.search(name_filter, name):
            continue
        times, counts = counting_late_calls(
            flush, lambda: guarded_timing(name, op, 40, results, lambda: time_cuda(setup(device, gen), flush, iters, warmup)))
        if times is None:
            continue
        med = statistics.median(times)
        entry = {
            "name": name, "op": op, "iterations": iters, "median_s": med, "min_s": min(times),
            "max_s": max(times), "bytes": nbytes, "items": items,
            "bytes_per_second": nbytes / med, "items_per_second": items / med,
            "pct_of_copy_bw": 100.0 * nbytes / med / copy_bw, "late_queue_calls": counts[1],
        }
        results.append(entry)
        print(f"  {name:<40} {med * 1e6:>11.2f} {entry['bytes_per_second'] / 1e9:>9.1f} "
              f"{entry['pct_of_copy_bw']:>7.1f} {entry['items_per_second']:>10.3g}")
        note = late_queue_note(counts)
        if note:
            print(f"    note: {note}")
        torch.cuda.empty_cache()
    return {
        "device": props.name, "torch": torch.__version__, "cuda": torch.version.cuda, "sweep": str(sweep_path),
        "l2_bytes": l2, "flush_bytes": flush.buffer.numel(), "flush": FLUSH, "lead_cycles": lead_cycles,
        "lead": lead_description(lead_cycles), "copy_bytes_per_second": copy_bw,
        "timing": "CUDA events per iteration, L2 flushed (untimed) before each, median", "results": results,
    }


# ----------------------------------------------------------------------------------------------
# (c) Attention timing: the PyTorch peers of the two routes on the sweep's attention shapes.
# ----------------------------------------------------------------------------------------------

def causal_pairs(nq, nk):
    """Bottom-right causal pairs: query i sees keys j <= i + nk - nq (mla-bench's count)."""
    return sum(min(nk, max(0, i + nk - nq + 1)) for i in range(nq))


def equal_split(total, parts):
    """`total` in `parts` lengths differing by at most one, the longer first (mla-bench's split)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


MAX_DENSE_KEYS = 1 << 24  # mla-bench's limit on a dense shape's keys (sweep.cpp, kMaxTokens)


def dense_mha_name(h, r, n, keys_per_request, causal):
    """mla-bench's name (dense_mha_name): /keys:K whenever keys_per_request is given, /mask:none when
    unmasked; causal self-attention keeps the plain name."""
    name = f"dense_mha/H:{h}/reqs:{r}/tokens:{n}"
    if keys_per_request is not None:
        name += f"/keys:{keys_per_request}"
    if not causal:
        name += "/mask:none"
    return name


def dense_group_shapes(g, path):
    """(name, params) of one dense_mha group: the cartesian product heads x tokens x requests x
    keys_per_request x causal, in mla-bench's order, with its refusal of a causal request with fewer
    keys than queries (ValueError naming the JSON path)."""
    if not isinstance(g, dict):
        raise ValueError(f"{path}: expected an object")
    for key in ("heads", "tokens", "requests"):
        if key not in g:
            raise ValueError(f"{path}/{key}: missing")
    keys = g.get("keys_per_request", [None])
    causal = g.get("causal", [True])
    for key, values in (("heads", g["heads"]), ("tokens", g["tokens"]), ("requests", g["requests"]),
                        ("keys_per_request", keys), ("causal", causal)):
        if not isinstance(values, list) or not values:
            raise ValueError(f"{path}/{key}: expected a non-empty list")
    if any(not isinstance(c, bool) for c in causal):
        raise ValueError(f"{path}/causal: expected true or false")
    for key in ("heads", "tokens", "requests") + (("keys_per_request",) if "keys_per_request" in g else ()):
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in g[key]):
            raise ValueError(f"{path}/{key}: expected integers >= 1")
    for h, n, r, (ki, k), c in itertools.product(g["heads"], g["tokens"], g["requests"], enumerate(keys), causal):
        if r > n:
            raise ValueError(f"{path}/requests: {r} requests cannot share {n} tokens")
        longest = -(-n // r)
        if c and k is not None and k < longest:
            raise ValueError(f"{path}/keys_per_request/{ki}: keys_per_request {k} is less than the {longest} "
                             f"queries of a request ({n} tokens in {r} requests): bottom-right causal attention "
                             f"needs keys >= queries")
        if k is not None and k * r > MAX_DENSE_KEYS:
            raise ValueError(f"{path}/keys_per_request/{ki}: {r} requests x keys_per_request {k} = {k * r} keys, "
                             f"more than {MAX_DENSE_KEYS}")
        yield dense_mha_name(h, r, n, k, c), {"heads": h, "tokens": n, "requests": r, "keys_per_request": k,
                                              "causal": c}


def dense_lengths(prm):
    """(query lengths, key lengths) of the requests of a dense_mha shape."""
    q_lens = equal_split(prm["tokens"], prm["requests"])
    k = prm.get("keys_per_request")
    return q_lens, [k if k is not None else l for l in q_lens]


def attention_shapes(sweep):
    """(name, op, params) of the sweep's sparse_mqa and dense_mha shapes, named as mla-bench names
    them (each group's cartesian product, duplicates dropped, file order)."""
    att = sweep.get("attention") or {}
    shapes, seen = [], set()
    sp = att.get("sparse_mqa")
    if sp:
        block = sp.get("block_size", 64)
        for g in sp["shapes"]:
            for b, q, h, k, l in itertools.product(g["batch"], g["query_tokens"], g["heads"], g["topk"],
                                                   g["seq_len"]):
                name = f"sparse_mqa/batch:{b}/q:{q}/H:{h}/K:{k}/seq:{l}"
                if name not in seen:
                    seen.add(name)
                    shapes.append((name, "sparse_mqa",
                                   {"batch": b, "query_tokens": q, "heads": h, "topk": k, "seq_len": l,
                                    "block_size": block}))
    dn = att.get("dense_mha")
    if dn:
        for i, g in enumerate(dn["shapes"]):
            for name, prm in dense_group_shapes(g, f"/attention/dense_mha/shapes/{i}"):
                if name not in seen:
                    seen.add(name)
                    shapes.append((name, "dense_mha", prm))
    fw = att.get("forward")
    if fw:
        for b in fw["batches"]:
            for h, k in itertools.product(b["heads"], b["topk"]):
                shapes.append((f"forward/{b['name']}/H:{h}/K:{k}", "forward", {}))
    return shapes


def sparse_model(prm, unique_entries):
    t = prm["batch"] * prm["query_tokens"]
    flops = t * prm["heads"] * prm["topk"] * SPARSE_FLOPS_PER_SLOT
    nbytes = unique_entries * ENTRY_BYTES + t * prm["heads"] * (SPARSE_Q_BYTES_PER_HEAD + SPARSE_OUT_BYTES_PER_HEAD)
    return flops, nbytes


def dense_pairs(prm):
    """Attended (query, key) pairs: bottom-right causal (causal_pairs) or every pair (unmasked)."""
    q_lens, k_lens = dense_lengths(prm)
    causal = prm.get("causal", True)
    return sum(causal_pairs(nq, nk) if causal else nq * nk for nq, nk in zip(q_lens, k_lens))


def dense_model(prm):
    h, n = prm["heads"], prm["tokens"]
    total_k = sum(dense_lengths(prm)[1])
    flops = dense_pairs(prm) * h * DENSE_FLOPS_PER_PAIR
    nbytes = n * h * DENSE_Q_BYTES_PER_HEAD + total_k * (h * DENSE_KV_BYTES_PER_HEAD + DENSE_KPE_BYTES)
    return flops, nbytes


def model_flops(op, prm):
    if op == "sparse_mqa":
        return prm["batch"] * prm["query_tokens"] * prm["heads"] * prm["topk"] * SPARSE_FLOPS_PER_SLOT
    return dense_model(prm)[0]


def sparse_attention_torch(q_lat, cache_bf16, slots, scale):
    """The sparse route as a PyTorch user writes it. q_lat [T, H, 576] bf16, cache_bf16 [S, 576]
    bf16 (dequantized entries), slots [T, K] int64 global slots (-1 invalid).
    Returns out_lat [T, H, 512] bf16 and lse [T, H] fp32 (no valid slot: out 0, lse -inf)."""
    t, k = slots.shape
    valid = slots >= 0
    rows = cache_bf16.index_select(0, slots.clamp(min=0).reshape(-1)).view(t, k, LATENT_DIMS)
    scores = torch.bmm(q_lat, rows.transpose(1, 2)).float() * scale                  # [T, H, K]
    scores = scores.masked_fill(~valid.unsqueeze(1), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)                                              # [T, H]
    p = torch.exp(scores - lse.unsqueeze(-1)).nan_to_num_(0.0)                         # rows with no valid slot: 0
    out = torch.bmm(p.to(torch.bfloat16), rows[:, :, :NOPE_DIMS])                      # [T, H, 512]
    return out, lse


def lower_right_mask(nq, nk, device):
    """The attn_mask of bottom-right causal attention (query i sees keys j <= i + nk - nq) and how it
    was made: torch.nn.attention.bias.causal_lower_right (PyTorch >= 2.3), else a boolean [nq, nk]."""
    try:
        from torch.nn.attention.bias import causal_lower_right
    except ImportError:
        causal_lower_right = None
    if causal_lower_right is not None:
        return causal_lower_right(nq, nk), "causal_lower_right"
    mask = torch.ones(nq, nk, dtype=torch.bool, device=device).tril(diagonal=nk - nq)
    return mask, "explicit lower-right bool mask"


def dense_mask_kind(nq, nk, causal):
    """How the peer masks a request: "none", "is_causal" (square causal: top-left and bottom-right
    agree) or "lower_right" (causal with nq != nk: PyTorch's is_causal would be top-left)."""
    if not causal:
        return "none"
    return "is_causal" if nq == nk else "lower_right"


def dense_masks(q_lens, k_lens, causal, device):
    """The masking of each request length pair {(nq, nk): (attn_mask or None, description)} and
    one line for all of them: is_causal=True, causal_lower_right / explicit lower-right bool mask,
    or none."""
    masks = {}
    for nq, nk in zip(q_lens, k_lens):
        if (nq, nk) not in masks:
            kind = dense_mask_kind(nq, nk, causal)
            masks[(nq, nk)] = (lower_right_mask(nq, nk, device) if kind == "lower_right"
                               else (None, "is_causal=True" if kind == "is_causal" else "none"))
    return masks, " + ".join(sorted({how for _, how in masks.values()}))


def dense_attention_torch(q, k, v, q_lens, k_lens, causal, masks=None):
    """The dense route: q [sum q_lens, H, 192], k [sum k_lens, H, 192], v [sum k_lens, H, 128] bf16,
    request r's queries attending to its own keys, bottom-right causal or unmasked; `masks` from
    dense_masks (built here when None). Returns the output [sum q_lens, H, 128] bf16."""
    f = torch.nn.functional.scaled_dot_product_attention
    if masks is None:
        masks = dense_masks(q_lens, k_lens, causal, q.device)[0]

    def attend(qq, kk, vv, nq, nk):   # [R, H, L, D] each
        mask, how = masks[(nq, nk)]
        if mask is not None:
            return f(qq, kk, vv, attn_mask=mask)
        return f(qq, kk, vv, is_causal=how == "is_causal=True")

    if len(set(q_lens)) == 1 and len(set(k_lens)) == 1:
        r, nq, nk = len(q_lens), q_lens[0], k_lens[0]
        shape = lambda x, l: x.view(r, l, x.shape[1], x.shape[2]).transpose(1, 2)   # [R, H, L, D]
        out = attend(shape(q, nq), shape(k, nk), shape(v, nk), nq, nk)
        return out.transpose(1, 2).reshape(q.shape[0], q.shape[1], -1)
    outs, qs, ks = [], 0, 0
    for nq, nk in zip(q_lens, k_lens):
        sl = lambda x, start, l: x[start:start + l].unsqueeze(0).transpose(1, 2)
        outs.append(attend(sl(q, qs, nq), sl(k, ks, nk), sl(v, ks, nk), nq, nk).transpose(1, 2)[0])
        qs += nq
        ks += nk
    return torch.cat(outs, dim=0)


def uniform_bf16(shape, amplitude, device, gen):
    return ((torch.rand(*shape, generator=gen) * 2.0 - 1.0) * amplitude).to(torch.bfloat16).to(device)


def setup_sparse(prm, device, gen):
    """Inputs of one sparse_mqa shape; returns (fn, distinct valid slots)."""
    b, qn, h, k, seq, block = (prm[x] for x in ("batch", "query_tokens", "heads", "topk", "seq_len", "block_size"))
    bt, num_blocks = make_layout([seq] * b, block, gen)
    num_slots = num_blocks * block
    # The bf16 cache a user would keep: entries packed to fp8_ds_mla and dequantized once (a pool of
    # distinct entries reused cyclically over the slots).
    pool_rows = min(16384, num_slots)
    kv = latent(pool_rows, device, gen)
    pool = dequantize_entries(quantize_entries(kv[:, :NOPE_DIMS], kv[:, NOPE_DIMS:]))
    cache_bf16 = pool[torch.arange(num_slots, device=device) % pool_rows]
    # Token i of request r's qn new tokens sits at seq - qn + i and picks k distinct visible positions.
    slots = torch.full((b * qn, k), -1, dtype=torch.long)
    for r in range(b):
        for i in range(qn):
            visible = seq - qn + i + 1
            pos = torch.randperm(visible, generator=gen)[:k]
            slots[r * qn + i, :pos.numel()] = slots_of(bt, torch.full_like(pos, r), pos, block)
    unique = int(torch.unique(slots[slots >= 0]).numel())
    slots = slots.to(device)
    q_lat = uniform_bf16((b * qn, h, LATENT_DIMS), 1.0, device, gen)
    return (lambda: sparse_attention_torch(q_lat, cache_bf16, slots, SOFTMAX_SCALE)), unique


def setup_dense(prm, device, gen):
    """Inputs of one dense_mha shape; returns (fn, the masking it uses)."""
    h, n = prm["heads"], prm["tokens"]
    q_lens, k_lens = dense_lengths(prm)
    nk = sum(k_lens)
    q = uniform_bf16((n, h, QK_HEAD_DIM), 1.0, device, gen)
    k_nope = uniform_bf16((nk, h, NOPE_HEAD_DIM), 0.4, device, gen)
    k_pe = uniform_bf16((nk, 1, QK_HEAD_DIM - NOPE_HEAD_DIM), 0.4, device, gen)
    k = torch.cat([k_nope, k_pe.expand(nk, h, -1)], dim=2)   # the user's concatenation, untimed
    v = uniform_bf16((nk, h, V_HEAD_DIM), 0.4, device, gen)
    masks, how = dense_masks(q_lens, k_lens, prm.get("causal", True), device)   # untimed
    return (lambda: dense_attention_torch(q, k, v, q_lens, k_lens, prm.get("causal", True), masks)), how


def time_fn(fn, flush, iters, warmup, device):
    """Per-call seconds: CUDA events with the L2 flushed before each call; on the CPU, perf_counter
    around each call (warm cache)."""
    if device.type == "cuda":
        return time_cuda(fn, flush, iters, warmup)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


MAX_CALLS_PER_REPETITION = 10 ** 6   # the iteration search's ceiling (only a call that takes no time reaches it)


def time_like_sweep(fn, flush, repetitions, min_time_s, warmup, device):
    """mla-bench's protocol for a shape, Google Benchmark's with manual time: the first repetition
    searches for a call count, running batches of 1, then 10x more while a batch's timed time is
    under a tenth of min_time_s, else 1.4 min_time_s / that time as many (at least one more),
    until a batch's timed time reaches min_time_s; that batch is the repetition, and every later
    repetition runs the same count. Each call's time is its own CUDA-event pair, after an untimed
    L2 flush. Returns (the repetitions' mean per-call seconds, the calls per repetition, all timed
    calls including the search); the reported figure is the median of the means, as mla-bench's.
    The number of calls, not just their duration, matters on a power-capped GPU: a few dozen run
    at a clock that a quarter second of them no longer gets (docs/benchmarks.md)."""
    def batch(n, warm):
        return sum(time_fn(fn, flush, n, warm, device))

    n, warm, searched = 1, warmup, 0
    while True:
        spent = batch(n, warm)
        warm = 0
        if spent >= min_time_s or n >= MAX_CALLS_PER_REPETITION:
            break
        searched += n
        grow = 1.4 * min_time_s / max(spent, 1e-9) if spent > 0.1 * min_time_s else 10.0
        n = min(max(int(grow * n + 0.5), n + 1), MAX_CALLS_PER_REPETITION)   # rounded half up
    means = [spent / n] + [batch(n, 0) / n for _ in range(repetitions - 1)]
    return means, n, searched + n * repetitions


def gemm_rate(device, iters=9):
    """bf16 C = A B, m = n = k = GEMM_SIZE: 2 n^3 / median time (after 2 warm-ups)."""
    n = GEMM_SIZE[device.type]
    gen = torch.Generator().manual_seed(1)
    a = uniform_bf16((n, n), 1.0, device, gen)   # never zeros
    b = uniform_bf16((n, n), 1.0, device, gen)
    times = time_fn(lambda: torch.mm(a, b), None, iters, 2, device)
    return 2.0 * n ** 3 / statistics.median(times), n


def copy_rate(device, iters=9):
    if device.type == "cuda":
        return copy_bandwidth(device, iters)
    n = 256 << 20
    src = torch.full((n,), 0x5A, dtype=torch.uint8)
    dst = torch.empty_like(src)
    times = time_fn(lambda: dst.copy_(src), None, iters, 2, device)
    return 2.0 * n / statistics.median(times)


def load_ours(path):
    """{benchmark name: seconds} from an mla-bench JSON output: the median aggregate when there is
    one, else the mean of the iteration rows. Names lose Google Benchmark's /manual_time suffix."""
    data = json.loads(Path(path).read_text())
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    medians, iterations = {}, {}
    for e in data.get("benchmarks", []):
        if e.get("error_occurred"):
            continue
        name = re.sub(r"/(manual|real)_time$", "", e.get("run_name", e["name"]))
        seconds = e["real_time"] * unit[e.get("time_unit", "ns")]
        if e.get("run_type") == "aggregate" or "aggregate_name" in e:
            if e.get("aggregate_name") == "median":
                medians[name] = seconds
        else:
            iterations.setdefault(name, []).append(seconds)
    ours = {n: sum(v) / len(v) for n, v in iterations.items()}
    ours.update(medians)
    return ours


def ours_lead_cycles(path):
    """The lead mla-bench ran with (its JSON context's mla_lead_cycles), or None where it names none
    (the host backend, or an mla-bench from before the lead)."""
    data = json.loads(Path(path).read_text())
    context = data.get("context", {}) if isinstance(data, dict) else None
    if not isinstance(context, dict):
        raise ValueError(f"{path}: context: not an object (an mla-bench --benchmark_out JSON file has one)")
    value = context.get("mla_lead_cycles")
    if value is None:
        return None
    # mla-bench writes the count as a string of digits (Google Benchmark's custom context).
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not re.fullmatch(r"-?\d+", str(value)):
        raise ValueError(f"{path}: context/mla_lead_cycles: {value!r} is not a whole number")
    cycles = int(value)
    if not 0 <= cycles <= MAX_LEAD_CYCLES:
        raise ValueError(f"{path}: context/mla_lead_cycles: {cycles} is outside [0, {MAX_LEAD_CYCLES}]")
    return cycles


def resolve_lead(given, ours_path):
    """(the lead to run, a note or None): --lead-cycles when given, else the one --ours names, else
    mla-bench's default. The note says where the two tools' protocols differ."""
    ours = ours_lead_cycles(ours_path) if ours_path else None
    lead = given if given is not None else (ours if ours is not None else LEAD_CYCLES)
    note = None
    if ours_path and ours is None:
        note = f"{ours_path} names no lead (an mla-bench from before it, or the host): ours may have run without one"
    elif ours is not None and ours != lead:
        note = f"--lead-cycles {lead} but {ours_path} ran with {ours}: the protocols differ"
    return lead, note


def sweep_protocol(sweep, sweep_path, repetitions=None, min_time_s=None):
    """The repetitions and the minimum timed seconds per repetition: the given ones, else the
    sweep's ("repetitions", "min_time_s"; mla-bench's defaults 5 and 0.05 where it has none),
    within mla-bench's limits (1..1000 repetitions, 0 < min_time_s <= 60)."""
    reps = repetitions if repetitions is not None else sweep.get("repetitions", 5)
    secs = min_time_s if min_time_s is not None else sweep.get("min_time_s", 0.05)
    where = "--repetitions" if repetitions is not None else f"{sweep_path}: repetitions"
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= 1000:
        raise ValueError(f"{where}: {reps!r} is not a whole number of repetitions in 1..1000")
    where = "--min-time" if min_time_s is not None else f"{sweep_path}: min_time_s"
    if isinstance(secs, bool) or not isinstance(secs, (int, float)) or not 0 < secs <= 60:
        raise ValueError(f"{where}: {secs!r} is not a time in seconds in (0, 60]")
    return reps, float(secs)


def run_attention_timing(sweep_arg, iters, warmup, name_filter, seed, ours_path, timing_device,
                         repetitions=None, min_time_s=None, lead=(LEAD_CYCLES, None)):
    """iters None: each shape timed by mla-bench's protocol (time_like_sweep) on the sweep's
    repetitions and min_time_s, or the ones given; else the median of `iters` calls. lead:
    resolve_lead's (cycles, note), used on the GPU."""
    if timing_device == "auto":
        timing_device = "cuda" if torch.cuda.is_available() else None
    if timing_device is None:
        print("peer attention timing: no CUDA device; skipped (--timing-device cpu times on the CPU)")
        return None
    if timing_device == "cuda" and not torch.cuda.is_available():
        raise DumpError("--timing-device cuda: no CUDA device")
    device = torch.device(timing_device)
    sweep, sweep_path = load_sweep(sweep_arg)
    try:
        shapes = attention_shapes(sweep)  # refused before anything is measured
    except ValueError as e:
        raise ValueError(f"{sweep_path}: {e}") from None
    if iters is None:
        repetitions, min_time_s = sweep_protocol(sweep, sweep_path, repetitions, min_time_s)
    ours = load_ours(ours_path) if ours_path else {}
    if device.type == "cuda":
        lead_cycles, lead_note = lead
        props = torch.cuda.get_device_properties(device)
        device_name = props.name
        l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
        flush = ColdStart(flush_buffer(l2, device), lead_cycles)
        max_flops = None
    else:
        device_name, l2, flush, lead_cycles, lead_note = "cpu", 0, None, 0, None
        max_flops = (sweep.get("host") or {}).get("max_attention_flops", 2 << 30)   # mla-bench's host cap
    gemm, gemm_n = gemm_rate(device)
    copy_bw = copy_rate(device)
    protocol = (f"median of {iters} calls (min_s / max_s: of the calls)" if iters is not None else
                f"mla-bench's: median of {repetitions} repetitions' mean call times, each repetition "
                f">= {min_time_s:g} s of timed calls (min_s / max_s: of those means)")
    print(f"peer attention timing on {device_name}: sweep {sweep_path}, bf16 GEMM {gemm_n}^3 "
          f"{gemm / 1e12:.2f} TFLOP/s, copy {copy_bw / 1e9:.1f} GB/s, {protocol}"
          + (f", L2 flush {flush.buffer.numel()} bytes after a lead of {lead_cycles} cycles" if flush is not None
             else " (CPU: warm cache, no flush)"))
    if lead_note:
        print(f"  note: {lead_note}")
    width = max([46] + [len(name) for name, _, _ in shapes])
    print(f"  {'benchmark':<{width}} {'median us':>11} {'TFLOP/s':>8} {'% gemm':>7} {'GB/s':>8} {'% copy':>7}"
          f" {'ours us':>10} {'ours/peer':>9}")
    results = []
    gen = torch.Generator().manual_seed(seed)
    for name, op, prm in shapes:
        if name_filter and not re.search(name_filter, name):
            continue
        if op == "forward":
            print(f"  {name:<{width}} no peer (the peers cover the two attention routes)")
            continue
        if max_flops is not None and model_flops(op, prm) > max_flops:
            print(f"  {name:<{width}} above the sweep's host.max_attention_flops: not timed on the CPU")
            continue
        def measure():
            if op == "sparse_mqa":
                fn, unique = setup_sparse(prm, device, gen)
                flops, nbytes = sparse_model(prm, unique)
                mask = None
            else:
                fn, mask = setup_dense(prm, device, gen)
                flops, nbytes = dense_model(prm)
            if iters is not None:
                times = time_fn(fn, flush, iters, warmup, device)
                return times, (len(times), len(times)), flops, nbytes, mask
            means, per_repetition, calls = time_like_sweep(fn, flush, repetitions, min_time_s, warmup, device)
            return means, (per_repetition, calls), flops, nbytes, mask

        # RuntimeError too: e.g. no SDPA kernel for these dims on this device.
        timed, counts = counting_late_calls(flush, lambda: guarded_timing(name, op, width, results, measure,
                                                                          also=RuntimeError))
        if timed is None:
            continue
        times, (per_repetition, calls), flops, nbytes, mask = timed
        med = statistics.median(times)
        entry = {
            "name": name, "op": op, "iterations": per_repetition, "calls": calls, "median_s": med,
            "min_s": min(times), "max_s": max(times), "flops": flops, "bytes": nbytes,
            "flops_per_second": flops / med, "pct_of_gemm_rate": 100.0 * flops / med / gemm,
            "bytes_per_second": nbytes / med, "pct_of_copy_bw": 100.0 * nbytes / med / copy_bw,
        }
        if iters is None:
            entry["repetition_means_s"] = times
        if counts is not None:
            entry["late_queue_calls"] = counts[1]   # of `calls`: every timed call, the search's too
        if mask is not None:
            entry["mask"] = mask   # dense: is_causal=True, causal_lower_right, explicit ... mask, none
        ours_s = ours.get(name)
        if ours_s:
            entry["ours_s"] = ours_s
            entry["ours_over_peer"] = ours_s / med
        results.append(entry)
        print(f"  {name:<{width}} {med * 1e6:>11.2f} {entry['flops_per_second'] / 1e12:>8.3f} "
              f"{entry['pct_of_gemm_rate']:>7.1f} {entry['bytes_per_second'] / 1e9:>8.1f} {entry['pct_of_copy_bw']:>7.1f}"
              + (f" {ours_s * 1e6:>10.2f} {ours_s / med:>9.3f}" if ours_s else f" {'-':>10} {'-':>9}")
              + (f"  mask: {mask}" if mask is not None else ""))
        note = late_queue_note(counts)
        if note:
            print(f"    note: {note}")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return {
        "device": device_name, "torch": torch.__version__, "cuda": torch.version.cuda, "sweep": str(sweep_path),
        "l2_bytes": l2, "flush_bytes": flush.buffer.numel() if flush is not None else 0,
        "flush": FLUSH if flush is not None else None, "lead_cycles": lead_cycles,
        "lead": lead_description(lead_cycles) if flush is not None else None, "lead_note": lead_note,
        "gemm_flops_per_second": gemm, "gemm_size": gemm_n, "copy_bytes_per_second": copy_bw,
        "ours": str(ours_path) if ours_path else None,
        "timing": ("CUDA events per iteration, L2 flushed (untimed) before each" if device.type == "cuda"
                   else "time.perf_counter per call on the CPU, warm cache"),
        "protocol": protocol, "repetitions": None if iters is not None else repetitions,
        "min_time_s": None if iters is not None else min_time_s,
        "models": "mla-bench's FLOP and byte models (docs/benchmarks.md); sparse bytes count 656 per distinct entry",
        "results": results,
    }


# ----------------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", help="directory written by mla-bench --dump (for the bit-exact check)")
    ap.add_argument("--out", help="write the results (check summary and timings) as JSON to this file")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "both"],
                    help="where the check recomputes (auto: cuda when available)")
    ap.add_argument("--sweep", default=None,
                    help="sweep name (scenarios/sweeps/NAME.json) or file (default: cache_path; attention "
                         "with --attention)")
    ap.add_argument("--attention", action="store_true",
                    help="time the attention peers (SDPA, gather + matmul) on the sweep's attention shapes "
                         "instead of the cache-path operations; the --dump check runs only when --dump is given")
    ap.add_argument("--ours", help="mla-bench JSON output (--benchmark_out) to put our times beside the peer's")
    ap.add_argument("--timing-device", default="auto", choices=["auto", "cuda", "cpu"],
                    help="--attention: where to time (auto: cuda when available, else skipped; cpu: a smoke "
                         "test with perf_counter, shapes above the sweep's host.max_attention_flops skipped)")
    ap.add_argument("--filter", default="", help="time only shapes whose name matches this regex")
    ap.add_argument("--iters", type=int, default=None,
                    help="timed calls per shape (>= 20; default 30). With --attention the default is "
                         "mla-bench's protocol instead (the sweep's repetitions and min_time_s, "
                         "time_like_sweep), so that ours / peer compares like with like")
    ap.add_argument("--repetitions", type=int, default=None,
                    help="--attention, mla-bench's protocol: repetitions per shape (default: the sweep's; "
                         "give the same as mla-bench's --benchmark_repetitions when that was set)")
    ap.add_argument("--min-time", type=float, default=None,
                    help="--attention, mla-bench's protocol: timed seconds per repetition (default: the "
                         "sweep's min_time_s; the same as mla-bench's --benchmark_min_time when that was set)")
    ap.add_argument("--lead-cycles", type=int, default=None,
                    help="GPU: SM clock cycles one thread spins (torch.cuda._sleep) before each L2 flush, so "
                         "that the timed call is queued before the start event (0: none). Default: the "
                         f"count --ours names (mla-bench's mla_lead_cycles), else mla-bench's default {LEAD_CYCLES} "
                         "(the cache path has no --ours: give mla-bench's count when it ran with another)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240901)
    ap.add_argument("--no-check", action="store_true", help="skip the check of --dump")
    ap.add_argument("--no-timing", action="store_true", help="skip the timing")
    ap.add_argument("--max-mismatches", type=int, default=10, help="mismatches printed per tensor")
    args = ap.parse_args(argv)
    if args.iters is not None and (args.repetitions is not None or args.min_time is not None):
        ap.error("--iters times a fixed number of calls; --repetitions / --min-time go with mla-bench's protocol")
    if args.lead_cycles is not None and not 0 <= args.lead_cycles <= MAX_LEAD_CYCLES:
        ap.error(f"--lead-cycles must be in [0, {MAX_LEAD_CYCLES}]")
    if args.iters is not None and args.iters < 20:
        ap.error("--iters must be at least 20")
    if args.attention and not args.dump:
        args.no_check = True
    if not args.no_check and not args.dump:
        ap.error("--dump DIR is required unless --no-check (or --attention)")
    if args.ours and not args.attention:
        ap.error("--ours goes with --attention")
    if args.sweep is None:
        args.sweep = "attention" if args.attention else "cache_path"
    if args.iters is None and not args.attention:
        args.iters = 30
    return args


def check_devices(choice):
    cuda = torch.cuda.is_available()
    if choice == "auto":
        return ["cuda" if cuda else "cpu"]
    if choice == "both":
        return ["cpu", "cuda"] if cuda else ["cpu"]
    if choice == "cuda" and not cuda:
        raise DumpError("--device cuda: no CUDA device")
    return [choice]


def main(argv=None):
    args = parse_args(argv)
    summary = {"tool": "peer_torch.py", "torch": torch.__version__, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    failed = False
    try:
        if not args.no_check:
            summary["check"] = {}
            for device in check_devices(args.device):
                n = check_dump(args.dump, device, args.max_mismatches)
                summary["check"][device] = {"mismatches": n}
                failed |= n > 0
                print(f"peer check on {device}: {'PASS (bit-exact)' if n == 0 else f'FAIL ({n} elements differ)'}")
    except DumpError as e:
        print(f"peer_torch.py: {e}", file=sys.stderr)
        return 2
    if not args.no_timing and args.attention:
        try:
            lead = resolve_lead(args.lead_cycles, args.ours)   # a malformed --ours: exit 2 before any timing
            summary["attention_timing"] = run_attention_timing(args.sweep, args.iters, args.warmup, args.filter,
                                                               args.seed, args.ours, args.timing_device,
                                                               args.repetitions, args.min_time, lead)
        except (DumpError, OSError, ValueError, KeyError) as e:
            print(f"peer_torch.py: {e}", file=sys.stderr)
            return 2
    elif not args.no_timing:
        try:
            summary["timing"] = run_timing(args.sweep, args.iters, args.warmup, args.filter, args.seed,
                                           LEAD_CYCLES if args.lead_cycles is None else args.lead_cycles)
        except DumpError as e:
            print(f"peer_torch.py: {e}", file=sys.stderr)
            return 2
    if args.out:
        out = Path(args.out)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
        tmp.replace(out)
        print(f"wrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
