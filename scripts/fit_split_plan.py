#!/usr/bin/env python3
"""Judge the sparse MQA work partition's column splits against measured alternatives, and fit a cost model.

    scripts/fit_split_plan.py BENCH.json [--multiprocessors N] [--json]

BENCH.json is mla-bench's Google Benchmark output of the split_k sweep (`mla-bench --sweep split_k
--benchmark_out=BENCH.json --benchmark_out_format=json`). Its benchmarks
sparse_mqa/batch:B/q:Q/H:H/K:K/seq:S time the plan's own choice of column splits per query token,
and the same name with /splits:n times n splits forced (docs/benchmarks.md, "Split-K plan"). Each
time is the benchmark's median aggregate (else the mean of its iterations, else its mean
aggregate), as scripts/compare_reports.py reads it; failed benchmarks are left out with a note.
The literals NaN and Infinity, which Google Benchmark writes for a statistic it cannot compute
(the cv aggregate of a counter whose mean is 0, such as late_queue_calls), are accepted in the
file; a time that is read and is NaN or infinite is an error naming the entry.
The splits per token that ran come from each benchmark's label ("... N per token, forced)" or
"... N per token, the plan's choice)"). Other benchmarks are ignored.

Per base shape (the name without /splits:n): T = B x Q query tokens, H, K, the plan's choice and
its time, the fastest forced split count and its time, and plan / best (above 1: a forced count
beat the plan).

The model, fitted by non-negative least squares on the relative error over every timed entry
(forced ones and the plan's choices):

    t(T, H, K, s) = a + waves * (b * tiles + d) + [s > 1] * (e + c * s)

hg = ceil(H / 64) CTAs per work item, blocks = ceil(K / 64) column blocks, s the splits per token
clamped to [1, blocks], tiles = ceil(blocks / s) column blocks per work item, waves =
ceil(T * s * hg / SMs). a: fixed cost of a launch; b: one column block of one CTA; d: one wave's
fixed cost; e: the split combine's fixed cost; c: one more split of a token in the combine (it
merges a token's partials one after another, in parallel over tokens and heads). SMs: --multiprocessors, else the context key mla_backend_multiprocessors, else the
"N SMs" of the context's mla_device, else 132 (the output says which). Per shape the model's pick is
the s in 1..blocks with the least modelled time (the smallest such s on a tie), with its measured
time where that many splits per token were timed.

Output: Markdown tables (default), or with --json one object: "shapes" (one object per base shape)
and "model" (a_us, b_us, c_us, d_us, e_us, multiprocessors, multiprocessors_source, rms_relative,
points).

Exit status: 0 written; 2 bad usage, or an unreadable or unusable input: a missing file, not JSON,
not a Google Benchmark output, no sparse_mqa benchmarks, a time that is NaN, infinite or <= 0,
fewer timed entries than the model's 5 constants, a label without the splits per token, or scipy
missing (scripts/requirements.txt). The message names the file and the problem (and the entry,
as a JSON pointer, where one entry is at fault).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_reports import BadInput, at_entry, group_benchmarks, load_json, reduce_runs  # noqa: E402
from plot_routes import format_us  # noqa: E402
from plot_sweep import ArgumentParser  # noqa: E402

EXIT_OK = 0
EXIT_BAD_INPUT = 2

COLUMN_BLOCK = 64  # top-k columns per block of the plan (plan_sparse_mqa)
HEAD_GROUP = 64  # heads per CTA of the CUDA kernels
DEFAULT_MULTIPROCESSORS = 132  # H100 SXM
CONSTANTS = ("a", "b", "c", "d", "e")

SPARSE_NAME = re.compile(r"^sparse_mqa/batch:(\d+)/q:(\d+)/H:(\d+)/K:(\d+)/seq:(\d+)(?:/splits:(\d+))?(?:/.*)?$")
PER_TOKEN = re.compile(r"\b(\d+) per token, (forced|the plan's choice)\)")
DEVICE_SMS = re.compile(r"\b(\d+) SMs\b")


def note(message: str) -> None:
    print(f"fit_split_plan.py: {message}", file=sys.stderr)


@dataclass
class Point:
    """One timed entry: `requested` forced splits (0: the plan's choice), `splits` per token that ran."""

    requested: int
    splits: int
    time_us: float


@dataclass
class Shape:
    batch: int
    query_tokens: int
    heads: int
    topk: int
    seq_len: int
    points: list[Point] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"sparse_mqa/batch:{self.batch}/q:{self.query_tokens}/H:{self.heads}/K:{self.topk}/seq:{self.seq_len}"

    @property
    def tokens(self) -> int:
        return self.batch * self.query_tokens

    @property
    def blocks(self) -> int:
        return -(-self.topk // COLUMN_BLOCK)

    @property
    def plan(self) -> Point | None:
        return next((p for p in self.points if p.requested == 0), None)

    @property
    def best_forced(self) -> Point | None:
        forced = [p for p in self.points if p.requested > 0]
        return min(forced, key=lambda p: (p.time_us, p.requested)) if forced else None

    def measured_at(self, splits: int) -> Point | None:
        """The entry that ran `splits` per token: a forced one (the smallest request), else the plan's."""
        at = [p for p in self.points if p.splits == splits]
        return min(at, key=lambda p: (p.requested == 0, p.requested)) if at else None


def read_shapes(path: Path) -> tuple[list[Shape], dict[str, Any]]:
    """The sparse_mqa benchmarks of one mla-bench output by base shape, and the file's context."""
    where = f"benchmark file {path}"
    document = load_json(path, "benchmark", google_benchmark=True)
    if "benchmarks" not in document or "context" not in document:
        raise BadInput(f"{where} is not a Google Benchmark output (no \"benchmarks\" and \"context\")")
    shapes: dict[tuple[int, ...], Shape] = {}
    seen: set[tuple[tuple[int, ...], int]] = set()
    failed = 0
    for run_name, entries in group_benchmarks(document, where).items():
        match = SPARSE_NAME.match(run_name)
        if not match:
            continue
        key = tuple(int(match.group(i)) for i in range(1, 6))
        requested = int(match.group(6)) if match.group(6) is not None else 0
        if match.group(6) is not None and requested < 1:
            raise BadInput(f"{where}: {run_name!r}: /splits:{requested} (a forced count is at least 1)")
        if (key, requested) in seen:
            raise BadInput(f"{where}: {run_name!r}: a second benchmark of this shape and split count")
        seen.add((key, requested))
        timing = reduce_runs(run_name, entries, where)  # the median aggregate where there is one
        if timing.error is not None:
            failed += 1
            continue
        shape = shapes.setdefault(key, Shape(*key))
        labelled = next((entry for entry in entries if "label" in entry), entries[0])
        splits = label_splits(labelled, requested, shape.blocks, at_entry(where, labelled))
        shape.points.append(Point(requested, splits, timing.center_ns / 1e3))
    if failed:
        note(f"{where}: {failed} failed sparse_mqa benchmark(s) left out")
    if not shapes:
        raise BadInput(f"{where} has no timed sparse_mqa/... benchmarks (mla-bench --sweep split_k)")
    context = document["context"] if isinstance(document["context"], dict) else {}
    return [shapes[key] for key in sorted(shapes, key=lambda k: (k[2], k[3], k[0] * k[1], k[4], k[0]))], context


def label_splits(entry: dict[str, Any], requested: int, blocks: int, where: str) -> int:
    """The splits per token that ran, from the label; it must say forced exactly when the name does."""
    label = entry.get("label")
    match = PER_TOKEN.search(label) if isinstance(label, str) else None
    if match is None:
        raise BadInput(f"{where}: the label {label!r} does not say how many work items per token ran "
                       f"(\"N per token, forced)\" or \"N per token, the plan's choice)\")")
    splits, how = int(match.group(1)), match.group(2)
    if (how == "forced") != (requested > 0):
        raise BadInput(f"{where}: the label says {how!r} but the name "
                       f"{'forces /splits:' + str(requested) if requested else 'has no /splits'}")
    if not 1 <= splits <= blocks:
        raise BadInput(f"{where}: the label's {splits} per token is outside 1..{blocks} (the top-k's column blocks)")
    return splits


def multiprocessors(given: int | None, context: dict[str, Any]) -> tuple[int, str]:
    if given is not None:
        return given, "--multiprocessors"
    value = context.get("mla_backend_multiprocessors")
    if isinstance(value, (int, str)) and str(value).isdigit() and int(value) > 0:
        return int(value), "context mla_backend_multiprocessors"
    device = context.get("mla_device")
    match = DEVICE_SMS.search(device) if isinstance(device, str) else None
    if match and int(match.group(1)) > 0:
        return int(match.group(1)), "context mla_device"
    return DEFAULT_MULTIPROCESSORS, "default"


def terms(tokens: int, heads: int, topk: int, splits: int, sms: int) -> list[float]:
    """The model's terms in CONSTANTS order: t = a*1 + b*waves*tiles + c*combine + d*waves + e*[s > 1]."""
    blocks = -(-topk // COLUMN_BLOCK)
    hg = -(-heads // HEAD_GROUP)
    s = min(max(splits, 1), blocks)
    tiles = -(-blocks // s)
    waves = -(-(tokens * s * hg) // sms)
    split = 1.0 if s > 1 else 0.0
    return [1.0, float(waves * tiles), split * s, float(waves), split]


@dataclass
class Fit:
    constants: dict[str, float]
    multiprocessors: int
    source: str
    rms_relative: float
    points: int
    rank: int

    def predict(self, tokens: int, heads: int, topk: int, splits: int) -> float:
        row = terms(tokens, heads, topk, splits, self.multiprocessors)
        return sum(self.constants[name] * value for name, value in zip(CONSTANTS, row))


def fit_model(shapes: list[Shape], sms: int, source: str, path: Path) -> Fit:
    """NNLS on rows scaled by 1/t: the constants that minimise the relative RMS error."""
    try:
        import numpy as np
        from scipy.optimize import nnls
    except ImportError as error:
        raise BadInput(f"fitting needs numpy and scipy (scripts/requirements.txt): {error}") from None
    rows, times = [], []
    for shape in shapes:
        for p in shape.points:
            rows.append(terms(shape.tokens, shape.heads, shape.topk, p.splits, sms))
            times.append(p.time_us)
    if len(rows) < len(CONSTANTS):
        raise BadInput(f"benchmark file {path}: {len(rows)} timed sparse_mqa entries; fitting the model's "
                       f"{len(CONSTANTS)} constants needs at least {len(CONSTANTS)}")
    design, measured = np.array(rows), np.array(times)
    rank = int(np.linalg.matrix_rank(design))
    if rank < len(CONSTANTS):
        note(f"benchmark file {path}: the timed entries determine only {rank} of the model's {len(CONSTANTS)} "
             f"constants (vary the batch, the heads, the top-k and the forced splits); the fit is one of many")
    solution, _ = nnls(design / measured[:, None], np.ones_like(measured))
    relative = design @ solution / measured - 1.0
    return Fit(dict(zip(CONSTANTS, map(float, solution))), sms, source, float(np.sqrt(np.mean(relative ** 2))),
               len(rows), rank)


def shape_result(shape: Shape, fit: Fit) -> dict[str, Any]:
    plan, best = shape.plan, shape.best_forced
    predicted = [fit.predict(shape.tokens, shape.heads, shape.topk, s) for s in range(1, shape.blocks + 1)]
    pick = 1 + min(range(len(predicted)), key=lambda i: (predicted[i], i))
    at_pick = shape.measured_at(pick)
    return {
        "name": shape.name, "batch": shape.batch, "query_tokens": shape.query_tokens, "tokens": shape.tokens,
        "heads": shape.heads, "topk": shape.topk, "seq_len": shape.seq_len, "blocks": shape.blocks,
        "plan_splits": plan.splits if plan else None,
        "plan_us": plan.time_us if plan else None,
        "best_forced": best.requested if best else None,
        "best_splits": best.splits if best else None,
        "best_us": best.time_us if best else None,
        "plan_over_best": plan.time_us / best.time_us if plan and best else None,
        "model_splits": pick,
        "model_us": predicted[pick - 1],
        "model_measured_us": at_pick.time_us if at_pick else None,
    }


def model_result(fit: Fit) -> dict[str, Any]:
    result: dict[str, Any] = {f"{name}_us": value for name, value in fit.constants.items()}
    result.update(multiprocessors=fit.multiprocessors, multiprocessors_source=fit.source,
                  rms_relative=fit.rms_relative, points=fit.points, rank=fit.rank)
    return result


def us(value: float | None) -> str:
    return format_us(None if value is None else value * 1e-6)


def plain(value: int | None) -> str:
    return "—" if value is None else str(value)


def render_table(shapes: list[dict[str, Any]], model: dict[str, Any]) -> str:
    lines = ["### Split-K plan against forced splits (median times)", "",
             "| shape | T | H | K | plan splits | plan (us) | best forced splits | best (us) | plan / best "
             "| model splits | model (us) | measured at model splits (us) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in shapes:
        ratio = "—" if s["plan_over_best"] is None else f"{s['plan_over_best']:.3f}"
        lines.append(f"| {s['name']} | {s['tokens']} | {s['heads']} | {s['topk']} | {plain(s['plan_splits'])} | "
                     f"{us(s['plan_us'])} | {plain(s['best_splits'])} | {us(s['best_us'])} | {ratio} | "
                     f"{s['model_splits']} | {us(s['model_us'])} | {us(s['model_measured_us'])} |")
    lines += ["", "### Cost model", "",
              "t = a + waves * (b * tiles + d) + [s > 1] * (e + c * s), "
              f"waves = ceil(T * s * ceil(H/64) / {model['multiprocessors']}) "
              f"(multiprocessors: {model['multiprocessors']}, {model['multiprocessors_source']})", "",
              "| constant | us | meaning |", "|---|---|---|"]
    meanings = {"a": "per launch", "b": "per column block of one CTA, per wave", "c": "per split of a token "
                "(combine)", "d": "per wave", "e": "per split launch (combine)"}
    for name in CONSTANTS:
        lines.append(f"| {name} | {model[name + '_us']:.4g} | {meanings[name]} |")
    lines += ["", f"Relative RMS error of the fit: {model['rms_relative']:.4g} over {model['points']} timed entries."]
    return "\n".join(lines) + "\n"


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("bench", type=Path, help="mla-bench JSON output of the split_k sweep")
    parser.add_argument("--multiprocessors", type=positive,
                        help="SMs of the device that ran it (default: from the file's context, else 132)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of Markdown tables")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        shapes, context = read_shapes(args.bench)
        sms, source = multiprocessors(args.multiprocessors, context)
        fit = fit_model(shapes, sms, source, args.bench)
    except BadInput as error:  # exit 2, as for bad usage (plot_sweep.py's run_command exits 3)
        print(f"fit_split_plan.py: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    results, model = [shape_result(shape, fit) for shape in shapes], model_result(fit)
    if args.json:
        print(json.dumps({"shapes": results, "model": model}, indent=2))
    else:
        print(render_table(results, model))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
