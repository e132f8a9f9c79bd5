#!/usr/bin/env python3
"""Plot mla-bench sweeps: one figure per operation, throughput against the size that the sweep varies.

    scripts/plot_sweep.py BENCH.json [BENCH.json ...] [--peer PEER.json ...] --out DIR
    scripts/plot_sweep.py BENCH.json --table            # the same series as Markdown, no plotting

BENCH.json: mla-bench's Google Benchmark output (`--benchmark_out=... --benchmark_out_format=json`).
PEER.json: `scripts/peer_torch.py --out` (cache-path or --attention timings), drawn dashed.

A benchmark name is OPERATION/key:value/.../[manual_time]. Per operation the x axis is the numeric
parameter with the most distinct values (ties: the one named last; --x KEY chooses), and every
combination of the other parameters is one series (one per input file when several are given).
Operations whose series all have a single point (a sweep that moves one parameter at a time around
a centre, as the sparse MQA sweep does) get a bar per benchmark instead.

The y value is the benchmark's own counter, taken from its median aggregate (else the mean over its
iterations): by default `pct_of_copy_bw` for the memory-bound cache-path operations (pack, gather,
convert), `flops_per_second` (TFLOP/s) where the benchmark counts FLOPs, else `bytes_per_second`,
else the time. --metric chooses: pct_of_copy_bw, flops_per_second, bytes_per_second, time.
The percentages are each run's own: against the copy rate that run (or the peer) measured.

Writes DIR/OPERATION.FORMAT (png or svg) and prints the files written. Exit status: 0 written,
2 bad usage, 3 unreadable or malformed input (the message names the file and the problem).
Needs matplotlib for the figures (scripts/requirements.txt); --table needs only the standard library.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_reports import BadInput, as_number, group_benchmarks, load_json, run_type  # noqa: E402

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3

METRICS = ("pct_of_copy_bw", "flops_per_second", "bytes_per_second", "time")
AXIS_LABELS = {
    "pct_of_copy_bw": "% of the measured copy bandwidth",
    "flops_per_second": "TFLOP/s",
    "bytes_per_second": "GB/s",
    "time": "time (us)",
}
SCALE = {"pct_of_copy_bw": 1.0, "flops_per_second": 1e-12, "bytes_per_second": 1e-9, "time": 1e6}
MEMORY_BOUND_OPS = frozenset(("pack", "gather", "convert"))
# Google Benchmark's own suffixes of a run name, not sweep parameters.
GB_SUFFIXES = re.compile(r"^(manual_time|real_time|process_time|(iterations|repeats|threads|min_time|min_warmup_time):.*)$")
TIME_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True)
class Point:
    """One benchmark of one input: its parsed name and its metrics (SI units; time in seconds)."""

    name: str
    op: str
    params: tuple[tuple[str, str], ...]  # (key, value) in name order; a bare component has key "#i"
    metrics: dict[str, float]
    source: str  # the input's label


@dataclass
class Series:
    label: str
    source: str  # the input's label ("" for a single BENCH file)
    peer: bool
    key: tuple  # the parameters other than x: one colour per key, ours solid and the peer's dashed
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def split_name(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """OPERATION and its parameters from a run name, without Google Benchmark's suffixes."""
    parts = [part for part in name.split("/") if part]
    if not parts:
        raise BadInput(f"benchmark name {name!r} is empty")
    params: list[tuple[str, str]] = []
    for index, part in enumerate(parts[1:], start=1):
        if GB_SUFFIXES.match(part):
            continue
        key, sep, value = part.partition(":")
        params.append((key, value) if sep else (f"#{index}", part))
    return parts[0], tuple(params)


def finite(value: Any) -> float | None:
    number = as_number(value)
    return number if number is not None and math.isfinite(number) else None


def bench_metrics(entries: list[dict[str, Any]], where: str) -> dict[str, float]:
    """The counters of one benchmark: its median aggregate's, else the mean over its iterations."""
    if any(entry.get("error_occurred") for entry in entries):
        return {}
    median = [e for e in entries if run_type(e) == "aggregate" and e.get("aggregate_name") == "median"]
    rows = median[:1] or [e for e in entries if run_type(e) == "iteration"]
    if not rows:
        raise BadInput(f"{where}: has neither a median aggregate nor iterations")
    metrics: dict[str, float] = {}
    for key in ("pct_of_copy_bw", "flops_per_second", "bytes_per_second"):
        values = [finite(row.get(key)) for row in rows]
        if values and all(v is not None for v in values):
            metrics[key] = sum(values) / len(values)
    times = []
    for row in rows:
        value, unit = finite(row.get("real_time")), row.get("time_unit", "ns")
        if value is None or value <= 0 or unit not in TIME_UNIT_S:
            raise BadInput(f"{where}: \"real_time\" / \"time_unit\" {row.get('real_time')!r} / {unit!r} unusable")
        times.append(value * TIME_UNIT_S[unit])
    metrics["time"] = sum(times) / len(times)
    return metrics


