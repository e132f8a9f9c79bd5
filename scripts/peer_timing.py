#!/usr/bin/env python3
"""Peer timing of mla-bench's shapes in plain PyTorch, written as Google Benchmark JSON.

The shapes are mla-bench's own: `mla-bench --list-shapes --json --sweep NAME|FILE` gives every
benchmark a sweep registers, its name, the parameters that build its inputs, the bytes and FLOPs
its counters count per call, and the sweep's repetitions, min_time_s and seed. This script runs
that binary (--mla-bench, else $MLA_BENCH_BIN, else build/bin/mla-bench) or reads a saved export
(--shapes FILE), times the PyTorch peer of each shape, and writes (--out) a Google Benchmark JSON
file with mla-bench's benchmark names and counters, so that scripts/compare_reports.py (bench
mode) and scripts/plot_sweep.py (--peer) read it as they read mla-bench's output. The peers:
  pack, gather, convert  the operations as a PyTorch user writes them (scripts/peer_common.py).
  dense_mha   torch.nn.functional.scaled_dot_product_attention in bf16 on q = [q_nope, q_pe]
              [nq, H, 192], k = [k_nope, k_pe] [nk, H, 192], v [nk, H, 128] per request, one batched
              call when the requests are equally long, else one call per request; the mask as the
              shape says: causal with as many keys as queries is_causal=True, bottom-right causal
              with more keys than queries attn_mask = torch.nn.attention.bias.causal_lower_right(nq,
              nk) (PyTorch >= 2.3; else an explicit boolean lower-right mask, built untimed),
              unmasked no mask. Each shape says which it used ("mask" and the label).
  sparse_mqa  index_select of the selected 576-wide bf16 rows from a bf16 cache built from
              fp8_ds_mla entries (dequantized once, untimed), then bmm(q_lat, K^T), scale and mask
              in fp32, logsumexp + exp (softmax), bmm(P in bf16, V = K[..., :512]).
  forward     no peer.

Timing (CUDA events per call; before every call, as in mla-bench, the lead (torch.cuda._sleep of
--lead-cycles: default the count --ours names, else mla-bench's) and the L2 flushed by reading a
buffer of twice the L2 size): cache-path shapes the median of --iters calls (default 30), each
call a repetition of one iteration in the output; attention shapes mla-bench's protocol (Google
Benchmark's: a call count searched for in the first repetition until a batch of calls takes the
sweep's min_time_s, the sweep's repetitions of that many calls, the median of the repetitions'
mean call times; --repetitions / --min-time override the sweep's values, --iters N times N
single calls instead). The counters use mla-bench's models from the export (the sparse peer draws
its own top-k picks: its distinct entries are the counter peer_distinct_entries, the bytes are
mla-bench's) against this script's own copy bandwidth and bf16 GEMM rate. On the GPU each shape
also counts its late calls (late_queue_calls of timed_calls; a note is printed when there are
any): the GPU had reached the start event before Python finished queueing the call, so launch
time may lie in the timed region; a longer --lead-cycles avoids them. With --ours BENCH.json
(mla-bench --benchmark_out, JSON) every shape also gets our median time (ours_seconds) and
ours_over_peer (below 1: ours is faster); BENCH.json may hold the NaN literals Google Benchmark
writes for a statistic it cannot compute, but a time read from it that is NaN or infinite is an
error naming the entry. --device cpu times on the CPU (perf_counter, warm cache, the shapes over
the sweep's host caps skipped): a smoke test without a GPU.

Runs on the GPU machine's python3 (PyTorch with CUDA); not part of CI.
Exit status: 0 timed (or skipped: no CUDA device with --device auto), 2 bad usage, an unusable
export or --ours file.

Examples:
  python3 scripts/peer_timing.py --device cuda --out /tmp/peer_cache.json            # cache_path sweep
  build/bin/mla-bench --sweep attention --benchmark_out=/tmp/attn.json --benchmark_out_format=json
  python3 scripts/peer_timing.py --sweep attention --ours /tmp/attn.json --out /tmp/peer_attn.json
  python3 scripts/compare_reports.py /tmp/attn.json /tmp/peer_attn.json               # ours vs peer
  python3 scripts/peer_timing.py --sweep quick --device cpu                           # smoke test, no GPU
"""
import argparse
import datetime
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_reports import BadInput, group_benchmarks, load_json, reduce_runs  # noqa: E402
from peer_common import (  # noqa: E402
    ENTRY_BYTES, KV_COLS, LATENT_DIMS, NOPE_DIMS, REPO_ROOT, PeerError, convert_torch, dequantize_entries,
    gather_torch, pack_torch, quantize_entries, write_json)

