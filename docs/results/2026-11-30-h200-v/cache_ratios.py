#!/usr/bin/env python3
"""Session 27: the cache path's peer / ours speed-ups from call 3's mla-bench log (54 shapes; its
bench.json was cut off at the 300 s limit) and call 4's bench-rest.json (the other 4), against
call 4's peer_torch.json. Run from this folder: python3 cache_ratios.py > cache-ratios.txt"""
import json
import re

ours = {}
for line in open("call3/run_gpu/bench.log"):
    m = re.match(r"^(\S+)/manual_time_median\s+([\d.]+) (us|ms)", line)
    if m:
        ours[m.group(1)] = float(m.group(2)) * (1000 if m.group(3) == "ms" else 1)
for b in json.load(open("call4/bench-rest.json"))["benchmarks"]:
    if b.get("aggregate_name") == "median":
        ours[b["run_name"].replace("/manual_time", "")] = b["real_time"]
peer = {r["name"]: r["median_s"] * 1e6 for r in json.load(open("call4/peer_torch.json"))["timing"]["results"]}
print(f"{'shape':44s} {'ours us':>10s} {'peer us':>10s} {'peer/ours':>9s}")
speedups = {}
for name, p in peer.items():
    speedups[name] = p / ours[name]
    print(f"{name:44s} {ours[name]:10.2f} {p:10.2f} {speedups[name]:9.1f}")
at64k = [s for n, s in speedups.items() if n.endswith(":65536")]
print(f"{len(speedups)} shapes: {min(speedups.values()):.1f}-{max(speedups.values()):.1f}x; "
      f"at 64k tokens / rows: {min(at64k):.1f}-{max(at64k):.1f}x")
