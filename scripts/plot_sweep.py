#!/usr/bin/env python3
"""Plot mla-bench sweeps: one figure per operation, throughput against the size that the sweep varies.

    scripts/plot_sweep.py BENCH.json [BENCH.json ...] [--peer PEER.json ...] --out DIR
    scripts/plot_sweep.py BENCH.json --table            # the same series as Markdown, no plotting

BENCH.json: mla-bench's Google Benchmark output (`--benchmark_out=... --benchmark_out_format=json`).
PEER.json: `scripts/peer_timing.py --out` (Google Benchmark's format, with mla-bench's names and
counters), drawn dashed; the earlier peer format (`peer_torch.py --out`: "timing" /
"attention_timing" results, as in docs/results/) is read too.

A benchmark name is OPERATION/key:value/.../[manual_time]. Per operation the x axis is the numeric
parameter with the most distinct values (ties: the one named last; --x KEY chooses), and every
combination of the other parameters is one series (one per input file when several are given).
Operations whose series mostly have a single point (a sweep that moves one parameter at a time
around a centre, as the sparse MQA sweep does) get a group of bars per benchmark instead. The x axis
is logarithmic (base 2) when every x is positive.

The y value is the benchmark's own counter, taken from its median aggregate (else the mean over its
iterations, else its mean aggregate): by default `pct_of_copy_bw` for the memory-bound cache-path
operations (pack, gather, convert), `flops_per_second` (TFLOP/s) where the benchmark counts FLOPs,
else `bytes_per_second`, else the time. --metric chooses: pct_of_copy_bw, flops_per_second,
bytes_per_second, time. The percentages are each run's own: against the copy rate that run (or the
peer) measured. Benchmarks that failed (error_occurred; a peer's "error") are left out, with a note.
The literals NaN and Infinity, which Google Benchmark writes for a statistic it cannot compute
(the cv aggregate of a counter whose mean is 0, such as late_queue_calls), are accepted in BENCH
files and in PEER files of that format (not in peer_torch.py's); a time or counter that is read
and is NaN or infinite is an error naming the entry.

Writes DIR/OPERATION.FORMAT (png or svg) and prints the files written. Exit status: 0 written,
2 bad usage, 3 unreadable or malformed input, or nothing to draw (the message names the file, the
field and the problem). Needs matplotlib for the figures (scripts/requirements.txt); --table needs
only the standard library.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_reports import (  # noqa: E402
    BadInput, as_number, at_entry, centre_rows, group_benchmarks, load_json, nonfinite_text, real_time_ns)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3

COUNTERS = ("pct_of_copy_bw", "flops_per_second", "bytes_per_second")
METRICS = COUNTERS + ("time",)
AXIS_LABELS = {
    "pct_of_copy_bw": "% of the measured copy bandwidth",
    "flops_per_second": "TFLOP/s",
    "bytes_per_second": "GB/s",
    "time": "time (us)",
}
SCALE = {"pct_of_copy_bw": 1.0, "flops_per_second": 1e-12, "bytes_per_second": 1e-9, "time": 1e6}
MEMORY_BOUND_OPS = frozenset(("pack", "gather", "convert"))
# Google Benchmark's own suffixes of a run name that do not tell benchmarks apart (timing method,
# fixed iteration counts and times). threads:N and repeats:N do: they stay parameters.
GB_SUFFIXES = re.compile(r"^(manual_time|real_time|process_time|(iterations|min_time|min_warmup_time):.*)$")
MAX_BARS = 400  # beyond this a bar chart is unreadable (and past matplotlib's image size)


class Usage(Exception):
    """A usage error found after parsing (exit 2)."""


@dataclass(frozen=True)
class Point:
    """One benchmark of one input: its parsed name and its metrics (SI units; time in seconds)."""

    op: str
    params: tuple[tuple[str, str], ...]  # (key, value) in name order; a bare component has key "#i"
    metrics: dict[str, float]
    source: str  # the input's label ("" for a single BENCH file)
    peer: bool
    where: str  # file and benchmark, for messages

    @property
    def display(self) -> str:
        return "/".join([self.op] + [v if k.startswith("#") else f"{k}:{v}" for k, v in self.params])


@dataclass
class Series:
    label: str
    source: str
    peer: bool
    key: tuple  # the parameters other than x: one colour per key, ours solid and the peer's dashed
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def note(message: str) -> None:
    print(f"plot_sweep.py: {message}", file=sys.stderr)


def split_name(name: str, where: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """OPERATION and its parameters from a run name, without Google Benchmark's timing suffixes."""
    parts = [part for part in name.split("/") if part]
    if not parts:
        raise BadInput(f"{where}: benchmark name {name!r} is empty")
    params: list[tuple[str, str]] = []
    for index, part in enumerate(parts[1:], start=1):
        if GB_SUFFIXES.match(part):
            continue
        key, sep, value = part.partition(":")
        params.append((key, value) if sep else (f"#{index}", part))
    return parts[0], tuple(params)


