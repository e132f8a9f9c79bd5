#!/usr/bin/env python3
"""Join the reports of `mla-check --shard I/N` runs into the report of the whole run.

    python3 scripts/merge_reports.py SHARD.json [SHARD.json ...] --out MERGED.json

Every shard of one partition must be given once: the shards' reports record the partition
(provenance.shard: I, N and the names of every selected scenario in the suite's order). The
merged report holds every scenario in that order, its provenance is the shards' common one
(argv without --shard / --shard-costs; host: the shards' hosts; started_at: the earliest;
duration_s: the longest shard, since shards run side by side) with one entry per shard under
"merged_from", and its summary is recomputed as mla-check computes it. Apart from timings it is
the report one run of the whole selection writes (tests/scripts/test_merge_reports.py).

Refused, with a message and exit code 3 (compare_reports.py's code for bad input): a file that is
not an mla-check report or was not run with --shard; shards of different partitions (another N,
another selection); a shard given twice or missing; a scenario in two shards, or in none of the
shards that should hold it; shards that disagree on what ran (tool, version, git revision,
backend, device, runtime, kernels, backend details, injection, seed override).
Standard library only (Python 3.11); compare_reports.py's loader reads the files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_reports import REPORT_SCHEMA, BadInput, load_json, write_json_atomically  # noqa: E402

EXIT_OK = 0
EXIT_BAD_INPUT = 3

VERDICTS = ("PASS", "SKIP", "FAIL", "NONFINITE", "OOB", "ERROR")
RANK = {v: i for i, v in enumerate(VERDICTS)}

# Provenance fields every shard must share: they say what ran.
SAME_IN_EVERY_SHARD = ("tool", "version", "git_revision", "backend", "device", "runtime", "kernels",
                       "backend_details", "injection", "seed_override")
# Options that pick the shard; the merged argv leaves them out.
SHARD_OPTIONS = ("--shard", "--shard-costs")


def aggregate(verdicts: list[str]) -> str:
    """lib/checks/verdict.cpp aggregate(): the worst verdict that is not SKIP; SKIP only when every
    one is SKIP; PASS for none."""
    others = [v for v in verdicts if v != "SKIP"]
    if verdicts and not others:
        return "SKIP"
    return max(others, key=RANK.__getitem__, default="PASS")


def skip_group(reason: str | None) -> str:
    """lib/run/report.cpp skip_group()."""
    group = reason or ""
    if group.startswith("tagged "):
        group = group[len("tagged "):]
    colon = group.find(": ")
    if colon >= 0:
        group = group[:colon]
    return group or "no reason given"


def summary_of(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    """lib/run/report.cpp report_to_json()'s summary block."""
    by_verdict: dict[str, int] = {}
    checks = 0
    passed = skipped = failed = 0
    skipped_by_reason: dict[str, int] = {}
    for s in scenarios:
        for c in s["checks"]:
            checks += 1
            by_verdict[c["verdict"]] = by_verdict.get(c["verdict"], 0) + 1
        if s.get("error") is not None:
            by_verdict["ERROR"] = by_verdict.get("ERROR", 0) + 1
        if s["verdict"] == "PASS":
            passed += 1
        elif s["verdict"] == "SKIP":
            skipped += 1
            group = skip_group(s["checks"][0].get("reason") if s["checks"] else "")
            skipped_by_reason[group] = skipped_by_reason.get(group, 0) + 1
        else:
            failed += 1
    return {
        "verdict": aggregate([s["verdict"] for s in scenarios]),
        "scenarios": len(scenarios),
        "checks": checks,
        "by_verdict": by_verdict,
        "scenarios_passed": passed,
        "scenarios_skipped": skipped,
        "scenarios_failed": failed,
        "skipped_by_reason": skipped_by_reason,
    }