def load_bench(path: Path, label: str) -> list[Point]:
    document = load_json(path, "benchmark")
    if "benchmarks" not in document or "context" not in document:
        raise BadInput(f"benchmark file {path} is not a Google Benchmark output (no \"benchmarks\" and \"context\")")
    points = []
    for run_name, entries in group_benchmarks(document, f"benchmark file {path}").items():
        op, params = split_name(run_name)
        metrics = bench_metrics(entries, f"benchmark file {path}: {run_name!r}")
        if metrics:
            points.append(Point(run_name, op, params, metrics, label))
    return points


def load_peer(path: Path, label: str) -> list[Point]:
    """peer_torch.py's results: {"timing" or "attention_timing": {"results": [...]}}."""
    document = load_json(path, "peer")
    blocks = [document[key] for key in ("timing", "attention_timing") if isinstance(document.get(key), dict)]
    if not blocks:
        raise BadInput(f"peer file {path} has no \"timing\" or \"attention_timing\" (is it peer_torch.py --out?)")
    points = []
    for block in blocks:
        results = block.get("results")
        if not isinstance(results, list):
            raise BadInput(f"peer file {path}: \"results\" is missing or not a list")
        for index, result in enumerate(results):
            where = f"peer file {path}: results[{index}]"
            if not isinstance(result, dict) or not isinstance(result.get("name"), str):
                raise BadInput(f"{where} is not an object with a \"name\"")
            median = finite(result.get("median_s"))
            if median is None or median <= 0:
                raise BadInput(f"{where}: \"median_s\" {result.get('median_s')!r} must be a number > 0")
            metrics = {"time": median}
            for key in ("pct_of_copy_bw", "flops_per_second", "bytes_per_second"):
                value = finite(result.get(key))
                if value is not None:
                    metrics[key] = value
            op, params = split_name(result["name"])
            points.append(Point(result["name"], op, params, metrics, label))
    return points