SHAPES_SCHEMA = "mla-bench.shapes/1"   # the export this script reads (apps/mla_bench/list_shapes.h)
CACHE_OPS = ("pack", "gather", "convert")
ATTENTION_OPS = ("sparse_mqa", "dense_mha")
CACHE_PATH_ITERS = 30                  # the cache path's default: the median of this many calls

QK_HEAD_DIM, V_HEAD_DIM, NOPE_HEAD_DIM = 192, 128, 128
SOFTMAX_SCALE = 1.0 / (192.0 ** 0.5)
GEMM_SIZE = {"cuda": 8192, "cpu": 384}      # the GEMM ceiling's m = n = k, as mla-bench


# ----------------------------------------------------------------------------------------------
# The shapes: mla-bench's export.
# ----------------------------------------------------------------------------------------------

def mla_bench_binary(given):
    """--mla-bench, else $MLA_BENCH_BIN, else build/bin/mla-bench of this checkout."""
    if given:
        return Path(given)
    if os.environ.get("MLA_BENCH_BIN"):
        return Path(os.environ["MLA_BENCH_BIN"])
    return REPO_ROOT / "build" / "bin" / "mla-bench"


def check_export(doc, where):
    """Refuses what is not an mla-bench.shapes/1 export (PeerError naming the field)."""
    if not isinstance(doc, dict):
        raise PeerError(f"{where}: not a JSON object")
    if doc.get("schema") != SHAPES_SCHEMA:
        raise PeerError(f"{where}: \"schema\" is {doc.get('schema')!r}; this script reads {SHAPES_SCHEMA!r} "
                        "(mla-bench --list-shapes --json)")
    if not isinstance(doc.get("sweep"), dict):
        raise PeerError(f"{where}: \"sweep\" is missing or not an object")
    shapes = doc.get("shapes")
    if not isinstance(shapes, list):
        raise PeerError(f"{where}: \"shapes\" is missing or not a list")
    for i, shape in enumerate(shapes):
        if not isinstance(shape, dict):
            raise PeerError(f"{where}: shapes[{i}] is not an object")
        for key, kind in (("name", str), ("run_name", str), ("op", str), ("params", dict)):
            if not isinstance(shape.get(key), kind):
                raise PeerError(f"{where}: shapes[{i}].{key} is missing or not a {kind.__name__}")


def load_shapes(shapes_file, sweep, binary):
    """(the export, where it came from): --shapes FILE, else `BINARY --list-shapes --json --sweep SWEEP`."""
    if shapes_file:
        where = str(shapes_file)
        try:
            doc = json.loads(Path(shapes_file).read_text())
        except (OSError, ValueError) as e:
            raise PeerError(f"cannot read --shapes {shapes_file}: {e}") from None
    else:
        command = [str(binary), "--list-shapes", "--json", "--sweep", sweep]
        where = " ".join(command)
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PeerError(f"cannot run {binary} (give --mla-bench or MLA_BENCH_BIN, or --shapes FILE): {e}") from None
        if run.returncode != 0:
            raise PeerError(f"{where} failed (exit {run.returncode}): {run.stderr.strip()}")
        try:
            doc = json.loads(run.stdout)
        except ValueError as e:
            raise PeerError(f"{where}: output is not JSON: {e}") from None
    check_export(doc, where)
    return doc, where


def sweep_protocol(sweep, where, repetitions=None, min_time_s=None):
    """The repetitions and the minimum timed seconds per repetition: the given ones, else the
    sweep's ("repetitions", "min_time_s"; mla-bench's defaults 5 and 0.05 where it has none),
    within mla-bench's limits (1..1000 repetitions, 0 < min_time_s <= 60)."""
    reps = repetitions if repetitions is not None else sweep.get("repetitions", 5)
    secs = min_time_s if min_time_s is not None else sweep.get("min_time_s", 0.05)
    place = "--repetitions" if repetitions is not None else f"{where}: repetitions"
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= 1000:
        raise ValueError(f"{place}: {reps!r} is not a whole number of repetitions in 1..1000")
    place = "--min-time" if min_time_s is not None else f"{where}: min_time_s"
    if isinstance(secs, bool) or not isinstance(secs, (int, float)) or not 0 < secs <= 60:
        raise ValueError(f"{place}: {secs!r} is not a time in seconds in (0, 60]")
    return reps, float(secs)