def counter(row: dict[str, Any], key: str, where: str) -> float | None:
    """A rate counter: absent is None; present, it must be a finite number >= 0 (NaN, which Google
    Benchmark writes for a statistic it cannot compute, is an error: it cannot be drawn)."""
    if key not in row:
        return None
    number = as_number(row[key])
    if number is None or number < 0:
        raise BadInput(f"{where}: \"{key}\" is {nonfinite_text(row[key])}, not a finite number >= 0")
    return number


def bench_metrics(name: str, entries: list[dict[str, Any]], where: str) -> dict[str, float] | None:
    """The counters of one benchmark, from the entries compare_reports.py reads its time from
    (centre_rows); None when the benchmark failed."""
    if any(entry.get("error_occurred") for entry in entries):
        return None
    rows, _ = centre_rows(name, entries, where)
    metrics: dict[str, float] = {}
    for key in COUNTERS:
        values = [counter(row, key, at_entry(where, row)) for row in rows]
        if any(v is not None for v in values):
            if any(v is None for v in values):
                raise BadInput(f"{where}: \"{key}\" is missing in some of its iterations")
            metrics[key] = sum(values) / len(values)  # type: ignore[arg-type]
    metrics["time"] = sum(real_time_ns(row, at_entry(where, row)) for row in rows) / len(rows) * 1e-9
    return metrics


def is_benchmark_output(document: dict[str, Any]) -> bool:
    return "benchmarks" in document and "context" in document


def benchmark_points(document: dict[str, Any], path: Path, label: str, role: str, peer: bool) -> list[Point]:
    """The points of a Google Benchmark output (mla-bench's, or peer_timing.py's with peer)."""
    points, failed = [], 0
    for run_name, entries in group_benchmarks(document, f"{role} file {path}").items():
        where = f"{role} file {path}: {run_name!r}"
        op, params = split_name(run_name, where)
        metrics = bench_metrics(run_name, entries, where)
        if metrics is None:
            failed += 1
        else:
            points.append(Point(op, params, metrics, label, peer, where))
    if failed:
        note(f"{role} file {path}: {failed} failed benchmark(s) (error_occurred) left out")
    return points


def load_bench(path: Path, label: str) -> list[Point]:
    document = load_json(path, "benchmark", google_benchmark=True)
    if not is_benchmark_output(document):
        raise BadInput(f"benchmark file {path} is not a Google Benchmark output (no \"benchmarks\" and \"context\")")
    return benchmark_points(document, path, label, "benchmark", False)


def load_peer(path: Path, label: str) -> list[Point]:
    """peer_timing.py's Google Benchmark output, or the earlier peer_torch.py results:
    {"timing" or "attention_timing": {"results": [...]}}."""
    document = load_json(path, "peer", google_benchmark=True)
    if is_benchmark_output(document):
        return benchmark_points(document, path, label, "peer", True)
    document = load_json(path, "peer")  # not Google Benchmark's format: NaN and Infinity literals refused
    blocks = [(key, document[key]) for key in ("timing", "attention_timing") if isinstance(document.get(key), dict)]
    if not blocks:
        raise BadInput(f"peer file {path} is not a Google Benchmark output (no \"benchmarks\" and \"context\": "
                       f"peer_timing.py --out) and has no \"timing\" or \"attention_timing\" (peer_torch.py --out)")
    points, failed = [], 0
    for key, block in blocks:
        results = block.get("results")
        if not isinstance(results, list):
            raise BadInput(f"peer file {path}: \"{key}.results\" is missing or not a list")
        for index, result in enumerate(results):
            where = f"peer file {path}: {key}.results[{index}]"
            if not isinstance(result, dict) or not isinstance(result.get("name"), str):
                raise BadInput(f"{where} is not an object with a \"name\"")
            if result.get("error") is not None:  # peer_torch.py's record of a shape it could not run
                failed += 1
                continue
            median = result.get("median_s")
            number = as_number(median)
            if number is None or number <= 0:
                raise BadInput(f"{where}: \"median_s\" is {nonfinite_text(median)}, not a number > 0")
            metrics = {"time": number}
            for name in COUNTERS:
                value = counter(result, name, where)
                if value is not None:
                    metrics[name] = value
            op, params = split_name(result["name"], where)
            points.append(Point(op, params, metrics, label, True, where))
    if failed:
        note(f"peer file {path}: {failed} shape(s) the peer could not run left out")
    return points


