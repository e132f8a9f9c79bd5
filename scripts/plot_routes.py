#!/usr/bin/env python3
"""The route question in numbers: dense vs forced-sparse prefill, in time and in accuracy.

    scripts/plot_routes.py routes BENCH.json --table          # faster route, ratio, crossover (Markdown)
    scripts/plot_routes.py routes BENCH.json --out DIR        # DIR/routes.FORMAT: time ratio against P
    scripts/plot_routes.py drift REPORT.json --table [--layers 1,2,4,8]   # error of each route per layer
    scripts/plot_routes.py drift REPORT.json --out DIR        # DIR/drift-SCENARIO.FORMAT

routes: BENCH.json is mla-bench's Google Benchmark output of the routes sweep
(`mla-bench --sweep routes --benchmark_out=BENCH.json --benchmark_out_format=json`). Its benchmarks
route/dense/H:H/K:K/prefill:P and route/sparse/H:H/K:K/prefill:P time one forward step of the same
batch through the two routes (docs/benchmarks.md, "Routes"); other benchmarks are ignored. Each
time is the benchmark's median aggregate (else the mean of its iterations, else its mean
aggregate), as scripts/compare_reports.py reads it. Per top-k K, heads H and prefill length P:
both times, the ratio sparse / dense (above 1: the dense route is faster), the faster route, and
per (K, H) the crossover: the smallest P at which the faster route differs from the faster route
at the smallest P both were timed at ("none" when one route is faster at every such P). Above K
only the sparse route is timed (the production rule routes such prefills sparse): those rows
have no ratio. The figure draws the ratio against P, one line per (K, H). The literals NaN and
Infinity, which Google Benchmark writes for a statistic it cannot compute (the cv aggregate of a
counter whose mean is 0, such as late_queue_calls), are accepted in BENCH.json; a time that is
read and is NaN or infinite is an error naming the entry.

drift: REPORT.json is an mla-check report with `drift` checks (docs/drift.md). Per scenario and
route, per layer: the cosine difference and the largest absolute error of the layer output and of
the residual stream against the reference, and their bounds. The figure has one panel for the
layer outputs and one for the stream: cosine difference against layer, one line per route, the
bounds dashed. A report holds no NaN or Infinity literal (mla-check writes null): one that does is
refused.

Exit status: 0 written, 2 bad usage, 3 unreadable or malformed input, or nothing to show (the
message names the file and the problem). Figures need matplotlib (scripts/requirements.txt);
--table needs only the standard library.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_reports import BadInput, as_number, load_json, parse_benchmarks, parse_report  # noqa: E402
from plot_sweep import ArgumentParser, make_out_dir, pyplot, run_command, save_figure  # noqa: E402


ROUTE_NAME = re.compile(r"^route/(dense|sparse)/H:(\d+)/K:(\d+)/prefill:(\d+)(/.*)?$")
DRIFT_ID = re.compile(r"^drift/(dense|sparse)/layer\[(\d+)\]$")
ROUTES = ("dense", "sparse")


def note(message: str) -> None:
    print(f"plot_routes.py: {message}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Time: the routes sweep


@dataclass
class RoutePoint:
    """One (K, H, P): each route's time in seconds (None: not timed or failed)."""

    topk: int
    heads: int
    prefill: int
    dense: float | None = None
    sparse: float | None = None

    @property
    def ratio(self) -> float | None:
        """sparse / dense: above 1 the dense route is faster."""
        if self.dense is None or self.sparse is None:
            return None
        return self.sparse / self.dense

    @property
    def faster(self) -> str | None:
        ratio = self.ratio
        if ratio is None:
            return None
        return "dense" if ratio > 1.0 else "sparse" if ratio < 1.0 else "equal"


@dataclass
class Crossover:
    topk: int
    heads: int
    below: str | None  # the faster route at the smallest P with both times
    prefill: int | None  # the smallest P where another route is faster; None: no crossover
    compared: int  # prefill lengths with both times


def route_points(path: Path) -> list[RoutePoint]:
    """The route benchmarks of one mla-bench output, by (K, H, P) in ascending order."""
    document = load_json(path, "benchmark", google_benchmark=True)
    if "benchmarks" not in document or "context" not in document:
        raise BadInput(f"benchmark file {path} is not a Google Benchmark output (no \"benchmarks\" and \"context\")")
    bench = parse_benchmarks(document, "benchmark", path)
    points: dict[tuple[int, int, int], RoutePoint] = {}
    failed = 0
    for run_name, timing in bench.timings.items():
        match = ROUTE_NAME.match(run_name)
        if not match:
            continue
        route, heads, topk, prefill = match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4))
        key = (topk, heads, prefill)
        point = points.setdefault(key, RoutePoint(topk, heads, prefill))
        if getattr(point, route) is not None:
            raise BadInput(f"benchmark file {path}: {run_name!r}: a second {route} benchmark for K {topk}, "
                           f"H {heads}, prefill {prefill}")
        if timing.error is not None:
            failed += 1
            continue
        setattr(point, route, timing.center_ns * 1e-9)
    if failed:
        note(f"benchmark file {path}: {failed} failed route benchmark(s) left out")
    if not points:
        raise BadInput(f"benchmark file {path} has no route/... benchmarks (mla-bench --sweep routes)")
    return [points[key] for key in sorted(points)]


