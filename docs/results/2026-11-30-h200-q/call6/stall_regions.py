"""Stall samples of dense-src.csv.gz (ncu source page, SASS) summed over the kernel's regions.
The region bounds are row indices of this CSV (after its two header rows), read off its marker
instructions: 70 USETMAXREG.TRY_ALLOC (the consumers' start), 447 the S_0 wait (first
WARPGROUP.DEPBAR.LE gsb0, 0x0), 1590 the loop's first instruction (after P_0's last F2FP; 1643 is S_t's last
HGMMA), 2744 after the loop's P V wait (DEPBAR 0x0 at 2743), 2890 after the last P V's wait
(2889), 3493 USETMAXREG.DEALLOC (the producer's start). Usage: python3 stall_regions.py"""
import csv
import gzip
import os

rows = list(csv.reader(gzip.open(os.path.join(os.path.dirname(__file__), "dense-src.csv.gz"), "rt")))
hdr, data = rows[1], rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
S = "Warp Stall Sampling (All Samples)"


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


regions = [("consumers: item start (Q wait and ldmatrix, K_0 wait, S_0 issue)", 70, 447),
           ("consumers: S_0 wait, softmax of tile 0, P_0 packed", 447, 1590), ("consumers: key-tile loop", 1590, 2744),
           ("consumers: last P V", 2744, 2890), ("consumers: epilogue, next item's read", 2890, 3493),
           ("producer", 3493, len(data))]
consumers = sum(num(r[ix[S]]) for r in data[70:3493])
for name, a, b in regions:
    sub = data[a:b]
    t = sum(num(r[ix[S]]) for r in sub)
    top = sorted(((h, sum(num(r[ix[h]]) for r in sub)) for h in stalls), key=lambda x: -x[1])[:5]
    share = f", {100 * t / consumers:.1f} % of the consumers'" if b <= 3493 else ""
    print(f"{name}: {t:.0f} samples{share}; " + ", ".join(f"{h[6:]} {v:.0f}" for h, v in top))
for n, what in ((339, "the last Q ldmatrix (its address reloaded from local memory)"),
                (408, "the K_0 wait"), (2947, "R2UR of the published item's loaded words")):
    r = data[n]
    print(f"row {n} {r[ix['Source']].strip()[:48]}: {r[ix[S]]} samples, long_sb {r[ix['stall_long_sb']]}: {what}")