def numeric(value: str | None) -> float | None:
    if value is None or not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", value):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def numeric_keys(points: list[Point]) -> OrderedDict[str, set[float]]:
    """The parameters every point has with a numeric value, each with its distinct values."""
    keys: OrderedDict[str, set[float]] = OrderedDict()
    for point in points:
        for key, _ in point.params:
            keys.setdefault(key, set())
    for key in list(keys):
        values = [numeric(dict(p.params).get(key)) for p in points]
        if any(v is None for v in values):
            del keys[key]
        else:
            keys[key] = set(values)  # type: ignore[arg-type]
    return keys


def choose_x(op: str, points: list[Point], wanted: str | None) -> str | None:
    """The x parameter of one operation's points: `wanted` when they all have it numerically, else
    the numeric parameter with the most distinct values (ties: the last in the name)."""
    keys = numeric_keys(points)
    if wanted is not None:
        if wanted in keys:
            return wanted
        note(f"{op}: not every benchmark has a numeric {wanted!r}; x chosen automatically")
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


def build_series(points: list[Point], x_key: str | None, metric: str) -> list[Series]:
    """Series of one operation, in first-seen order; x sorted within each. Points without the
    metric, or (peers) without a numeric x, are left out with a note; one source naming a
    benchmark twice (names that differ only by timing suffixes) is an error."""
    series: OrderedDict[tuple[str, bool, tuple], Series] = OrderedDict()
    seen: set[tuple[str, bool, str, tuple]] = set()
    for point in points:
        identity = (point.source, point.peer, point.op, point.params)
        if identity in seen:
            raise BadInput(f"{point.where}: a second benchmark named {point.display!r} (timing suffixes aside)")
        seen.add(identity)
        if metric not in point.metrics:
            note(f"{point.where}: no {metric!r}; left out")
            continue
        x = numeric(dict(point.params).get(x_key)) if x_key else None
        if x_key and x is None:
            note(f"{point.where}: no numeric {x_key!r} (the x axis); left out")
            continue
        rest = tuple((k, v) for k, v in point.params if k != x_key)
        described = "/".join(v if k.startswith("#") else f"{k}:{v}" for k, v in rest) or point.op
        label = f"{point.source}: {described}" if point.source else described
        entry = series.setdefault((point.source, point.peer, rest), Series(label, point.source, point.peer, rest))
        entry.xs.append(x if x is not None else float(len(entry.xs)))
        entry.ys.append(point.metrics[metric] * SCALE[metric])
        entry.names.append(point.display)
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


def cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_table(op: str, x_key: str | None, metric: str, series: list[Series]) -> str:
    lines = [f"### {cell(op)}: {AXIS_LABELS[metric]}" + (f" against {cell(x_key)}" if x_key else ""), ""]
    lines += ["| series | " + ("x | " if x_key else "benchmark | ") + "value |", "|---|---|---|"]
    for entry in series:
        for x, y, name in zip(entry.xs, entry.ys, entry.names):
            where = format_x(x) if x_key else name
            lines.append(f"| {cell(entry.label)} | {cell(where)} | {format_value(y)} |")
    return "\n".join(lines) + "\n"


NO_MATPLOTLIB = "drawing figures needs matplotlib"


