#!/usr/bin/env python3
"""Session 27: ours / peer per attention shape from the peers' JSON (ours_over_peer, our median
from the --ours file beside each), for every run of this session: call 1 (lead 200000, three
rounds: the whole sweep, then the dense shapes twice), call 2 (the dense shapes at leads 0,
100000, 400000), call 3 (the sparse shapes at 400000). Our TFLOP/s from mla-bench's JSON.
Run from this folder: python3 summary.py > summary.txt"""
import json

RUNS = [("200000 r1", "call1/peer-1.json", "call1/ours-1.json"),
        ("200000 r2", "call1/peer-2.json", "call1/ours-2.json"),
        ("200000 r3", "call1/peer-3.json", "call1/ours-3.json"),
        ("0", "call2/peer-lead0.json", "call2/ours-lead0.json"),
        ("100000", "call2/peer-lead100000.json", "call2/ours-lead100000.json"),
        ("400000", "call2/peer-lead400000.json", "call2/ours-lead400000.json"),
        ("400000 sparse", "call3/peer-sparse-lead400000.json", "call3/ours-sparse-lead400000.json")]


def ours_tflops(path):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            out[b["run_name"].replace("/manual_time", "")] = b["flops_per_second"] / 1e12
    return out


table = {}
for label, peer, ours in RUNS:
    timing = json.load(open(peer))["attention_timing"]
    assert timing["lead_note"] is None, (peer, timing["lead_note"])
    tf = ours_tflops(ours)
    for r in timing["results"]:
        if "ours_over_peer" in r:
            table.setdefault(r["name"], {})[label] = (r["ours_s"] * 1e6, r["median_s"] * 1e6,
                                                      r["ours_over_peer"], tf[r["name"]])
worst = {}
for name, runs in table.items():
    print(name)
    for label, (o, p, ratio, t) in runs.items():
        print(f"  lead {label:14s} ours {o:9.1f} us ({t:6.1f} TFLOP/s)  peer {p:9.1f} us  ours/peer {ratio:.3f}")
        worst[name] = max(worst.get(name, 0), ratio)
print("largest ours / peer per shape over all runs:")
for name, w in sorted(worst.items(), key=lambda kv: -kv[1]):
    print(f"  {w:.3f}  {name}")
