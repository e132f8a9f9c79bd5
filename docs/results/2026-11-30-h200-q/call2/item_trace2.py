"""item_trace.py plus the epilogue split ([10] after start_read, [11] after the stores) and the
producer's fetch of the next item (<items>.pub: [132][64][2] before / after nth_item of item n)."""
import struct, sys
sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "call1"))
import item_trace as base

def q(x):
    return base.q(x)

def main(tiles_path, items_path):
    tp = base.tiles(tiles_path)
    data = open(items_path, "rb").read(); v = struct.unpack(f"<{len(data)//8}q", data)
    pd = open(items_path + ".pub", "rb").read(); pub = struct.unpack(f"<{len(pd)//8}q", pd)
    C, W, T, S = 132, 2, 32, 12
    names = ["Q wait + load", "K_0 wait", "S_0", "softmax_0 + pack", "loop (t >= 1)", "last P V"]
    d = {k: [[], []] for k in names + ["last P V -> start_read done", "stores", "finish_read", "epilogue total",
                                      "pub start - last P V done", "fetch (pub end - start)", "pub end - last P V done",
                                      "item start - pub end"]}
    kts = [[], []]
    for c in range(C):
        for w in range(W):
            for i in range(T):
                b = ((c * W + w) * T + i) * S
                r = v[b:b + S]
                if r[0] == 0 or r[8] <= 0 or r[7] == 0:
                    continue
                for k, nm in enumerate(names):
                    d[nm][w].append(r[k + 1] - r[k])
                d["last P V -> start_read done"][w].append(r[10] - r[6])
                d["stores"][w].append(r[11] - r[10])
                d["finish_read"][w].append(r[7] - r[11])
                d["epilogue total"][w].append(r[7] - r[6])
                kts[w].append(r[8])
                n = r[9]
                if 0 <= n and n + 1 < 64:
                    p0, p1 = pub[(c * 64 + n + 1) * 2], pub[(c * 64 + n + 1) * 2 + 1]
                    if p0 and p1:
                        d["pub start - last P V done"][w].append(p0 - r[6])
                        d["fetch (pub end - start)"][w].append(p1 - p0)
                        d["pub end - last P V done"][w].append(p1 - r[6])
                if 0 <= n < 64:
                    p1 = pub[(c * 64 + n) * 2 + 1]
                    if p1:
                        d["item start - pub end"][w].append(r[0] - p1)
    print("items (with >= 1 key tile):")
    for nm in d:
        for w in range(W):
            print(f"  {nm:30s} wg{w}: {q(d[nm][w])}")
    for w in range(W):
        print(f"  {'key tiles per item':30s} wg{w}: {q(kts[w])}")

if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[a.index("--tiles") + 1], a[a.index("--items") + 1])