def shape_protocol(op, iters, protocol):
    """How a shape is timed: ("calls", n), the median of n single calls (--iters, else the cache
    path's CACHE_PATH_ITERS), or ("sweep", repetitions, min_time_s), mla-bench's protocol
    (attention shapes; `protocol` is sweep_protocol's)."""
    if iters is not None:
        return ("calls", iters)
    if op in CACHE_OPS:
        return ("calls", CACHE_PATH_ITERS)
    return ("sweep",) + tuple(protocol)


# ----------------------------------------------------------------------------------------------
# Inputs of each shape.
# ----------------------------------------------------------------------------------------------

def split_lengths(total, parts, gen):
    """`total` split into `parts` positive lengths around total / parts."""
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
    """Inputs of one sparse_mqa shape; returns (fn, distinct valid slots of its picks)."""
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
    """Inputs of one dense_mha shape (its requests' query_lens and key_lens from the export);
    returns (fn, the masking it uses)."""
    h, q_lens, k_lens, causal = prm["heads"], prm["query_lens"], prm["key_lens"], prm["causal"]
    n, nk = sum(q_lens), sum(k_lens)
    q = uniform_bf16((n, h, QK_HEAD_DIM), 1.0, device, gen)
    k_nope = uniform_bf16((nk, h, NOPE_HEAD_DIM), 0.4, device, gen)
    k_pe = uniform_bf16((nk, 1, QK_HEAD_DIM - NOPE_HEAD_DIM), 0.4, device, gen)
    k = torch.cat([k_nope, k_pe.expand(nk, h, -1)], dim=2)   # the user's concatenation, untimed
    v = uniform_bf16((nk, h, V_HEAD_DIM), 0.4, device, gen)
    masks, how = dense_masks(q_lens, k_lens, causal, device)   # untimed
    return (lambda: dense_attention_torch(q, k, v, q_lens, k_lens, causal, masks)), how


PEER_LABELS = {
    "pack": "peer: torch indexing, fp8 cast (scripts/peer_common.py pack_torch)",
    "gather": "peer: torch indexing, dequantize (scripts/peer_common.py gather_torch)",
    "convert": "peer: torch indexing (scripts/peer_common.py convert_torch)",
    "sparse_mqa": "peer: index_select + bmm + logsumexp + bmm on a dequantized bf16 cache",
    "dense_mha": "peer: torch.nn.functional.scaled_dot_product_attention",
}


def setup_shape(shape, device, gen):
    """(fn, extra counters, mask or None) of one shape of the export."""
    op, prm = shape["op"], shape["params"]
    if op == "pack":
        return setup_pack(prm["tokens"], prm["block_size"], device, gen), {}, None
    if op == "gather":
        return setup_gather(prm["rows"], prm["block_size"], prm["seq_starts"], device, gen), {}, None
    if op == "convert":
        return setup_convert(prm["rows"], prm["topk"], prm["block_size"], device, gen), {}, None
    if op == "sparse_mqa":
        fn, distinct = setup_sparse(prm, device, gen)
        return fn, {"peer_distinct_entries": distinct}, None
    if op == "dense_mha":
        fn, mask = setup_dense(prm, device, gen)
        return fn, {}, mask
    raise PeerError(f"{shape['name']}: no peer for operation {op!r}")