def without_shard_options(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip_next = False
    for arg in argv:
        if skip_next:
            skip_next = False
            continue
        if arg in SHARD_OPTIONS:
            skip_next = True
            continue
        if any(arg.startswith(option + "=") for option in SHARD_OPTIONS):
            continue
        out.append(arg)
    return out


def read_shard(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report and its provenance.shard block, checked for what the merge relies on."""
    report = load_json(path, "shard")
    if report.get("schema") != REPORT_SCHEMA:
        raise BadInput(f"{path} is not an mla-check report (schema {REPORT_SCHEMA!r}, found {report.get('schema')!r})")
    for key, kind in (("provenance", dict), ("scenarios", list)):
        if not isinstance(report.get(key), kind):
            raise BadInput(f"{path}: \"{key}\" is missing or not a {kind.__name__}")
    shard = report["provenance"].get("shard")
    if not isinstance(shard, dict):
        raise BadInput(f"{path} was not run with --shard I/N (its provenance has no \"shard\")")
    index, count, selection = shard.get("index"), shard.get("count"), shard.get("selection")
    if not (isinstance(count, int) and isinstance(index, int) and 1 <= index <= count
            and isinstance(selection, list) and all(isinstance(n, str) for n in selection)):
        raise BadInput(f"{path}: provenance.shard is malformed: {json.dumps(shard)[:200]}")
    for s in report["scenarios"]:
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not isinstance(s.get("checks"), list):
            raise BadInput(f"{path}: a scenario entry without a name or checks")
    return report, shard


def merge(paths: list[Path]) -> dict[str, Any]:
    shards = [(path, *read_shard(path)) for path in paths]
    first_path, first, first_shard = shards[0]
    count, selection = first_shard["count"], first_shard["selection"]
    if len(set(selection)) != len(selection):
        raise BadInput(f"{first_path}: its selection names a scenario twice")
    seen_index: dict[int, Path] = {}
    owner: dict[str, Path] = {}
    by_name: dict[str, dict[str, Any]] = {}
    for path, report, shard in shards:
        where = f"{path} (shard {shard['index']}/{shard['count']})"
        if shard["count"] != count:
            raise BadInput(f"{where} is of a partition into {shard['count']} shards, {first_path} of one into {count}")
        if shard["selection"] != selection:
            raise BadInput(f"{where} and {first_path} shard different selections of scenarios "
                           "(other --scenario, --filter, --exclude-tag or --check options, or another suite)")
        for key in SAME_IN_EVERY_SHARD:
            a, b = first["provenance"].get(key), report["provenance"].get(key)
            if a != b:
                raise BadInput(f"{where} and {first_path} ran differently: provenance.{key} is {json.dumps(b)} "
                               f"there and {json.dumps(a)} here")
        if shard["index"] in seen_index:
            raise BadInput(f"shard {shard['index']}/{count} is given twice: {seen_index[shard['index']]} and {path}")
        seen_index[shard["index"]] = path
        for s in report["scenarios"]:
            name = s["name"]
            if name in owner:
                raise BadInput(f"the shards overlap: scenario {name} is in {owner[name]} and in {path}")
            if name not in selection:
                raise BadInput(f"{where} holds scenario {name}, which its selection does not list")
            owner[name] = path
            by_name[name] = s
    missing_shards = [i for i in range(1, count + 1) if i not in seen_index]
    if missing_shards:
        raise BadInput(f"shards missing: {', '.join(f'{i}/{count}' for i in missing_shards)} "
                       f"(every shard of the partition is needed)")
    absent = [n for n in selection if n not in by_name]
    if absent:
        raise BadInput(f"{len(absent)} selected scenario(s) are in no shard's report: {', '.join(absent[:10])}"
                       + (" ..." if len(absent) > 10 else ""))

    scenarios = [by_name[n] for n in selection]
    ordered = sorted(shards, key=lambda t: t[2]["index"])
    provenance = {k: v for k, v in first["provenance"].items() if k != "shard"}
    provenance["argv"] = without_shard_options(ordered[0][1]["provenance"].get("argv", []))
    hosts = sorted({r["provenance"].get("host", "") for _, r, _ in shards})
    provenance["host"] = ", ".join(hosts)
    starts = [r["provenance"].get("started_at") for _, r, _ in shards if isinstance(r["provenance"].get("started_at"), str)]
    if starts:
        provenance["started_at"] = min(starts)
    durations = [r["provenance"].get("duration_s") for _, r, _ in shards]
    provenance["duration_s"] = max((d for d in durations if isinstance(d, (int, float))), default=0.0)
    provenance["merged_from"] = [
        {"index": s["index"], "count": s["count"], "file": str(p), "host": r["provenance"].get("host"),
         "started_at": r["provenance"].get("started_at"), "duration_s": r["provenance"].get("duration_s"),
         "argv": r["provenance"].get("argv"), "costs": s.get("costs"), "scenarios": len(r["scenarios"])}
        for p, r, s in ordered]
    return {"schema": REPORT_SCHEMA, "provenance": provenance, "summary": summary_of(scenarios), "scenarios": scenarios}


class ArgumentParser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error; this script's code for bad input is 3."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="merge_reports.py", description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shards", nargs="+", type=Path, metavar="SHARD.json", help="the report of each shard")
    parser.add_argument("--out", required=True, type=Path, metavar="MERGED.json", help="where the merged report goes")
    args = parser.parse_args(argv)
    try:
        resolved = {p.resolve() for p in args.shards}
        if args.out.resolve() in resolved:
            raise BadInput(f"--out {args.out} is one of the shards' reports (an input is never overwritten)")
        merged = merge(args.shards)
        write_json_atomically(args.out, merged, "--out")
    except BadInput as error:
        print(f"merge_reports.py: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    s = merged["summary"]
    print(f"merged {len(args.shards)} shards: {s['scenarios']} scenarios, {s['checks']} checks, verdict {s['verdict']} "
          f"-> {args.out}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