def use_bars(x_key: str | None, series: list[Series]) -> bool:
    """Bars (one group per benchmark) unless most series are lines: a sweep that moves one parameter
    at a time around a centre gives mostly single-point series."""
    if x_key is None:
        return True
    return sum(len(entry.xs) > 1 for entry in series) * 2 <= len(series)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend; BadInput (exit 3) when matplotlib is not installed.
    Also used by plot_routes.py."""
    try:
        import matplotlib
    except ImportError:
        raise BadInput(f"{NO_MATPLOTLIB} (scripts/install_deps.sh installs it; --table needs nothing more)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig: Any, out: Path, fmt: str) -> None:
    """Lays out, writes and closes a figure; a write that fails is BadInput naming the file."""
    import matplotlib.pyplot as plt
    try:
        fig.tight_layout()
        fig.savefig(out, format=fmt)
    except (OSError, ValueError) as error:
        raise BadInput(f"cannot write {out}: {error}") from None
    finally:
        plt.close(fig)


def plot_operation(op: str, x_key: str | None, metric: str, series: list[Series], out: Path, fmt: str) -> None:
    plt = pyplot()
    keys: OrderedDict[tuple, int] = OrderedDict()
    for entry in series:
        keys.setdefault(entry.key, len(keys))
    colours = list(plt.get_cmap("tab10" if len(keys) <= 10 else "tab20").colors)
    if not use_bars(x_key, series):
        # Colour: the parameters; line and marker: the input (peers dashed), so that two runs of
        # one sweep and the peer of each series can be told apart.
        styles = [("-", "o"), ("-.", "s"), (":", "^"), ((0, (5, 1, 1, 1)), "D")]
        inputs: OrderedDict[tuple[str, bool], int] = OrderedDict()
        for entry in series:
            if not entry.peer:
                inputs.setdefault((entry.source, False), len(inputs))
        fig, ax = plt.subplots(figsize=(8, 5))
        for entry in series:
            colour = colours[keys[entry.key] % len(colours)]
            line, marker = ("--", "x") if entry.peer else styles[inputs[(entry.source, False)] % len(styles)]
            ax.plot(entry.xs, entry.ys, linestyle=line, marker=marker, color=colour, label=entry.label)
        if all(x > 0 for entry in series for x in entry.xs):
            ax.set_xscale("log", base=2)
        ax.set_xlabel(x_key)
        ax.set_ylabel(AXIS_LABELS[metric])
        ax.legend(fontsize=7)
    else:
        # One group of bars per benchmark, one bar per input in the group.
        groups: OrderedDict[str, dict[tuple[str, bool], float]] = OrderedDict()
        sources: OrderedDict[tuple[str, bool], None] = OrderedDict()
        for entry in series:
            sources.setdefault((entry.source, entry.peer), None)
            for name, y in zip(entry.names, entry.ys):
                groups.setdefault(name, {})[(entry.source, entry.peer)] = y
        if len(groups) * len(sources) > MAX_BARS:
            raise BadInput(f"{op}: {len(groups) * len(sources)} bars are too many for one figure "
                           f"(at most {MAX_BARS}); choose benchmarks with --filter")
        height = 0.8 / len(sources)
        fig, ax = plt.subplots(figsize=(9, max(3.0, 0.3 * len(groups) * len(sources) + 1.2)))
        for index, source in enumerate(sources):
            rows = [(g, values[source]) for g, values in enumerate(groups.values()) if source in values]
            ax.barh([g + index * height for g, _ in rows], [y for _, y in rows], height=height,
                    hatch="//" if source[1] else None, color=colours[index % len(colours)],
                    label=source[0] or ("peer" if source[1] else "ours"))
        ax.set_yticks([g + 0.4 - height / 2 for g in range(len(groups))], list(groups), fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(AXIS_LABELS[metric])
        if len(sources) > 1:
            ax.legend(fontsize=7)
    ax.set_title(op)
    ax.grid(True, alpha=0.3)
    save_figure(fig, out, fmt)


def unique_labels(paths: list[Path], explicit: list[str], prefix: str) -> list[str]:
    """A label per input: the explicit ones (which must differ), else the file names, made unique
    with their folders and then a number."""
    if explicit:
        if len(set(explicit)) != len(explicit):
            raise Usage("the --label values must differ")
        return explicit
    if len(paths) == 1:
        return [prefix.strip()]
    labels = [f"{prefix}{path.stem}" for path in paths]
    if len(set(labels)) != len(labels):
        labels = [f"{prefix}{path.parent.name}/{path.stem}" for path in paths]
    if len(set(labels)) != len(labels):
        labels = [f"{label} #{index + 1}" for index, label in enumerate(labels)]
    return labels


def figure_name(op: str, used: set[str], fmt: str) -> str:
    """A file name for the operation's figure: safe characters, not starting with a dot, and not one
    this run has already written (another operation whose name maps to the same one)."""
    stem = re.sub(r"[^A-Za-z0-9_-]", "_", op) or "_"
    name, index = f"{stem}.{fmt}", 2
    while name in used:
        name, index = f"{stem}-{index}.{fmt}", index + 1
    used.add(name)
    return name


class ArgumentParser(argparse.ArgumentParser):
    """Exit 2 (usage) on a bad command line, as argparse does, the message prefixed with the
    program's name. Also used by plot_routes.py."""

    def error(self, message: str) -> None:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def make_out_dir(out: Path | None) -> None:
    """Creates the --out directory (and its parents) when one is given; BadInput when it cannot."""
    if out is None:
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadInput(f"cannot create --out {out}: {error}") from None