def crossovers(points: list[RoutePoint]) -> list[Crossover]:
    groups: dict[tuple[int, int], list[RoutePoint]] = {}
    for point in points:
        groups.setdefault((point.topk, point.heads), []).append(point)
    result = []
    for (topk, heads), group in sorted(groups.items()):
        compared = [p for p in sorted(group, key=lambda p: p.prefill) if p.faster is not None]
        below = compared[0].faster if compared else None
        at = next((p.prefill for p in compared if p.faster != below), None)
        result.append(Crossover(topk, heads, below, at, len(compared)))
    return result


def format_us(seconds: float | None) -> str:
    """Microseconds: 4 significant digits, whole ones from 10,000 on."""
    if seconds is None:
        return "—"
    us = seconds * 1e6
    return f"{us:.4g}" if us < 1e4 else f"{us:.0f}"


def render_routes_table(points: list[RoutePoint]) -> str:
    lines = ["### Route times (forward step, median)", "",
             "| K | H | prefill | dense (us) | sparse (us) | sparse / dense | faster |", "|---|---|---|---|---|---|---|"]
    for p in points:
        ratio = "—" if p.ratio is None else f"{p.ratio:.3f}"
        faster = p.faster or ("sparse only (prefill > K)" if p.prefill > p.topk else "—")
        lines.append(f"| {p.topk} | {p.heads} | {p.prefill} | {format_us(p.dense)} | {format_us(p.sparse)} | "
                     f"{ratio} | {faster} |")
    lines += ["", "### Crossover", "", "| K | H | faster at the smallest prefill | crossover prefill |", "|---|---|---|---|"]
    for c in crossovers(points):
        if c.compared == 0:
            lines.append(f"| {c.topk} | {c.heads} | — | — (no prefill length with both routes) |")
            continue
        at = "none" if c.prefill is None else str(c.prefill)
        lines.append(f"| {c.topk} | {c.heads} | {c.below} | {at} |")
    return "\n".join(lines) + "\n"