# ----------------------------------------------------------------------------------------------
# Timing: the lead, the flush, the protocols.
# ----------------------------------------------------------------------------------------------

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
    dtype=int64) makes PyTorch convert the input first: an 8x larger temporary written and read
    before each timed call (about 2 GB of HBM traffic for a 126 MB buffer, ~0.5 ms on an H200),
    whose dirty lines can reach the timed call and which, on a GPU held at its power cap, changes
    what the call runs after (docs/performance.md)."""
    return flush.view(torch.int64).sum()


class ColdStart:
    """What runs untimed before each timed call on the GPU, as in mla-bench (apps/mla_bench/
    l2_flush.h): the lead, one thread spinning for lead_cycles SM clock cycles
    (torch.cuda._sleep, a one-thread clock64 spin like mla-bench's), then the flush (read_flush).
    The lead keeps the GPU busy while Python queues the flush, the start event and the call: without
    it, the time Python takes to launch the call after the 37 us flush lands inside the timed
    region (48-92 us, medians, from the flush's launch to SDPA's return on an H200,
    docs/performance.md); with it, so long as Python queues them within the lead and the flush
    (about 140 us at the default count). Launches of a many-kernel peer queued within that window
    also run without gaps between them. The same count as mla-bench's run leaves the GPU about the
    same idle time before each call in both tools, which matters at the power cap. It also counts
    the timed calls whose region began before Python had queued them (note_queued, take_counts;
    time_cuda reports them)."""

    def __init__(self, buffer, lead_cycles):
        if lead_cycles and not hasattr(torch.cuda, "_sleep"):
            raise PeerError(f"this PyTorch ({torch.__version__}) has no torch.cuda._sleep for the lead; "
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


def guarded_timing(name, width, measure, also=()):
    """(measure()'s result, None), or on out of device memory (or an exception of type `also`)
    (None, why) after printing why and freeing PyTorch's cached memory; the inputs measure()
    built are gone by then."""
    try:
        return measure(), None
    except torch.cuda.OutOfMemoryError as e:
        print(f"  {name:<{width}} does not fit: {str(e).splitlines()[0]}")
        why = "out of memory"
    except also as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"  {name:<{width}} failed: {why}")
    torch.cuda.empty_cache()
    return None, why


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


def time_shape(fn, flush, protocol, warmup, device):
    """(seconds per repetition, calls per repetition, timed calls) by shape_protocol's `protocol`:
    ("calls", n) gives n repetitions of one call each."""
    if protocol[0] == "calls":
        times = time_fn(fn, flush, protocol[1], warmup, device)
        return times, 1, len(times)
    return time_like_sweep(fn, flush, protocol[1], protocol[2], warmup, device)


def copy_bandwidth(device, iters=9):
    """Device-to-device copy of a 2 GiB buffer: (read + written) / median time."""
    n = 2 << 30
    src = torch.full((n,), 0x5A, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    times = time_cuda(lambda: dst.copy_(src), None, iters, 2)
    del src, dst
    return 2.0 * n / statistics.median(times)


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


# ----------------------------------------------------------------------------------------------
# mla-bench's own output (--ours): its times and its lead.
# ----------------------------------------------------------------------------------------------

def load_ours(path):
    """{benchmark name: seconds} from an mla-bench JSON output, each time read as
    scripts/compare_reports.py reads a benchmark file (reduce_runs: the median aggregate, else the
    mean of the iterations, else the mean aggregate); errored benchmarks are left out. Names lose
    Google Benchmark's /manual_time suffix. The file may hold the NaN and Infinity literals Google
    Benchmark writes for a statistic it cannot compute (e.g. the cv aggregate of a counter whose
    mean is 0); an unusable file, or a time read that is not a finite number > 0, is a ValueError
    naming the file and the entry."""
    where = f"--ours file {path}"
    try:
        document = load_json(Path(path), "--ours", google_benchmark=True)
        timings = [reduce_runs(name, entries, where) for name, entries in group_benchmarks(document, where).items()]
    except BadInput as error:
        raise ValueError(str(error)) from None
    return {re.sub(r"/(manual|real)_time$", "", t.name): t.center_ns * 1e-9 for t in timings if t.error is None}


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


# ----------------------------------------------------------------------------------------------
# Google Benchmark's JSON format.
# ----------------------------------------------------------------------------------------------

def shape_counters(shape, seconds, rates, extra):
    """The counters of one repetition whose calls took `seconds` each, as mla-bench names them:
    bytes_per_second, items_per_second, pct_of_copy_bw, and where the shape counts FLOPs
    flops_per_second, flop_per_byte, pct_of_gemm_rate, pct_of_roofline (rates: {"copy": bytes/s,
    "gemm": FLOP/s or None}); then `extra` (constant per shape)."""
    counters = {}
    nbytes, flops, items = shape.get("bytes"), shape.get("flops") or 0, shape.get("items")
    if nbytes is not None:
        counters["bytes_per_second"] = nbytes / seconds
    if items is not None:
        counters["items_per_second"] = items / seconds
    if nbytes is not None and rates["copy"]:
        counters["pct_of_copy_bw"] = 100.0 * nbytes / seconds / rates["copy"]
    if flops:
        counters["flops_per_second"] = flops / seconds
        counters["flop_per_byte"] = flops / max(1.0, nbytes or 0)
        floor = 0.0
        if rates["gemm"]:
            counters["pct_of_gemm_rate"] = 100.0 * flops / seconds / rates["gemm"]
            floor = flops / rates["gemm"]
        if nbytes is not None and rates["copy"]:
            floor = max(floor, nbytes / rates["copy"])
        if floor > 0:
            counters["pct_of_roofline"] = 100.0 * floor / seconds
    counters.update(extra)
    return counters


def benchmark_rows(shape, family_index, seconds, iterations, counters_of, label, fields):
    """Google Benchmark's rows for one benchmark of len(seconds) repetitions of `iterations` calls
    each (seconds: each repetition's mean call time): one "iteration" row per repetition, then,
    for more than one, the mean, median, stddev (sample) and cv aggregates of the time and of
    every counter, as Google Benchmark computes them. Times in us; `fields` (e.g. "mask") on
    every row."""
    run_name = shape["run_name"]
    n = len(seconds)
    base = {"family_index": family_index, "per_family_instance_index": 0, "run_name": run_name}
    rows = []
    for index, t in enumerate(seconds):
        rows.append({"name": run_name, **base, "run_type": "iteration", "repetitions": n, "repetition_index": index,
                     "threads": 1, "iterations": iterations, "real_time": t * 1e6, "time_unit": "us",
                     **counters_of(t), "label": label, **fields})
    if n < 2:
        return rows
    keys = [k for k in rows[0] if k not in base and k not in fields and
            k not in ("name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
                      "time_unit", "label")]
    series = {k: [row[k] for row in rows] for k in keys}
    stats = {
        "mean": lambda v: statistics.fmean(v),
        "median": lambda v: statistics.median(v),
        "stddev": lambda v: statistics.stdev(v),
        "cv": lambda v: statistics.stdev(v) / statistics.fmean(v) if statistics.fmean(v) else 0.0,
    }
    for aggregate, stat in stats.items():
        row = {"name": f"{run_name}_{aggregate}", **base, "run_type": "aggregate", "repetitions": n, "threads": 1,
               "aggregate_name": aggregate, "aggregate_unit": "percentage" if aggregate == "cv" else "time",
               "iterations": n}
        for k in keys:
            row[k] = stat(series[k])
        row["time_unit"] = "us"
        row["label"] = label
        row.update(fields)
        rows.append(row)
    return rows


def error_row(shape, family_index, message):
    """Google Benchmark's row of a benchmark that ended with SkipWithError."""
    return {"name": shape["run_name"], "family_index": family_index, "per_family_instance_index": 0,
            "run_name": shape["run_name"], "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
            "threads": 1, "iterations": 0, "real_time": 0.0, "time_unit": "us", "error_occurred": True,
            "error_message": message}


# ----------------------------------------------------------------------------------------------
# The run.
# ----------------------------------------------------------------------------------------------

def run_timing(export, where, args, lead):
    """Times every selected shape of the export; returns the Google Benchmark document, or None
    when skipped (no CUDA device and --device auto)."""
    device_choice = args.device
    if device_choice == "auto":
        device_choice = "cuda" if torch.cuda.is_available() else None
    if device_choice is None:
        print("peer timing: no CUDA device; skipped (--device cpu times on the CPU)")
        return None
    if device_choice == "cuda" and not torch.cuda.is_available():
        raise PeerError("--device cuda: no CUDA device")
    device = torch.device(device_choice)
    sweep = export["sweep"]
    protocol = sweep_protocol(sweep, where, args.repetitions, args.min_time) if args.iters is None else None
    ours = load_ours(args.ours) if args.ours else {}
    selected = [s for s in export["shapes"] if not args.filter or re.search(args.filter, s["name"])]

    if device.type == "cuda":
        lead_cycles, lead_note = lead
        props = torch.cuda.get_device_properties(device)
        device_name = props.name
        l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
        flush = ColdStart(flush_buffer(l2, device), lead_cycles)
    else:
        device_name, l2, flush, lead_cycles, lead_note = "cpu", 0, None, 0, None
    rates = {"copy": copy_rate(device), "gemm": None}
    gemm_n = None
    if any(s["op"] in ATTENTION_OPS for s in selected):
        rates["gemm"], gemm_n = gemm_rate(device)
    protocols = sorted({shape_protocol(s["op"], args.iters, protocol) for s in selected if s["op"] in CACHE_OPS
                        + ATTENTION_OPS})
    described = "; ".join(
        f"the median of {p[1]} calls" if p[0] == "calls" else
        f"mla-bench's: median of {p[1]} repetitions' mean call times, each >= {p[2]:g} s of timed calls"
        for p in protocols) or "none"
    print(f"peer timing on {device_name}: sweep {sweep.get('name')} ({sweep.get('source')}), shapes from {where}; "
          f"copy {rates['copy'] / 1e9:.1f} GB/s"
          + (f", bf16 GEMM {gemm_n}^3 {rates['gemm'] / 1e12:.2f} TFLOP/s" if rates["gemm"] else "")
          + (f", L2 flush {flush.buffer.numel()} bytes after a lead of {lead_cycles} cycles" if flush is not None
             else " (CPU: warm cache, no flush)") + f"; {described}")
    if lead_note:
        print(f"  note: {lead_note}")
    width = max([46] + [len(s["name"]) for s in selected])
    print(f"  {'benchmark':<{width}} {'median us':>11} {'GB/s':>8} {'% copy':>7} {'TFLOP/s':>8} {'% gemm':>7}"
          f" {'ours us':>10} {'ours/peer':>9}")

    rows = []
    gen = torch.Generator().manual_seed(args.seed)
    for family_index, shape in enumerate(selected):
        name, op = shape["name"], shape["op"]
        if op not in CACHE_OPS + ATTENTION_OPS:
            print(f"  {name:<{width}} no peer")
            continue
        if device.type == "cpu" and shape.get("host_capped"):
            print(f"  {name:<{width}} above the sweep's host caps: not timed on the CPU")
            continue
        shape_proto = shape_protocol(op, args.iters, protocol)

        def measure():
            fn, extra, mask = setup_shape(shape, device, gen)
            return time_shape(fn, flush, shape_proto, args.warmup, device), extra, mask

        # RuntimeError too: e.g. no SDPA kernel for these dims on this device.
        (timed, why), counts = counting_late_calls(
            flush, lambda: guarded_timing(name, width, measure, also=RuntimeError))
        if timed is None:
            rows.append(error_row(shape, family_index, why))
            continue
        (seconds, per_repetition, calls), extra, mask = timed
        constants = dict(extra)
        if counts is not None:
            constants["timed_calls"], constants["late_queue_calls"] = counts
        ours_s = ours.get(name)
        if ours_s:
            constants["ours_seconds"] = ours_s

        def counters_of(t, constants=constants):
            c = shape_counters(shape, t, rates, constants)
            if ours_s:
                c["ours_over_peer"] = ours_s / t
            return c

        label = PEER_LABELS[op] + (f"; mask {mask}" if mask is not None else "")
        rows += benchmark_rows(shape, family_index, seconds, per_repetition, counters_of, label,
                               {"mask": mask} if mask is not None else {})
        med = statistics.median(seconds)
        c = counters_of(med)
        cell = lambda key, scale, fmt: format(c[key] * scale, fmt) if key in c else "-"   # noqa: E731
        print(f"  {name:<{width}} {med * 1e6:>11.2f} {cell('bytes_per_second', 1e-9, '.1f'):>8} "
              f"{cell('pct_of_copy_bw', 1, '.1f'):>7} {cell('flops_per_second', 1e-12, '.3f'):>8} "
              f"{cell('pct_of_gemm_rate', 1, '.1f'):>7}"
              + (f" {ours_s * 1e6:>10.2f} {ours_s / med:>9.3f}" if ours_s else f" {'-':>10} {'-':>9}")
              + (f"  mask: {mask}" if mask is not None else ""))
        note = late_queue_note(counts)
        if note:
            print(f"    note: {note}")
        if device.type == "cuda":
            torch.cuda.empty_cache()

    producer = export.get("producer") or {}
    context = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "executable": "scripts/peer_timing.py",
        "num_cpus": os.cpu_count() or 0,
        "mla_backend": "pytorch peer (scripts/peer_timing.py)",
        "mla_sweep": f"{sweep.get('name')} ({sweep.get('source')})",
        "mla_timing": ("CUDA events per call, L2 flushed (read, untimed) before each call after the lead "
                       "(mla_lead_cycles)" if flush is not None else "time.perf_counter per call on the CPU, warm cache"),
        "mla_copy_bw_bytes_per_second": f"{rates['copy']:f}",
        "mla_copy_bw": f"{rates['copy'] / 1e9:.1f} GB/s",
        "peer_device": device_name,
        "peer_torch": str(torch.__version__),
        "peer_cuda": str(torch.version.cuda),
        "peer_protocol": described,
        "peer_shapes": f"{where} (mla-bench {producer.get('version')}, git {producer.get('git_revision')})",
        "peer_models": "mla-bench's FLOP and byte models, from its --list-shapes export (bytes, flops, items per call)",
    }
    if rates["gemm"]:
        context["mla_gemm_flops_per_second"] = f"{rates['gemm']:f}"
        context["mla_gemm_flops"] = f"{rates['gemm'] / 1e12:.1f} TFLOP/s"
        context["mla_gemm_method"] = f"torch.mm bf16 {gemm_n}x{gemm_n}x{gemm_n}, 2mnk / median of 9 calls after 2 warm-ups"
    if flush is not None:
        context["mla_l2_flush"] = f"{flush.buffer.numel()} bytes read (L2 {l2} bytes)"
        context["mla_lead_cycles"] = str(lead_cycles)
        context["peer_flush"] = FLUSH
        context["peer_lead"] = lead_description(lead_cycles)
    if lead_note:
        context["peer_lead_note"] = lead_note
    if args.ours:
        context["peer_ours"] = str(args.ours)
    return {"context": context, "benchmarks": rows}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    source = ap.add_mutually_exclusive_group()
    source.add_argument("--sweep", default="cache_path",
                        help="the sweep whose shapes are timed: a built-in name or a file, as mla-bench's --sweep "
                             "(default: cache_path)")
    source.add_argument("--shapes", help="an `mla-bench --list-shapes --json` output to read instead of running mla-bench")
    ap.add_argument("--mla-bench", help="the mla-bench binary (default: $MLA_BENCH_BIN, else build/bin/mla-bench)")
    ap.add_argument("--out", help="write the results as Google Benchmark JSON to this file")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                    help="where to time (auto: cuda when available, else skipped; cpu: a smoke test with "
                         "perf_counter, the shapes over the sweep's host caps skipped)")
    ap.add_argument("--ours", help="mla-bench JSON output (--benchmark_out) to put our times beside the peer's")
    ap.add_argument("--filter", default="", help="time only shapes whose name matches this regex")
    ap.add_argument("--iters", type=int, default=None,
                    help=f"time every shape as the median of this many single calls (>= 20). Default: "
                         f"{CACHE_PATH_ITERS} for the cache path, mla-bench's protocol (the sweep's repetitions "
                         "and min_time_s, time_like_sweep) for attention, so that ours / peer compares like with like")
    ap.add_argument("--repetitions", type=int, default=None,
                    help="mla-bench's protocol: repetitions per shape (default: the sweep's; give the same as "
                         "mla-bench's --benchmark_repetitions when that was set)")
    ap.add_argument("--min-time", type=float, default=None,
                    help="mla-bench's protocol: timed seconds per repetition (default: the sweep's min_time_s; the "
                         "same as mla-bench's --benchmark_min_time when that was set)")
    ap.add_argument("--lead-cycles", type=int, default=None,
                    help="GPU: SM clock cycles one thread spins (torch.cuda._sleep) before each L2 flush, so "
                         "that the timed call is queued before the start event (0: none). Default: the "
                         f"count --ours names (mla-bench's mla_lead_cycles), else mla-bench's default {LEAD_CYCLES}")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240901)
    args = ap.parse_args(argv)
    if args.iters is not None and (args.repetitions is not None or args.min_time is not None):
        ap.error("--iters times a fixed number of calls; --repetitions / --min-time go with mla-bench's protocol")
    if args.lead_cycles is not None and not 0 <= args.lead_cycles <= MAX_LEAD_CYCLES:
        ap.error(f"--lead-cycles must be in [0, {MAX_LEAD_CYCLES}]")
    if args.iters is not None and args.iters < 20:
        ap.error("--iters must be at least 20")
    try:
        re.compile(args.filter)
    except re.error as e:
        ap.error(f"--filter: {e}")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        lead = resolve_lead(args.lead_cycles, args.ours)   # a malformed --ours: exit 2 before any timing
        export, where = load_shapes(args.shapes, args.sweep, mla_bench_binary(args.mla_bench))
        document = run_timing(export, where, args, lead)
    except (PeerError, OSError, ValueError, KeyError) as e:
        print(f"peer_timing.py: {e}", file=sys.stderr)
        return 2
    if document is not None and args.out:
        write_json(args.out, document)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
