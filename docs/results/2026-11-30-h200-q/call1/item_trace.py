"""Stamps of the dense wgmma consumers (branch wip/dense-item-trace, build with
-DCMAKE_CUDA_FLAGS=-DMLA_TILE_TRACE; mla-bench writes the last launch's stamps to the files named by
MLA_TILE_TRACE_FILE and MLA_ITEM_TRACE_FILE). Layouts (int64, clock64 in SM cycles; layout and
stamp points in the kernel's comment at g_tile_trace):
  tiles [132 CTAs][2 warpgroups][64 steps][8]: 0 loop top, 1 after the K / V waits, 2 after
    issuing S_t and P V, 3 S_t done, 4 softmax done, 5 after P V's wait, rescale and pack; [6] item
    n, [7] tile t.
  items [132][2][32][10]: 0 item start, 1 Q in registers, 2 after K_0's wait, 3 S_0 done, 4 P_0
    packed (loop start), 5 loop end, 6 last P V done, 7 epilogue end; [8] n_kt_wg, [9] item n.
Usage: python3 item_trace.py [--tiles FILE] [--items FILE]. Prints quartiles per warpgroup."""
import struct
import sys


def load(path, inner):
    data = open(path, "rb").read()
    v = struct.unpack(f"<{len(data) // 8}q", data)
    return v, inner


def q(x):
    if not x:
        return "-"
    x = sorted(x)
    n = len(x)
    return f"p25 {x[n // 4]:7d}  med {x[n // 2]:7d}  p75 {x[3 * n // 4]:7d}  (n {n})"


def tiles(path):
    v, _ = load(path, 8)
    C, W, T, S = 132, 2, 64, 8
    names = ["K / V waits", "issue S + P V", "S wait", "softmax", "P V wait, rescale, pack"]
    d = {k: [[], []] for k in names}
    period = [[], []]
    for c in range(C):
        for w in range(W):
            prev = None
            for i in range(T):
                b = ((c * W + w) * T + i) * S
                r = v[b:b + S]
                if r[0] == 0:
                    prev = None
                    continue
                for k, nm in enumerate(names):
                    d[nm][w].append(r[k + 1] - r[k])
                if prev is not None and prev[6] == r[6] and prev[7] + 1 == r[7]:
                    period[w].append(r[0] - prev[0])
                prev = r
    print("key-tile steps (t >= 1):")
    for nm in names + ["period"]:
        for w in range(W):
            x = period[w] if nm == "period" else d[nm][w]
            print(f"  {nm:26s} wg{w}: {q(x)}")
    return period


def items(path, tile_period):
    v, _ = load(path, 10)
    C, W, T, S = 132, 2, 32, 10
    names = ["Q wait + load", "K_0 wait", "S_0", "softmax_0 + pack", "loop (t >= 1)", "last P V",
             "epilogue + next read"]
    d = {k: [[], []] for k in names}
    per_tile, period, over, offs, kts = [[], []], [[], []], [[], []], [], [[], []]
    med_tile = [sorted(p)[len(p) // 2] if p else 0 for p in tile_period]
    for c in range(C):
        starts = [{}, {}]
        for w in range(W):
            prev = None
            for i in range(T):
                b = ((c * W + w) * T + i) * S
                r = v[b:b + S]
                if r[0] == 0 or r[8] <= 0 or r[7] == 0:
                    prev = None
                    continue
                for k, nm in enumerate(names):
                    d[nm][w].append(r[k + 1] - r[k])
                kts[w].append(r[8])
                if r[8] > 1:
                    per_tile[w].append((r[5] - r[4]) // (r[8] - 1))
                if prev is not None and prev[9] < r[9]:
                    p = r[0] - prev[0]
                    period[w].append(p)
                    over[w].append(p - (prev[8] - 1) * med_tile[w])
                prev = r
                starts[w][r[9]] = r[0]
        for n, t0 in starts[0].items():
            if n in starts[1]:
                offs.append(starts[1][n] - t0)
    print("items (with >= 1 key tile):")
    for nm in names:
        for w in range(W):
            print(f"  {nm:26s} wg{w}: {q(d[nm][w])}")
    for w in range(W):
        print(f"  {'loop per key tile':26s} wg{w}: {q(per_tile[w])}")
        print(f"  {'item period':26s} wg{w}: {q(period[w])}")
        print(f"  {'period - (n-1) tile med':26s} wg{w}: {q(over[w])}")
        print(f"  {'key tiles per item':26s} wg{w}: {q(kts[w])}")
    print(f"  {'wg1 - wg0 item start':26s}    : {q(offs)}")


if __name__ == "__main__":
    args = sys.argv[1:]
    tp = [[], []]
    if "--tiles" in args:
        tp = tiles(args[args.index("--tiles") + 1])
    if "--items" in args:
        items(args[args.index("--items") + 1], tp)