def plot_routes(points: list[RoutePoint], out: Path, fmt: str) -> Path:
    plt = pyplot()
    groups: dict[tuple[int, int], list[RoutePoint]] = {}
    for point in points:
        if point.ratio is not None:
            groups.setdefault((point.topk, point.heads), []).append(point)
    if not groups:
        raise BadInput("no prefill length has both routes timed: no ratio to draw")
    fig, ax = plt.subplots(figsize=(8, 5))
    colours = list(plt.get_cmap("tab10" if len(groups) <= 10 else "tab20").colors)
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    topks = sorted({k for k, _ in groups})
    for index, ((topk, heads), group) in enumerate(sorted(groups.items())):
        group.sort(key=lambda p: p.prefill)
        ax.plot([p.prefill for p in group], [p.ratio for p in group], color=colours[index % len(colours)],
                marker=markers[topks.index(topk) % len(markers)], label=f"K {topk}, H {heads}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # a ratio: 2x faster and 2x slower are as far from 1
    ax.set_xlabel("prefill length (new tokens)")
    ax.set_ylabel("sparse time / dense time (above 1: dense faster)")
    ax.set_title("forward step: forced-sparse vs dense prefill")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    path = out / f"routes.{fmt}"
    save_figure(fig, path, fmt)
    return path


# --------------------------------------------------------------------------------------------
# Accuracy: the drift check


@dataclass
class DriftLayer:
    layer: int
    verdict: str
    out_cos: float | None
    out_cos_bound: float | None
    out_abs: float | None
    stream_cos: float | None
    stream_cos_bound: float | None
    stream_abs: float | None


@dataclass
class DriftScenario:
    name: str
    routes: dict[str, list[DriftLayer]] = field(default_factory=dict)


def drift_scenarios(path: Path, wanted: str | None) -> list[DriftScenario]:
    document = load_json(path, "report")
    if "scenarios" not in document:
        raise BadInput(f"report file {path} is not an mla-check report (no \"scenarios\")")
    report = parse_report(document, "report", path)
    found = []
    for scenario in report.scenarios.values():
        if wanted is not None and scenario.name != wanted:
            continue
        drift = DriftScenario(scenario.name)
        for check in scenario.checks.values():
            match = DRIFT_ID.match(check.id)
            if not match:
                continue
            m = check.metrics
            number = lambda key: as_number(m.get(key))  # noqa: E731
            drift.routes.setdefault(match.group(1), []).append(DriftLayer(
                int(match.group(2)), check.verdict, number("cos_diff"), number("cos_tolerance"),
                number("max_abs_err"), number("stream_cos_diff"), number("stream_cos_tolerance"),
                number("stream_max_abs_err")))
        if drift.routes:
            for layers in drift.routes.values():
                layers.sort(key=lambda d: d.layer)
            found.append(drift)
    if not found:
        which = f" for scenario {wanted!r}" if wanted is not None else ""
        raise BadInput(f"report file {path} has no drift/... results{which} (a scenario with the drift check, "
                       f"run on a backend that has attention)")
    return found


def format_number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def render_drift_table(scenario: DriftScenario, layers: set[int] | None) -> str:
    routes = [route for route in ROUTES if route in scenario.routes]
    by_layer: dict[int, dict[str, DriftLayer]] = {}
    for route in routes:
        for d in scenario.routes[route]:
            by_layer.setdefault(d.layer, {})[route] = d
    header = "| layer |"
    rule = "|---|"
    for route in routes:
        header += f" {route}: out cos | {route}: stream cos | {route}: out max abs |"
        rule += "---|---|---|"
    lines = [f"### {scenario.name}: error against the reference per layer (cosine difference)", "", header, rule]
    for layer in sorted(by_layer):
        if layers is not None and layer not in layers:
            continue
        row = f"| {layer} |"
        for route in routes:
            d = by_layer[layer].get(route)
            if d is None:
                row += " — | — | — |"
                continue
            flag = "" if d.verdict == "PASS" else f" ({d.verdict})"
            row += f" {format_number(d.out_cos)}{flag} | {format_number(d.stream_cos)} | {format_number(d.out_abs)} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def plot_drift(scenario: DriftScenario, out: Path, fmt: str) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharex=True)
    colours = {"dense": "tab:blue", "sparse": "tab:orange"}
    for ax, (title, value, bound) in zip(axes, (("layer output", "out_cos", "out_cos_bound"),
                                                ("residual stream", "stream_cos", "stream_cos_bound"))):
        for route, layers in scenario.routes.items():
            points = [(d.layer, getattr(d, value)) for d in layers if getattr(d, value) is not None]
            # A cosine difference of exactly 0 has no place on a logarithmic axis: drawn at the floor.
            ax.plot([x for x, _ in points], [max(y, 1e-16) for _, y in points], marker="o", markersize=3,
                    color=colours.get(route), label=route)
            limits = [(d.layer, getattr(d, bound)) for d in layers if getattr(d, bound) is not None]
            if limits:
                ax.plot([x for x, _ in limits], [y for _, y in limits], linestyle="--", color=colours.get(route),
                        label=f"{route}: bound")
        ax.set_yscale("log")
        ax.set_xlabel("layer")
        ax.set_ylabel("cosine difference against the reference")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{scenario.name}: drift through the layer stack")
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", scenario.name)
    path = out / f"drift-{stem}.{fmt}"
    save_figure(fig, path, fmt)
    return path


# --------------------------------------------------------------------------------------------


def layer_list(text: str) -> set[int]:
    try:
        layers = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of layer numbers") from None
    if not layers or min(layers) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: layers count from 1")
    return layers


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="what", required=True, parser_class=ArgumentParser)
    for name, helptext, input_help in (
            ("routes", "route times: faster route, ratio, crossover", "mla-bench JSON output of the routes sweep"),
            ("drift", "drift check: error of each route per layer", "mla-check JSON report with drift checks")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("input", type=Path, help=input_help)
        output = p.add_mutually_exclusive_group(required=True)
        output.add_argument("--out", type=Path, help="directory for the figures (created)")
        output.add_argument("--table", action="store_true", help="print Markdown tables instead of plotting")
        p.add_argument("--format", choices=("png", "svg"), default="png")
        if name == "drift":
            p.add_argument("--scenario", help="only this scenario (default: every scenario with drift results)")
            p.add_argument("--layers", type=layer_list, help="with --table: only these layers, e.g. 1,2,4,8,16,32,61")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def draw() -> None:
        make_out_dir(args.out)
        if args.what == "routes":
            points = route_points(args.input)
            if args.table:
                print(render_routes_table(points))
            else:
                print(plot_routes(points, args.out, args.format))
        else:
            for scenario in drift_scenarios(args.input, args.scenario):
                if args.table:
                    print(render_drift_table(scenario, args.layers))
                else:
                    print(plot_drift(scenario, args.out, args.format))

    return run_command("plot_routes.py", draw)


if __name__ == "__main__":
    sys.exit(main())
