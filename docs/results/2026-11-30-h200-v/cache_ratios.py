#!/usr/bin/env python3
"""Session 27: the cache path's peer / ours speed-ups from call 3's mla-bench JSON (54 shapes; cut
off at the 300 s limit, see below) and call 4's bench-rest.json (the other 4), against call 4's
peer_torch.json. Run from this folder: python3 cache_ratios.py > cache-ratios.txt"""
import json


def medians(benchmarks):
    """Median rows' times in us (mla-bench writes every row in us)."""
    rows = [b for b in benchmarks if b.get("aggregate_name") == "median"]
    assert all(b["time_unit"] == "us" for b in rows)
    return {b["run_name"].replace("/manual_time", ""): b["real_time"] for b in rows}


# Call 3's bench.json stops after its 54th benchmark's last row (the process was killed before
# Google Benchmark closed the array): every row in it is whole, only the closing "]}" is missing.
cut = open("call3/run_gpu/bench.json").read().rstrip()
assert cut.endswith("}"), "bench.json no longer ends after a whole row"
ours = medians(json.loads(cut + "]}")["benchmarks"])
assert len(ours) == 54, len(ours)
ours.update(medians(json.load(open("call4/bench-rest.json"))["benchmarks"]))
peer = {r["name"]: r["median_s"] * 1e6 for r in json.load(open("call4/peer_torch.json"))["timing"]["results"]}
print(f"{'shape':44s} {'ours us':>10s} {'peer us':>10s} {'peer/ours':>9s}")
speedups = {}
for name, p in peer.items():
    speedups[name] = p / ours[name]
    print(f"{name:44s} {ours[name]:10.2f} {p:10.2f} {speedups[name]:9.1f}")
at64k = [s for n, s in speedups.items() if n.endswith(":65536")]
print(f"{len(speedups)} shapes: {min(speedups.values()):.1f}-{max(speedups.values()):.1f}x; "
      f"at 64k tokens / rows: {min(at64k):.1f}-{max(at64k):.1f}x")
