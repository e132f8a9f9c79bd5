#!/usr/bin/env python3
"""Bit-exact peer check of mla-bench's cache-path operations, in plain PyTorch.

Reads an `mla-bench --dump DIR` (manifest.json + raw little-endian files), recomputes pack, gather
and convert the way a user would without our kernels (scripts/peer_common.py: tensor indexing,
`.to(torch.float8_e4m3fn)` after clamping to +-448, fp32 division for the scales, dtype views of
the 656-byte entry) and compares with our outputs bit for bit (any NaN equals any NaN; NaN
positions must match). Mismatches are printed. The timing of the same operations is
scripts/peer_timing.py.

Runs on the GPU machine's python3 (PyTorch; CUDA for --device cuda); not part of CI.
Exit status: 0 all bits match, 1 a mismatch, 2 bad usage or an unreadable dump.

Examples:
  build/bin/mla-bench --backend cuda --dump /tmp/dump
  python3 scripts/peer_check.py --dump /tmp/dump --device cuda --out /tmp/peer_check.json
  python3 scripts/peer_check.py --dump /tmp/dump --device cpu
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_common import (  # noqa: E402
    ENTRY_BYTES, LATENT_DIMS, NOPE_DIMS, ROPE_OFFSET, SCALE_OFFSET, TILE_DIMS, PeerError, cache_pages,
    convert_torch, gather_torch, pack_torch, write_json)

DTYPES = {
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "uint8": torch.uint8,
}


def load_tensor(dump_dir, desc, device):
    path = Path(dump_dir) / desc["file"]
    if desc["dtype"] not in DTYPES:
        raise PeerError(f"{path}: unknown dtype {desc['dtype']}")
    try:
        raw = bytearray(path.read_bytes())
    except OSError as e:
        raise PeerError(f"cannot read {path}: {e}") from e
    flat = torch.frombuffer(raw, dtype=DTYPES[desc["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[desc["dtype"]])
    shape, strides = desc["shape"], desc["strides"]
    needed = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(shape) else 0
    if flat.numel() < needed:
        raise PeerError(f"{path}: {flat.numel()} elements, the shape needs {needed}")
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
        raise PeerError(f"cannot read {manifest_path}: {e}") from e
    layout = manifest.get("layout", {})
    expected = {"entry_bytes": ENTRY_BYTES, "scale_offset": SCALE_OFFSET, "rope_offset": ROPE_OFFSET,
                "tile_dims": TILE_DIMS, "byte_order": "little"}
    for key, value in expected.items():
        if layout.get(key) != value:
            raise PeerError(f"{manifest_path}: layout.{key} is {layout.get(key)!r}, this script expects {value!r}")
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


def check_devices(choice):
    if choice == "cpu":
        return ["cpu"]
    cuda = torch.cuda.is_available()
    if choice == "auto":
        return ["cuda" if cuda else "cpu"]
    if choice == "both":
        return ["cpu", "cuda"] if cuda else ["cpu"]
    if choice == "cuda" and not cuda:
        raise PeerError("--device cuda: no CUDA device")
    return [choice]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--dump", required=True, help="directory written by mla-bench --dump")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "both"],
                    help="where the check recomputes (auto: cuda when available)")
    ap.add_argument("--max-mismatches", type=int, default=10, help="mismatches printed per tensor")
    ap.add_argument("--out", help="write the check's summary as JSON to this file")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    summary = {"tool": "peer_check.py", "torch": torch.__version__, "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
               "dump": str(args.dump), "check": {}}
    failed = False
    try:
        for device in check_devices(args.device):
            n = check_dump(args.dump, device, args.max_mismatches)
            summary["check"][device] = {"mismatches": n}
            failed |= n > 0
            print(f"peer check on {device}: {'PASS (bit-exact)' if n == 0 else f'FAIL ({n} elements differ)'}")
    except PeerError as e:
        print(f"peer_check.py: {e}", file=sys.stderr)
        return 2
    if args.out:
        write_json(args.out, summary)
        print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
