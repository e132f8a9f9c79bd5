"""Per-key-tile stamps of the dense wgmma consumers (variant MLA_TILE_TRACE): int64
[132 CTAs][2 warpgroups][64 slots][8]; stamps 0 loop top, 1 after the mbarrier waits (+ turn),
2 after the issue of P V half 0 + S, 3 S done, 4 softmax done, 5 after PV half 1 + rescale + pack;
[6] item n, [7] tile t. Usage: python3 tile_trace.py FILE [--sdb]
--sdb: the stamps of wip/dense-s-double's diagnostic copy (0 step start, 1 after the V wait,
2 after P V (both halves, waited), 3 after S_{t+1}'s issue, 4 softmax done, 5 after the rescale,
the pack and the wait for S_{t+1})."""
import statistics as st
import struct
import sys

data = open(sys.argv[1], "rb").read()
v = struct.unpack(f"<{len(data) // 8}q", data)
C, W, T, S = 132, 2, 64, 8
def rec(c, w, i):
    b = ((c * W + w) * T + i) * S
    return v[b:b + S]
names = ["wait(mbar/turn)", "issue", "S wait", "softmax", "PV1+rescale+pack"]
if "--sdb" in sys.argv[2:]:
    names = ["V wait", "P V (2 halves)", "S_{t+1} issue", "softmax", "rescale+pack+S wait"]
d = {k: [[], []] for k in names}
period = [[], []]
offs, ovl = [], []
for c in range(C):
    by = [{}, {}]
    for w in range(W):
        prev = None
        for i in range(T):
            r = rec(c, w, i)
            if r[0] == 0:
                prev = None
                continue
            for k, nm in enumerate(names):
                d[nm][w].append(r[k + 1] - r[k])
            if prev is not None and prev[6] == r[6] and prev[7] + 1 == r[7]:
                period[w].append(r[0] - prev[0])
            prev = r
            by[w][(r[6], r[7])] = r
    for key, a in by[0].items():
        b = by[1].get(key)
        if b is None:
            continue
        offs.append(b[0] - a[0])
        lo, hi = max(a[3], b[3]), min(a[4], b[4])
        ovl.append(max(0, hi - lo) / max(1, a[4] - a[3]))
def q(x):
    if not x:
        return "-"
    x = sorted(x)
    return f"p25 {x[len(x)//4]:6d}  med {x[len(x)//2]:6d}  p75 {x[3*len(x)//4]:6d}  (n {len(x)})"
for nm in names:
    for w in range(W):
        print(f"{nm:18s} wg{w}: {q(d[nm][w])}")
for w in range(W):
    print(f"{'period':18s} wg{w}: {q(period[w])}")
print(f"{'wg1 - wg0 start':18s}     : {q(offs)}")
if ovl:
    s = sorted(ovl)
    print(f"softmax overlap (fraction of wg0's softmax during wg1's): p25 {s[len(s)//4]:.2f} med {s[len(s)//2]:.2f} p75 {s[3*len(s)//4]:.2f}")