def run_command(script: str, body: Callable[[], None]) -> int:
    """The plotting scripts' exit convention: EXIT_OK when body returns, EXIT_BAD_INPUT with the
    reason on stderr (after "script: ") when it raises BadInput."""
    try:
        body()
    except BadInput as error:
        print(f"{script}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("bench", nargs="+", type=Path, help="mla-bench JSON output(s)")
    parser.add_argument("--peer", action="append", default=[], type=Path,
                        help="peer_timing.py --out JSON, or an earlier peer_torch.py --out (repeatable)")
    parser.add_argument("--label", action="append", default=[],
                        help="a label per BENCH file, in order (default: the file names when several are given)")
    output = parser.add_mutually_exclusive_group(required=True)
    output.add_argument("--out", type=Path, help="directory for the figures (created)")
    output.add_argument("--table", action="store_true", help="print the series as Markdown instead of plotting")
    parser.add_argument("--format", choices=("png", "svg"), default="png")
    parser.add_argument("--metric", choices=("auto",) + METRICS, default="auto")
    parser.add_argument("--x", dest="x_key", help="the parameter for the x axis (default: chosen per operation)")
    parser.add_argument("--filter", default="", help="only benchmarks whose name matches this regex")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.label and len(args.label) != len(args.bench):
        parser.error(f"{len(args.label)} --label for {len(args.bench)} BENCH files")
    try:
        pattern = re.compile(args.filter)
    except re.error as error:
        parser.error(f"--filter: {error}")
    try:
        labels = unique_labels(args.bench, args.label, "")
        peer_labels = unique_labels(args.peer, [], "peer ") if args.peer else []
        if set(labels) & set(peer_labels):
            raise Usage(f"a --label may not be a peer's label ({', '.join(sorted(set(labels) & set(peer_labels)))})")
    except Usage as error:
        parser.error(str(error))
    def draw() -> None:
        points = [p for path, label in zip(args.bench, labels) for p in load_bench(path, label)]
        points += [p for path, label in zip(args.peer, peer_labels) for p in load_peer(path, label)]
        points = [p for p in points if pattern.search(p.display)]
        if not points:
            raise BadInput("no benchmark to draw" + (f" matches --filter {args.filter!r}" if args.filter else ""))
        operations = by_operation(points)
        if args.x_key is not None and not any(args.x_key in numeric_keys(ops) for ops in operations.values()):
            parser.error(f"--x {args.x_key!r}: no operation has it as a numeric parameter in every benchmark")
        make_out_dir(args.out)
        drawn, used = 0, set()
        for op, op_points in operations.items():
            ours = [p for p in op_points if not p.peer]
            x_key = choose_x(op, ours or op_points, args.x_key)
            metric = choose_metric(op, ours or op_points, args.metric)
            series = build_series(op_points, x_key, metric)
            if not series:
                note(f"{op}: no benchmark has {metric!r}; nothing drawn")
                continue
            drawn += 1
            if args.table:
                print(render_table(op, x_key, metric, series))
                continue
            out = args.out / figure_name(op, used, args.format)
            plot_operation(op, x_key, metric, series, out, args.format)
            print(out)
        if not drawn:
            raise BadInput(f"no benchmark has {args.metric!r}: nothing drawn")

    return run_command("plot_sweep.py", draw)


if __name__ == "__main__":
    sys.exit(main())