def numeric(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def choose_x(points: list[Point], wanted: str | None) -> str | None:
    """The x parameter of one operation's points: `wanted` when they all have it numerically, else
    the numeric parameter with the most distinct values (ties: the last in the name)."""
    keys: OrderedDict[str, set[float]] = OrderedDict()
    for point in points:
        for key, value in point.params:
            keys.setdefault(key, set())
    for key in list(keys):
        values = [numeric(dict(p.params).get(key, "")) for p in points]
        if any(v is None for v in values):
            del keys[key]
        else:
            keys[key] = set(values)  # type: ignore[arg-type]
    if wanted is not None:
        return wanted if wanted in keys else None
    best, count = None, 1
    for key, values in keys.items():
        if len(values) >= count and len(values) > 1:
            best, count = key, len(values)
    return best


def choose_metric(op: str, points: list[Point], wanted: str) -> str:
    if wanted != "auto":
        return wanted
    has = lambda key: all(key in p.metrics for p in points)  # noqa: E731
    if op in MEMORY_BOUND_OPS and has("pct_of_copy_bw"):
        return "pct_of_copy_bw"
    if has("flops_per_second") and any(p.metrics["flops_per_second"] > 0 for p in points):
        return "flops_per_second"
    if has("bytes_per_second"):
        return "bytes_per_second"
    return "time"


def build_series(points: list[Point], x_key: str | None, metric: str, peers: set[str]) -> list[Series]:
    """Series of one operation, in first-seen order; x sorted within each."""
    series: OrderedDict[tuple[str, tuple], Series] = OrderedDict()
    for point in points:
        if metric not in point.metrics:
            continue
        rest = tuple((k, v) for k, v in point.params if k != x_key)
        described = "/".join(v if k.startswith("#") else f"{k}:{v}" for k, v in rest) or point.op
        label = f"{point.source}: {described}" if point.source else described
        entry = series.setdefault((point.source, rest), Series(label, point.source, point.source in peers, rest))
        entry.xs.append(numeric(dict(point.params)[x_key]) if x_key else float(len(entry.xs)))
        entry.ys.append(point.metrics[metric] * SCALE[metric])
        entry.names.append(point.name)
    for entry in series.values():
        order = sorted(range(len(entry.xs)), key=lambda i: entry.xs[i])
        entry.xs = [entry.xs[i] for i in order]
        entry.ys = [entry.ys[i] for i in order]
        entry.names = [entry.names[i] for i in order]
    return list(series.values())


def by_operation(points: Iterable[Point]) -> OrderedDict[str, list[Point]]:
    ops: OrderedDict[str, list[Point]] = OrderedDict()
    for point in points:
        ops.setdefault(point.op, []).append(point)
    return ops


def format_value(value: float) -> str:
    return f"{value:.4g}"


def format_x(value: float) -> str:
    """A sweep size as written in the benchmark name: integers whole."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else format_value(value)


def render_table(op: str, x_key: str | None, metric: str, series: list[Series]) -> str:
    lines = [f"### {op}: {AXIS_LABELS[metric]}" + (f" against {x_key}" if x_key else ""), ""]
    lines += ["| series | " + ("x | " if x_key else "benchmark | ") + "value |", "|---|---|---|"]
    for entry in series:
        for x, y, name in zip(entry.xs, entry.ys, entry.names):
            where = format_x(x) if x_key else name
            lines.append(f"| {entry.label} | {where} | {format_value(y)} |")
    return "\n".join(lines) + "\n"


def use_bars(x_key: str | None, series: list[Series]) -> bool:
    """Bars (one per benchmark) unless most series are lines: a sweep that moves one parameter at a
    time around a centre gives mostly single-point series."""
    if x_key is None:
        return True
    return sum(len(entry.xs) > 1 for entry in series) * 2 <= len(series)


def plot_operation(op: str, x_key: str | None, metric: str, series: list[Series], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    keys: OrderedDict[tuple, int] = OrderedDict()
    for entry in series:
        keys.setdefault(entry.key, len(keys))
    if not use_bars(x_key, series):
        fig, ax = plt.subplots(figsize=(8, 5))
        for entry in series:
            colour = colours[keys[entry.key] % len(colours)]
            ax.plot(entry.xs, entry.ys, "--" if entry.peer else "-", marker="o", color=colour, label=entry.label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(x_key)
        ax.set_ylabel(AXIS_LABELS[metric])
        ax.legend(fontsize=7)
    else:
        # One group of bars per benchmark (name without the source), one bar per input in the group.
        groups: OrderedDict[str, dict[str, float]] = OrderedDict()
        sources: OrderedDict[str, bool] = OrderedDict()
        for entry in series:
            sources.setdefault(entry.source, entry.peer)
            for name, y in zip(entry.names, entry.ys):
                groups.setdefault(re.sub(r"/manual_time$", "", name), {})[entry.source] = y
        height = 0.8 / len(sources)
        fig, ax = plt.subplots(figsize=(9, max(3.0, 0.3 * len(groups) * len(sources) + 1.2)))
        for index, (source, peer) in enumerate(sources.items()):
            rows = [(g, values[source]) for g, values in enumerate(groups.values()) if source in values]
            ax.barh([g + index * height for g, _ in rows], [y for _, y in rows], height=height,
                    hatch="//" if peer else None, color=colours[index % len(colours)], label=source or "ours")
        ax.set_yticks([g + 0.4 - height / 2 for g in range(len(groups))], list(groups), fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(AXIS_LABELS[metric])
        if len(sources) > 1:
            ax.legend(fontsize=7)
    ax.set_title(op)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 (usage), as argparse does, with our prefix
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"plot_sweep.py: error: {message}\n")


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("bench", nargs="+", type=Path, help="mla-bench JSON output(s)")
    parser.add_argument("--peer", action="append", default=[], type=Path, help="peer_torch.py --out JSON (repeatable)")
    parser.add_argument("--label", action="append", default=[],
                        help="a label per BENCH file, in order (default: the file names when several are given)")
    parser.add_argument("--out", type=Path, help="directory for the figures (created)")
    parser.add_argument("--table", action="store_true", help="print the series as Markdown instead of plotting")
    parser.add_argument("--format", choices=("png", "svg"), default="png")
    parser.add_argument("--metric", choices=("auto",) + METRICS, default="auto")
    parser.add_argument("--x", dest="x_key", help="the parameter for the x axis (default: chosen per operation)")
    parser.add_argument("--filter", default="", help="only benchmarks whose name matches this regex")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.table and args.out is None:
        build_parser().error("give --out DIR (or --table)")
    if args.label and len(args.label) != len(args.bench):
        build_parser().error(f"{len(args.label)} --label for {len(args.bench)} BENCH files")
    try:
        pattern = re.compile(args.filter)
    except re.error as error:
        build_parser().error(f"--filter: {error}")
    try:
        labels = args.label or ([path.stem for path in args.bench] if len(args.bench) > 1 else [""])
        points = [p for path, label in zip(args.bench, labels) for p in load_bench(path, label)]
        peer_labels = ["peer"] if len(args.peer) == 1 else [f"peer {path.stem}" for path in args.peer]
        points += [p for path, label in zip(args.peer, peer_labels) for p in load_peer(path, label)]
    except BadInput as error:
        print(f"plot_sweep.py: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    points = [p for p in points if pattern.search(p.name)]
    if not points:
        print("plot_sweep.py: no benchmark matches" + (f" --filter {args.filter!r}" if args.filter else ""),
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.out is not None and not args.table:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            print(f"plot_sweep.py: cannot create --out {args.out}: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
    for op, op_points in by_operation(points).items():
        ours = [p for p in op_points if p.source not in peer_labels]
        x_key = choose_x(ours or op_points, args.x_key)
        metric = choose_metric(op, ours or op_points, args.metric)
        series = build_series(op_points, x_key, metric, set(peer_labels))
        if not series:
            print(f"plot_sweep.py: {op}: no benchmark has {metric}; skipped", file=sys.stderr)
            continue
        if args.table:
            print(render_table(op, x_key, metric, series))
            continue
        out = args.out / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', op)}.{args.format}"
        plot_operation(op, x_key, metric, series, out)
        print(out)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
