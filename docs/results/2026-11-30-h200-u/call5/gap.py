"""Session 26, call 5: does the peer's timed region hold a launch gap? time_cuda (peer_torch.py)
synchronizes after every call, then launches the flush (a ~35 us read since 1f5489d), records the
start event and calls fn; if the CPU needs longer than the flush to launch fn's first kernel, the
GPU idles inside the timed region. Per dense shape, interleaved, three rounds: A = time_cuda as
is; B = the same with torch.cuda._sleep before the flush (the GPU busy on one SM while the CPU
queues flush, start, fn, stop: nvbench's blocking-kernel idea); and the CPU's time from the
flush's launch to fn's return, and the flush's GPU time. Run from the repository root."""
import json, statistics, sys, time
sys.path.insert(0, "scripts")
import torch
import peer_torch as P

dev = torch.device("cuda")
sweep, _ = P.load_sweep("attention")
l2 = torch.cuda.get_device_properties(dev).L2_cache_size
flush = P.flush_buffer(l2, dev)
SLEEP = 400000  # cycles: ~200-250 us at 1.6-2 GHz


def timed(fn, n, gate):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(n):
        if gate:
            torch.cuda._sleep(SLEEP)
        P.read_flush(flush)
        start.record(); fn(); stop.record(); stop.synchronize()
        t.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(t)


def cpu_launch(fn, n):
    t = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        P.read_flush(flush)
        fn()
        t.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(t)


def flush_time(n=50):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(n):
        torch.cuda._sleep(SLEEP)
        start.record(); P.read_flush(flush); stop.record(); stop.synchronize()
        t.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(t)


out = {"flush_us": flush_time(), "sleep_cycles": SLEEP, "shapes": []}
print(f"flush {out['flush_us']:.1f} us", flush=True)
gen = torch.Generator().manual_seed(20240901)
for name, op, prm in P.attention_shapes(sweep):
    if op != "dense_mha":
        continue
    fn, how = P.setup_dense(prm, dev, gen)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); once = time.perf_counter() - t0
    n = max(20, min(400, int(0.2 / once)))
    a, b = [], []
    for _ in range(3):
        a.append(timed(fn, n, False)); b.append(timed(fn, n, True))
    cpu = cpu_launch(fn, 30)
    row = {"name": name, "calls": n, "plain_us": a, "gated_us": b, "cpu_flush_to_return_us": cpu}
    out["shapes"].append(row)
    print(f"{name:58s} plain {statistics.median(a):8.1f} gated {statistics.median(b):8.1f} "
          f"gated/plain {statistics.median(b) / statistics.median(a):.3f} cpu {cpu:6.1f} us", flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
