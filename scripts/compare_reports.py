#!/usr/bin/env python3
"""Compare two mla-check reports, or two mla-bench (Google Benchmark) JSON outputs.

Prints only what changed between BASE and NEW, as a table, and a one-line summary; the exit code
says whether anything regressed. The rules are in the --help text below and in
docs/report-format.md. Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import enum
import json
import math
import os
import stat
import sys
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, NoReturn

REPORT_SCHEMA = "mla-harness.report/1"

EXIT_OK = 0
EXIT_REGRESSION = 1  # reports: a verdict, a missing check, or (with --fail-on-drift) a metric regressed
EXIT_PERF_REGRESSION = 2  # benchmark files: a slowdown beyond noise, an error or a missing benchmark in NEW
EXIT_BAD_INVOCATION = 3  # missing/unreadable file, invalid JSON, schema mismatch, mixed kinds, bad option

# Verdicts from best to worst. The last four mean that a check failed.
VERDICTS = ("PASS", "SKIP", "FAIL", "NONFINITE", "OOB", "ERROR")
VERDICT_RANK = {verdict: rank for rank, verdict in enumerate(VERDICTS)}
FAILING_VERDICTS = frozenset(("FAIL", "NONFINITE", "OOB", "ERROR"))

# Error metrics watched for drift: these, and any metric whose name ends in "_err".
DRIFT_METRICS = frozenset(("max_abs_err", "max_rel_err", "cos_diff"))
# Counters that are 0 in a clean check; 0 -> >0 is a regression even without a verdict change.
ZERO_EXPECTED_COUNTERS = (
    "mismatches",
    "nonfinite_mismatches",
    "guard_bytes_changed",
    "untouched_bytes_changed",
)

# The Google Benchmark user counter of timed calls that began before the caller had queued them.
LATE_QUEUE_COUNTER = "late_queue_calls"

TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

DETAIL_WIDTH = 96  # the table truncates longer details; --json keeps them whole

# Larger files are refused unread: a whole-suite report or a sweep's benchmark output is a few MB,
# and json.loads of a multi-GB file would need several times that in memory.
MAX_INPUT_BYTES = 64 << 20


class BadInput(Exception):
    """Anything that makes the comparison impossible; ends the run with EXIT_BAD_INVOCATION."""


class Kind(enum.Enum):
    REPORT = "mla-check report"
    BENCHMARK = "Google Benchmark output"


class Severity(enum.IntEnum):
    """How a finding counts; the table lists findings in this order."""

    REGRESSION = 0
    WARNING = 1
    IMPROVED = 2
    INFO = 3


@dataclass(frozen=True)
class Options:
    allow_missing: bool = False
    strict_skip: bool = False
    fail_on_drift: bool = False
    drift_rel: float = 2.0
    drift_abs: float = 1e-6
    perf_floor: float = 0.05


@dataclass(frozen=True)
class Finding:
    """One line of the table: something that changed between BASE and NEW."""

    severity: Severity
    category: str  # verdict, missing, added, drift, counter, performance, error
    subject: tuple[str, ...]  # (scenario, check) for reports, (benchmark,) for benchmark files
    change: str
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Comparison:
    kind: Kind
    subject_columns: tuple[str, ...]
    findings: list[Finding]
    compared: dict[str, int]  # what was compared, for the summary line and --json
    compared_text: str
    headers: list[str] = field(default_factory=list)  # one line per input: what it is
    notes: list[str] = field(default_factory=list)  # caveats about the comparison itself
    outcome: str = ""  # extra words for the summary line (the run verdicts of two reports)

    def count(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity is severity)

    @property
    def exit_code(self) -> int:
        if self.count(Severity.REGRESSION) == 0:
            return EXIT_OK
        return EXIT_REGRESSION if self.kind is Kind.REPORT else EXIT_PERF_REGRESSION


# --------------------------------------------------------------------------------------------
# Loading


def reject_constant(name: str) -> Any:
    """json.loads' hook for NaN / Infinity / -Infinity in a file that is not a Google Benchmark
    output: not JSON, and our own files (mla-check reports, shards) write null instead."""
    raise ValueError(nonstandard_literal(name))


def nonstandard_literal(name: str) -> str:
    """Why NaN / Infinity / -Infinity is refused where it is."""
    return f"non-standard literal {name} (JSON has no NaN or infinities)"


def google_benchmark_constant(name: str) -> float:
    """json.loads' hook for NaN / Infinity / -Infinity in a Google Benchmark output: Google
    Benchmark writes them for a statistic it cannot compute (the cv aggregate of a counter whose
    mean is 0, such as late_queue_calls). They become float nan / inf; whoever reads a number from
    such a file goes through as_number (None for them) or real_time_ns (an error naming the entry)."""
    return float(name)


def nonfinite_text(value: Any) -> str:
    """A value for a message: a non-finite float as Google Benchmark writes it (NaN, Infinity,
    -Infinity), anything else as repr."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return repr(value)


def reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' hook for objects: a key given twice would silently keep only the last value."""
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise ValueError(f"key {key!r} given twice in one object")
        document[key] = value
    return document


def load_json(path: Path, role: str, *, google_benchmark: bool = False) -> dict[str, Any]:
    """The JSON object in `path`; BadInput naming `role` and the file when there is none.

    A key given twice in one object is refused in every file. The literals NaN, Infinity and
    -Infinity are refused unless google_benchmark is true: pass it only where the file is a Google
    Benchmark output (mla-bench's --benchmark_out, peer_timing.py's --out), which holds them where
    a statistic cannot be computed; they are then read as float nan / inf (google_benchmark_constant).
    """
    return parse_json_file(path, role, google_benchmark_constant if google_benchmark else reject_constant)


def parse_json_file(path: Path, role: str, constant: Callable[[str], Any]) -> dict[str, Any]:
    """load_json with json.loads' parse_constant hook `constant` for NaN / Infinity / -Infinity."""
    # Only regular files: a FIFO would block the read forever, a device might never end.
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise BadInput(f"{role} file not found: {path}") from None
    except OSError as error:  # a name too long, no permission on a folder, ...
        raise BadInput(f"cannot read {role} file {path}: {error}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise BadInput(f"{role} file {path} is {kind}")
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise BadInput(f"{role} file {path} is {size} bytes; files to compare are at most {MAX_INPUT_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{role} file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"cannot read {role} file {path}: {error}") from None
    text = text.removeprefix("\ufeff")  # a byte order mark is skipped, as mla-check and mla-bench skip it
    try:
        document = json.loads(text, parse_constant=constant, object_pairs_hook=reject_duplicate_keys)
    except json.JSONDecodeError as error:
        raise BadInput(
            f"{role} file {path} is not valid JSON: {error.msg} "
            f"(line {error.lineno}, column {error.colno})"
        ) from None
    except (ValueError, RecursionError) as error:  # literals, duplicate keys, integers past 4300 digits, deep nesting
        raise BadInput(f"{role} file {path} is not usable JSON: {str(error) or type(error).__name__}") from None
    if not isinstance(document, dict):
        raise BadInput(f"{role} file {path} does not hold a JSON object")
    return document


def load_either(path: Path, role: str) -> dict[str, Any]:
    """BASE or NEW, which may be a Google Benchmark output (NaN and Infinity literals accepted) or
    a report (refused): the kind is known only from the parsed document, so the literals are
    recorded while parsing and refused afterwards when it is a report."""
    literals: list[str] = []

    def record(name: str) -> float:
        literals.append(name)
        return google_benchmark_constant(name)

    document = parse_json_file(path, role, record)
    if literals and detect_kind(document, role, path) is Kind.REPORT:
        raise BadInput(f"{role} file {path} is not usable JSON: {nonstandard_literal(literals[0])}")
    return document


def detect_kind(document: dict[str, Any], role: str, path: Path) -> Kind:
    if "schema" in document:
        return Kind.REPORT
    if "benchmarks" in document and "context" in document:
        return Kind.BENCHMARK
    raise BadInput(
        f"{role} file {path} is neither an mla-check report (no \"schema\") nor a "
        f"Google Benchmark output (no \"benchmarks\" and \"context\")"
    )


def require(container: dict[str, Any], key: str, kind: type, where: str) -> Any:
    """container[key], which must exist and be a `kind`; a BadInput naming `where` otherwise."""
    if key not in container:
        raise BadInput(f"{where}: missing \"{key}\"")
    value = container[key]
    if not isinstance(value, kind):
        raise BadInput(f"{where}: \"{key}\" must be a {kind.__name__}, not {type(value).__name__}")
    return value


def as_number(value: Any) -> float | None:
    """A finite number as float; None for null, NaN, infinities, booleans and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)  # an integer past double's range raises OverflowError
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def metric_number(metrics: dict[str, Any], name: str, where: str) -> float | None:
    """A metric that is compared: absent or null is None (not compared: null is how the tools
    write NaN); anything else must be a finite number, or the comparison would silently skip it."""
    value = metrics.get(name)
    if value is None:
        return None
    number = as_number(value)
    if number is None:
        raise BadInput(f"{where}: metric \"{name}\" must be a finite number or null, not {value!r}")
    return number


def metric_count(metrics: dict[str, Any], name: str, where: str) -> int | None:
    """A counter: absent or null is None; else a whole number (3.0 is 3)."""
    number = metric_number(metrics, name, where)
    if number is None:
        return None
    if not number.is_integer() or number < 0:
        raise BadInput(f"{where}: counter \"{name}\" must be a whole number >= 0, not {metrics[name]!r}")
    return int(number)


# --------------------------------------------------------------------------------------------
# mla-check reports


@dataclass(frozen=True)
class Check:
    id: str
    verdict: str
    reason: str | None
    metrics: dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    name: str
    verdict: str
    error: str | None
    checks: dict[str, Check]  # by id, in report order


@dataclass(frozen=True)
class Report:
    path: Path
    provenance: dict[str, Any]
    verdict: str | None
    scenarios: dict[str, Scenario]  # by name, in report order

    @property
    def check_count(self) -> int:
        return sum(len(scenario.checks) for scenario in self.scenarios.values())


def parse_verdict(value: Any, where: str) -> str:
    if not isinstance(value, str) or value not in VERDICT_RANK:
        raise BadInput(f"{where}: unknown verdict {value!r} (expected one of {', '.join(VERDICTS)})")
    return value


def parse_check(raw: Any, where: str) -> Check:
    """where: "FILE: at /scenarios/I/checks/J"."""
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: a check must be a JSON object")
    check_id = require(raw, "id", str, where)
    metrics = raw.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise BadInput(f"{where}/metrics (check {check_id!r}): \"metrics\" must be an object")
    # Every metric that is compared is checked here, where the file and its place are known.
    for name in metrics:
        if name in ZERO_EXPECTED_COUNTERS:
            metric_count(metrics, name, f"{where}/metrics/{name} (check {check_id!r})")
        elif is_drift_metric(name):
            metric_number(metrics, name, f"{where}/metrics/{name} (check {check_id!r})")
    where = f"{where} (check {check_id!r})"
    return Check(
        id=check_id,
        verdict=parse_verdict(raw.get("verdict"), where),
        reason=raw.get("reason") if isinstance(raw.get("reason"), str) else None,
        metrics=metrics,
    )


def parse_scenario(raw: Any, where: str) -> Scenario:
    """where: "FILE: at /scenarios/I"."""
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: a scenario must be a JSON object")
    name = require(raw, "name", str, where)
    checks: dict[str, Check] = {}
    for index, raw_check in enumerate(require(raw, "checks", list, f"{where} (scenario {name!r})")):
        check = parse_check(raw_check, f"{where}/checks/{index}")
        if check.id in checks:
            raise BadInput(f"{where}/checks/{index}/id (scenario {name!r}): duplicate check id {check.id!r}")
        checks[check.id] = check
    where = f"{where} (scenario {name!r})"
    return Scenario(
        name=name,
        verdict=parse_verdict(raw.get("verdict"), where),
        error=raw.get("error") if isinstance(raw.get("error"), str) else None,
        checks=checks,
    )


def parse_report(document: dict[str, Any], role: str, path: Path) -> Report:
    where = f"{role} report {path}"
    scenarios: dict[str, Scenario] = {}
    for index, raw in enumerate(require(document, "scenarios", list, where)):
        scenario = parse_scenario(raw, f"{where}: at /scenarios/{index}")
        if scenario.name in scenarios:
            raise BadInput(f"{where}: at /scenarios/{index}/name: duplicate scenario name {scenario.name!r}")
        scenarios[scenario.name] = scenario
    provenance = document.get("provenance")
    summary = document.get("summary")
    verdict = summary.get("verdict") if isinstance(summary, dict) else None
    return Report(
        path=path,
        provenance=provenance if isinstance(provenance, dict) else {},
        verdict=verdict if isinstance(verdict, str) and verdict in VERDICT_RANK else None,
        scenarios=scenarios,
    )


def check_schemas(base: dict[str, Any], new: dict[str, Any]) -> None:
    base_schema, new_schema = base.get("schema"), new.get("schema")
    if base_schema != new_schema:
        raise BadInput(f"schema mismatch: BASE is {base_schema!r}, NEW is {new_schema!r}")
    if base_schema != REPORT_SCHEMA:
        raise BadInput(f"unsupported schema {base_schema!r}; this script reads {REPORT_SCHEMA!r}")


def classify_verdict_change(base: str, new: str, options: Options) -> Severity | None:
    """None when unchanged. Worse and failing -> REGRESSION; PASS -> SKIP -> WARNING (or, with
    --strict-skip, REGRESSION); better -> IMPROVED."""
    if base == new:
        return None
    if VERDICT_RANK[new] < VERDICT_RANK[base]:
        return Severity.IMPROVED
    if new in FAILING_VERDICTS:
        return Severity.REGRESSION
    return Severity.REGRESSION if options.strict_skip else Severity.WARNING  # PASS -> SKIP


def verdict_finding(
    subject: tuple[str, str], base: str, new: str, detail: str, options: Options
) -> Finding | None:
    severity = classify_verdict_change(base, new, options)
    if severity is None:
        return None
    if severity is Severity.REGRESSION and new == "SKIP":
        detail = f"{detail}; a regression because of --strict-skip".lstrip("; ")
    return Finding(
        severity, "verdict", subject, f"{base} -> {new}", detail,
        {"base_verdict": base, "new_verdict": new},
    )


def missing_in_new(subject: tuple[str, ...], detail: str, data: dict[str, Any], options: Options) -> Finding:
    """Something of BASE that NEW lacks, in either kind of file: lost coverage, so a REGRESSION;
    a WARNING with --allow-missing."""
    if options.allow_missing:
        return Finding(
            Severity.WARNING, "missing", subject, "missing in NEW", f"{detail}; allowed by --allow-missing", data
        )
    return Finding(Severity.REGRESSION, "missing", subject, "missing in NEW", detail, data)


def added_in_new(subject: tuple[str, ...], detail: str, failing: bool, data: dict[str, Any]) -> Finding:
    """Something of NEW that BASE lacks, in either kind of file: INFO, unless the newcomer fails
    (a WARNING: worth a look, though not a regression against BASE)."""
    severity = Severity.WARNING if failing else Severity.INFO
    return Finding(severity, "added", subject, "added in NEW", detail, data)


def missing_finding(subject: tuple[str, str], what: str, verdict: str, options: Options) -> Finding:
    return missing_in_new(subject, f"{what} was {verdict}", {"base_verdict": verdict}, options)


def added_finding(subject: tuple[str, str], what: str, verdict: str) -> Finding:
    return added_in_new(subject, f"{what}, {verdict}", verdict in FAILING_VERDICTS, {"new_verdict": verdict})


def is_drift_metric(name: str) -> bool:
    return name in DRIFT_METRICS or name.endswith("_err")


def drift_findings(
    subject: tuple[str, str], base: dict[str, Any], new: dict[str, Any], options: Options
) -> Iterable[Finding]:
    """An error metric that grew by more than --drift-rel (relative) AND --drift-abs (absolute).
    Null (NaN) on either side is not compared: the verdict says what NaN means."""
    where = f"check {subject[1]!r} of scenario {subject[0]!r}"
    for name in new:
        if not is_drift_metric(name):
            continue
        old_value = metric_number(base, name, f"BASE {where}")
        new_value = metric_number(new, name, f"NEW {where}")
        if old_value is None or new_value is None:
            continue
        grew_absolute = new_value - old_value > options.drift_abs
        grew_relative = new_value > old_value * (1.0 + options.drift_rel)
        if not (grew_absolute and grew_relative):
            continue
        severity = Severity.REGRESSION if options.fail_on_drift else Severity.WARNING
        ratio = f" (x{new_value / old_value:.3g})" if old_value > 0 else ""
        yield Finding(
            severity, "drift", subject,
            f"{name} {format_number(old_value)} -> {format_number(new_value)}{ratio}",
            f"over {1.0 + options.drift_rel:g}x BASE and +{options.drift_abs:g}",
            {"metric": name, "base_value": old_value, "new_value": new_value},
        )


def counter_findings(
    subject: tuple[str, str], base: dict[str, Any], new: dict[str, Any]
) -> Iterable[Finding]:
    """Counters that must stay 0 (mismatches, guard bytes, ...) and inputs_modified."""
    where = f"check {subject[1]!r} of scenario {subject[0]!r}"
    for name in ZERO_EXPECTED_COUNTERS:
        old_count = metric_count(base, name, f"BASE {where}")
        new_count = metric_count(new, name, f"NEW {where}")
        if old_count == 0 and new_count is not None and new_count > 0:
            yield Finding(
                Severity.REGRESSION, "counter", subject, f"{name} 0 -> {new_count}", "",
                {"metric": name, "base_value": 0, "new_value": new_count},
            )
    if base.get("inputs_modified") is False and new.get("inputs_modified") is True:
        yield Finding(
            Severity.REGRESSION, "counter", subject, "inputs_modified false -> true",
            "the kernel wrote to an input", {"metric": "inputs_modified"},
        )


def compare_check(scenario: str, base: Check, new: Check, options: Options) -> list[Finding]:
    subject = (scenario, base.id)
    detail = new.reason or (f"was: {base.reason}" if base.reason else "")
    verdict = verdict_finding(subject, base.verdict, new.verdict, detail, options)
    findings = [verdict] if verdict else []
    if verdict is None or verdict.severity is not Severity.REGRESSION:
        # A regressed verdict already says it all; otherwise the metrics may tell more.
        findings += counter_findings(subject, base.metrics, new.metrics)
        findings += drift_findings(subject, base.metrics, new.metrics, options)
    return findings


def compare_scenario(base: Scenario, new: Scenario, options: Options) -> list[Finding]:
    findings: list[Finding] = []
    for check_id, base_check in base.checks.items():
        new_check = new.checks.get(check_id)
        if new_check is None:
            findings.append(missing_finding((base.name, check_id), "check", base_check.verdict, options))
        else:
            findings += compare_check(base.name, base_check, new_check, options)
    for check_id, new_check in new.checks.items():
        if check_id not in base.checks:
            findings.append(added_finding((base.name, check_id), "check", new_check.verdict))

    # The scenario's own verdict gets a line only when no check explains it (a crashed scenario
    # has no checks, an error before the first check has no check to blame).
    explained = any(f.data.get("new_verdict") == new.verdict for f in findings if f.category == "verdict")
    if not explained:
        detail = new.error or (f"was: {base.error}" if base.error else "")
        scenario_line = verdict_finding((base.name, "(scenario)"), base.verdict, new.verdict, detail, options)
        if scenario_line:
            findings.insert(0, scenario_line)
    return findings


def describe_provenance(role: str, report: Report) -> str:
    p = report.provenance
    tool = " ".join(str(p[key]) for key in ("tool", "version") if p.get(key)) or "unknown tool"
    revision = f" ({p['git_revision']})" if p.get("git_revision") else ""
    where = ", ".join(str(p[key]) for key in ("backend", "device", "started_at") if p.get(key))
    return f"{role:<4}  {report.path}: {tool}{revision}" + (f", {where}" if where else "")


def provenance_notes(base: Report, new: Report) -> list[str]:
    notes = []
    base_backend, new_backend = base.provenance.get("backend"), new.provenance.get("backend")
    if base_backend and new_backend and base_backend != new_backend:
        notes.append(f"BASE ran on the {base_backend} backend, NEW on {new_backend}")
    base_kernels, new_kernels = base.provenance.get("kernels"), new.provenance.get("kernels")
    if base_kernels and new_kernels and base_kernels != new_kernels:
        notes.append(f"the attention kernels differ (BASE: {base_kernels}; NEW: {new_kernels})")
    for role, report in (("BASE", base), ("NEW", new)):
        if report.provenance.get("injection"):
            notes.append(f"{role} ran with --inject {report.provenance['injection']}")
        if report.provenance.get("seed_override") is not None:
            notes.append(f"{role} ran with a seed override ({report.provenance['seed_override']})")
    return notes


def compare_reports(base: Report, new: Report, options: Options) -> Comparison:
    findings: list[Finding] = []
    compared_scenarios = compared_checks = 0
    for name, base_scenario in base.scenarios.items():
        new_scenario = new.scenarios.get(name)
        if new_scenario is None:
            findings.append(missing_finding((name, "(scenario)"), "scenario", base_scenario.verdict, options))
            continue
        compared_scenarios += 1
        compared_checks += sum(1 for check_id in base_scenario.checks if check_id in new_scenario.checks)
        findings += compare_scenario(base_scenario, new_scenario, options)
    for name, new_scenario in new.scenarios.items():
        if name not in base.scenarios:
            findings.append(added_finding((name, "(scenario)"), "scenario", new_scenario.verdict))

    outcome = ""
    if base.verdict and new.verdict:
        outcome = f"run verdict {base.verdict}" + (
            f" -> {new.verdict}" if new.verdict != base.verdict else " (unchanged)"
        )
    return Comparison(
        kind=Kind.REPORT,
        subject_columns=("SCENARIO", "CHECK"),
        findings=findings,
        compared={"scenarios": compared_scenarios, "checks": compared_checks},
        compared_text=f"{plural(compared_scenarios, 'scenario')} and "
        f"{plural(compared_checks, 'check')} compared",
        headers=[describe_provenance("BASE", base), describe_provenance("NEW", new)],
        notes=provenance_notes(base, new),
        outcome=outcome,
    )


# --------------------------------------------------------------------------------------------
# Google Benchmark outputs


@dataclass(frozen=True)
class BenchTiming:
    """One benchmark (one run_name) of one file, reduced to a centre and a spread."""

    name: str
    center_ns: float
    spread_ns: float
    source: str  # how center_ns was obtained: "median aggregate", "mean of 3 iterations", ...
    error: str | None = None
    late_queue_calls: float | None = None  # from the rows center_ns came from; None: not reported


@dataclass(frozen=True)
class BenchFile:
    path: Path
    context: dict[str, Any]
    timings: dict[str, BenchTiming]  # by run_name, in file order


# The JSON pointer of each benchmark entry grouped (by identity: the entries live as long as
# their document), for messages about one entry.
_ENTRY_POINTERS: dict[int, str] = {}


def at_entry(where: str, entry: dict[str, Any]) -> str:
    pointer = _ENTRY_POINTERS.get(id(entry))
    return f"{where}: at {pointer} ({entry.get('name')!r})" if pointer else f"{where} {entry.get('name')!r}"


def run_type(entry: dict[str, Any]) -> str:
    # Old Google Benchmark versions write no run_type; aggregates still carry aggregate_name.
    return entry.get("run_type") or ("aggregate" if "aggregate_name" in entry else "iteration")


def real_time_ns(entry: dict[str, Any], where: str, allow_zero: bool = False) -> float:
    """real_time in ns: > 0 (>= 0 with allow_zero: a stddev). A NaN or infinite time (which
    Google Benchmark writes for a statistic it cannot compute) is an error: it cannot be compared,
    fitted or drawn."""
    if "real_time" not in entry:
        raise BadInput(f"{where}: \"real_time\" is missing")
    raw = entry["real_time"]
    value = as_number(raw)
    if value is None:
        raise BadInput(f"{where}: \"real_time\" is {nonfinite_text(raw)}, not a finite number")
    if value < 0 or (value == 0 and not allow_zero):
        raise BadInput(f"{where}: \"real_time\" {value!r} must be {'>= 0' if allow_zero else '> 0'}")
    unit = entry.get("time_unit", "ns")
    if not isinstance(unit, str) or unit not in TIME_UNIT_NS:
        raise BadInput(f"{where}: unknown time_unit {unit!r} (expected one of {', '.join(TIME_UNIT_NS)})")
    return value * TIME_UNIT_NS[unit]


def aggregates_by_kind(name: str, entries: list[dict[str, Any]], where: str) -> dict[str, dict[str, Any]]:
    """A benchmark's aggregate entries by aggregate_name; two of one kind are an error."""
    aggregates: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if run_type(entry) != "aggregate":
            continue
        kind = entry.get("aggregate_name")
        if not isinstance(kind, str):
            raise BadInput(f"{at_entry(where, entry)}: \"aggregate_name\" must be a string, not {kind!r}")
        if kind in aggregates:  # two runs of one name in one file: which to compare is unknown
            raise BadInput(f"{where}: benchmark {name!r} has two {kind!r} aggregates")
        aggregates[kind] = entry
    return aggregates


def centre_rows(name: str, entries: list[dict[str, Any]], where: str) -> tuple[list[dict[str, Any]], str]:
    """The entries a benchmark's centre is read from, and how: its median aggregate, else its
    iterations (their mean), else its mean aggregate. Also used by plot_sweep.py."""
    aggregates = aggregates_by_kind(name, entries, where)
    iterations = [e for e in entries if run_type(e) == "iteration"]
    if "median" in aggregates:
        return [aggregates["median"]], "median aggregate"
    if iterations:
        return iterations, f"mean of {plural(len(iterations), 'iteration')}"
    if "mean" in aggregates:
        return [aggregates["mean"]], "mean aggregate"
    raise BadInput(f"{where}: benchmark {name!r} has no median, mean or iteration timing")


def reduce_runs(name: str, entries: list[dict[str, Any]], where: str) -> BenchTiming:
    """Centre: centre_rows' (the mean over its rows). Spread: the stddev aggregate, else half the
    range of the iterations, else 0. Late-queued calls: late_queue_count of the centre's rows."""
    errors = [entry.get("error_message") or "error" for entry in entries if entry.get("error_occurred")]
    if errors:
        return BenchTiming(name, math.nan, math.nan, "error", error=str(errors[0]))
    rows, source = centre_rows(name, entries, where)
    times = [real_time_ns(e, at_entry(where, e)) for e in rows]
    center = sum(times) / len(times)
    aggregates = aggregates_by_kind(name, entries, where)
    iterations = [real_time_ns(e, at_entry(where, e)) for e in entries if run_type(e) == "iteration"]
    if "stddev" in aggregates:
        spread = real_time_ns(aggregates["stddev"], at_entry(where, aggregates["stddev"]), allow_zero=True)
    elif len(iterations) >= 2:
        spread = (max(iterations) - min(iterations)) / 2.0
    else:
        spread = 0.0
    return BenchTiming(name, center, spread, source, late_queue_calls=late_queue_count(rows))


def late_queue_count(rows: list[dict[str, Any]]) -> float | None:
    """late_queue_calls (mla-bench's and peer_timing.py's counter: timed calls whose start event
    the GPU had reached before the call was queued) of the rows a benchmark's time is read from
    (centre_rows): the median aggregate's value, the mean over the iterations, or the mean
    aggregate's value. None (not reported: a host run, a tool that does not count them) when one
    of those rows lacks the counter or holds a non-finite value (Google Benchmark writes NaN in a
    cv aggregate, never one of these rows; anywhere else it is as unknown)."""
    values = [as_number(row.get(LATE_QUEUE_COUNTER)) for row in rows]
    if not values or any(value is None for value in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]


def group_benchmarks(document: dict[str, Any], where: str) -> dict[str, list[dict[str, Any]]]:
    """The file's entries by run_name (iterations and aggregates of one benchmark), in file order.
    Also used by plot_sweep.py."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for index, entry in enumerate(require(document, "benchmarks", list, where)):
        if not isinstance(entry, dict):
            raise BadInput(f"{where}: at /benchmarks/{index}: not an object")
        name = require(entry, "name", str, f"{where}: at /benchmarks/{index}")
        _ENTRY_POINTERS[id(entry)] = f"/benchmarks/{index}"
        run_name = entry.get("run_name")
        if not isinstance(run_name, str):
            # Old Google Benchmark output has no run_name: an aggregate is named NAME_<aggregate>.
            run_name = name
            aggregate = entry.get("aggregate_name")
            if isinstance(aggregate, str) and name.endswith("_" + aggregate):
                run_name = name[: -len(aggregate) - 1]
        groups.setdefault(run_name, []).append(entry)
    if not groups:  # a benchmark run that crashed before its first result must not pass
        raise BadInput(f"{where}: holds no benchmark results")
    return groups


def parse_benchmarks(document: dict[str, Any], role: str, path: Path) -> BenchFile:
    where = f"{role} file {path}"
    groups = group_benchmarks(document, where)
    context = document.get("context")
    return BenchFile(
        path=path,
        context=context if isinstance(context, dict) else {},
        timings={name: reduce_runs(name, entries, where) for name, entries in groups.items()},
    )


def describe_timing(timing: BenchTiming) -> str:
    """What one file says of a benchmark, for a finding's detail: its error, or its time."""
    if timing.error is not None:
        return f"errored: {timing.error}"
    return f"{format_time(timing.center_ns)} ({timing.source})"


def timing_data(role: str, timing: BenchTiming) -> dict[str, Any]:
    """One file's side of a benchmark for --json: base_ns / new_ns (null when it errored) and
    base_error / new_error (Google Benchmark's error_message; null when it ran)."""
    prefix = role.lower()
    return {f"{prefix}_ns": timing.center_ns, f"{prefix}_error": timing.error}


def error_finding(base: BenchTiming, new: BenchTiming) -> Finding:
    """At least one side has error_occurred. Errored in NEW only: a REGRESSION, whatever the speed
    was (a kernel that stopped running must not pass the gate); in both: a WARNING (not new); in
    BASE only: INFO (it now runs; there is no time to compare it with)."""
    subject = (base.name,)
    data = {**timing_data("BASE", base), **timing_data("NEW", new)}
    if base.error is None:
        detail = f"{new.error} (BASE: {describe_timing(base)})"  # the message first: the table truncates
        return Finding(Severity.REGRESSION, "error", subject, "errored in NEW", detail, data)
    if new.error is None:
        detail = f"{describe_timing(new)}; BASE {describe_timing(base)}"
        return Finding(Severity.INFO, "error", subject, "now runs", detail, data)
    detail = new.error if new.error == base.error else f"{new.error} (BASE: {base.error})"
    return Finding(Severity.WARNING, "error", subject, "errored in BASE and NEW", detail, data)


def has_late_calls(timing: BenchTiming) -> bool:
    """Whether the benchmark reported late_queue_calls above 0 (an errored one reports none)."""
    return timing.late_queue_calls is not None and timing.late_queue_calls > 0


def late_calls_text(timing: BenchTiming) -> str:
    """A benchmark's late-queued calls per repetition for a message, with the statistic its time
    is too (the first word of its source: median or mean): "median 1 late-queued call", "mean 2.5
    late-queued calls" (a mean to one decimal)."""
    count = timing.late_queue_calls or 0.0
    number = str(int(count)) if count.is_integer() else f"{count:.1f}"
    return f"{timing.source.split()[0]} {number} late-queued call{'' if count == 1 else 's'}"


def late_queue_note(base: BenchTiming, new: BenchTiming) -> str | None:
    """Which side had late-queued calls (late_queue_calls > 0) and how many, with what that does
    to the time; None when neither had any or reported none."""
    sides = [
        f"{role}: {late_calls_text(timing)}"
        for role, timing in (("BASE", base), ("NEW", new))
        if has_late_calls(timing)
    ]
    if not sides:
        return None
    return "; ".join(sides) + ": the time holds launch gaps; raise --lead-cycles"


def with_late_queue(finding: Finding | None, base: BenchTiming, new: BenchTiming) -> Finding | None:
    """The benchmark's finding with its late-queued calls, where BASE or NEW had any: a time
    finding keeps its severity and gets them at the front of its detail (the table truncates the
    detail); a benchmark without a finding (within noise) gets a WARNING of its own, which does
    not fail. --json carries base_late_queue_calls / new_late_queue_calls (null: not reported).
    An errored side reports none (reduce_runs)."""
    note = late_queue_note(base, new)
    if note is None:
        return finding
    data = {"base_late_queue_calls": base.late_queue_calls, "new_late_queue_calls": new.late_queue_calls}
    if finding is not None:
        return replace(finding, detail=f"{note}; {finding.detail}", data={**finding.data, **data})
    roles = " and ".join(role for role, timing in (("BASE", base), ("NEW", new)) if has_late_calls(timing))
    return Finding(
        Severity.WARNING, "late-queue", (base.name,), f"late-queued calls in {roles}", note,
        {**timing_data("BASE", base), **timing_data("NEW", new), **data},
    )


def compare_timing(base: BenchTiming, new: BenchTiming, options: Options) -> Finding | None:
    """A slowdown is a regression only beyond max(spread BASE, spread NEW, floor x BASE); a
    benchmark with an error on either side goes to error_finding."""
    subject = (base.name,)
    if base.error is not None or new.error is not None:
        return error_finding(base, new)
    delta = new.center_ns - base.center_ns
    limit = max(base.spread_ns, new.spread_ns, options.perf_floor * base.center_ns)
    if abs(delta) <= limit:
        return None
    relative = delta / base.center_ns if base.center_ns > 0 else math.inf
    slower = delta > 0
    data = {
        "base_ns": base.center_ns, "new_ns": new.center_ns, "delta_ns": delta,
        "relative": relative if math.isfinite(relative) else None, "limit_ns": limit,
        "base_spread_ns": base.spread_ns, "new_spread_ns": new.spread_ns,
        "base_source": base.source, "new_source": new.source,
    }
    return Finding(
        Severity.REGRESSION if slower else Severity.IMPROVED,
        "performance",
        subject,
        f"{format_time(base.center_ns)} -> {format_time(new.center_ns)} ({format_percent(relative)})",
        f"{'slower' if slower else 'faster'} beyond ±{format_time(limit)} "
        f"(spread {format_time(base.spread_ns)} / {format_time(new.spread_ns)}, "
        f"floor {options.perf_floor:.0%})",
        data,
    )


def describe_context(role: str, bench: BenchFile) -> str:
    c = bench.context
    parts = [str(c[key]) for key in ("executable", "host_name", "date") if c.get(key)]
    return f"{role:<4}  {bench.path}: " + (", ".join(parts) or "no context")


# mla-bench's context keys that say how the figures were taken; when they differ, a time change
# may be the method's (e.g. the L2 flush changed from a write to a read on 2026-11-29).
METHOD_CONTEXT_KEYS = {
    "mla_device": "device",
    "mla_l2_flush": "L2 flush",
    "mla_timing": "timing",
    "mla_backend": "backend",
    "mla_kernels": "attention kernel choice",
}


def method_notes(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    notes = []
    for key, what in METHOD_CONTEXT_KEYS.items():
        b, n = base.get(key), new.get(key)
        if b is not None and n is not None and b != n:
            notes.append(f"{what} differs (BASE: {b}; NEW: {n}): part of a change may be the method's")
    return notes


def compare_benchmarks(base: BenchFile, new: BenchFile, options: Options) -> Comparison:
    findings: list[Finding] = []
    compared = within_noise = 0
    for name, base_timing in base.timings.items():
        new_timing = new.timings.get(name)
        if new_timing is None:
            detail = f"BASE: {describe_timing(base_timing)}"
            findings.append(missing_in_new((name,), detail, timing_data("BASE", base_timing), options))
            continue
        compared += 1
        finding = compare_timing(base_timing, new_timing, options)
        if finding is None:
            within_noise += 1  # in time; late-queued calls may still give it a WARNING
        finding = with_late_queue(finding, base_timing, new_timing)
        if finding is not None:
            findings.append(finding)
    for name, new_timing in new.timings.items():
        if name not in base.timings:
            findings.append(added_in_new(
                (name,), f"NEW: {describe_timing(new_timing)}", new_timing.error is not None,
                timing_data("NEW", new_timing),
            ))

    notes = []
    base_host, new_host = base.context.get("host_name"), new.context.get("host_name")
    if base_host and new_host and base_host != new_host:
        notes.append(f"BASE ran on {base_host}, NEW on {new_host}")
    notes.extend(method_notes(base.context, new.context))
    return Comparison(
        kind=Kind.BENCHMARK,
        subject_columns=("BENCHMARK",),
        findings=findings,
        compared={"benchmarks": compared, "within_noise": within_noise},
        compared_text=f"{plural(compared, 'benchmark')} compared, {within_noise} within noise",
        headers=[describe_context("BASE", base), describe_context("NEW", new)],
        notes=notes,
    )


# --------------------------------------------------------------------------------------------
# Output


def plural(count: int, word: str, word_plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (word_plural or word + 's')}"


def format_number(value: float) -> str:
    return f"{value:.3g}"


def format_percent(fraction: float) -> str:
    return "n/a" if not math.isfinite(fraction) else f"{fraction:+.1%}"


def format_time(nanoseconds: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(nanoseconds) >= scale:
            return f"{nanoseconds / scale:.3g} {unit}"
    return f"{nanoseconds:.3g} ns"


def printable(text: str) -> str:
    """Control characters (a newline in a benchmark name would split a row) as escapes."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def truncate(text: str, width: int) -> str:
    text = " ".join(text.split())  # one line, whatever the message held
    return text if len(text) <= width else text[: width - 3] + "..."


def render_table(comparison: Comparison) -> str:
    header = ("", *comparison.subject_columns, "CHANGE", "DETAIL")
    rows = [
        (f.severity.name, *map(printable, f.subject), printable(f.change), printable(truncate(f.detail, DETAIL_WIDTH)))
        for f in sorted(comparison.findings, key=lambda f: f.severity)  # stable: report order kept
    ]
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in (header, *rows)]
    return "\n".join(lines)


def summary_line(comparison: Comparison) -> str:
    counts = ", ".join(
        (
            plural(comparison.count(Severity.REGRESSION), "regression"),
            plural(comparison.count(Severity.WARNING), "warning"),
            plural(comparison.count(Severity.IMPROVED), "improvement"),
            f"{comparison.count(Severity.INFO)} info",
        )
    )
    outcome = f"; {comparison.outcome}" if comparison.outcome else ""
    result = "REGRESSION" if comparison.exit_code != EXIT_OK else "OK"
    return f"{comparison.compared_text}: {counts}{outcome}. {result} (exit {comparison.exit_code})."


def render(comparison: Comparison) -> str:
    parts = list(comparison.headers)
    parts += [f"note: {note}" for note in comparison.notes]
    parts.append("")
    parts.append(render_table(comparison) if comparison.findings else "No changes.")
    parts.append("")
    parts.append(summary_line(comparison))
    return "\n".join(parts)


def json_safe(value: Any) -> Any:
    """JSON has no NaN or infinity: write null, as the reports do."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def comparison_json(comparison: Comparison, base: Path, new: Path, options: Options) -> dict[str, Any]:
    columns = [column.lower() for column in comparison.subject_columns]
    return json_safe(
        {
            "schema": "mla-harness.comparison/1",
            "kind": "report" if comparison.kind is Kind.REPORT else "benchmark",
            "base": str(base),
            "new": str(new),
            "options": asdict(options),
            "exit_code": comparison.exit_code,
            "compared": comparison.compared,
            "counts": {severity.name.lower(): comparison.count(severity) for severity in Severity},
            "outcome": comparison.outcome or None,
            "notes": comparison.notes,
            "findings": [
                {
                    "severity": f.severity.name,
                    "category": f.category,
                    **dict(zip(columns, f.subject)),
                    "change": f.change,
                    "detail": f.detail or None,
                    **f.data,
                }
                for f in sorted(comparison.findings, key=lambda f: f.severity)
            ],
        }
    )


def write_json_atomically(path: Path, document: dict[str, Any], what: str = "--json file") -> None:
    """Temp file in the same folder, then rename: a reader never sees half a file. `what` names
    the file in the error."""
    try:
        descriptor, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise BadInput(f"cannot write {what} {path}: {error}") from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2, allow_nan=False)
            handle.write("\n")
        os.replace(temp_name, path)
    except OSError as error:
        Path(temp_name).unlink(missing_ok=True)
        raise BadInput(f"cannot write {what} {path}: {error}") from None


# --------------------------------------------------------------------------------------------
# Command line

DESCRIPTION = """\
Compare two mla-check reports (schema "mla-harness.report/1"), or two Google Benchmark JSON
outputs of mla-bench (--benchmark_out=F --benchmark_out_format=json), and print what changed.
The kind is detected from the content: "schema" means a report, "benchmarks" plus "context" a
benchmark file. Both files must be of the same kind (and, for reports, the same schema)."""

EPILOG = f"""\
reports
  Checks are keyed by (scenario name, check id). Verdicts, best to worst:
  {', '.join(VERDICTS)}.
  REGRESSION  a check's verdict became FAIL, NONFINITE, OOB or ERROR from PASS/SKIP, or got
              worse within those four; a scenario or check of BASE is missing in NEW (a warning
              with --allow-missing); a counter that was 0 (mismatches, nonfinite_mismatches,
              guard_bytes_changed, untouched_bytes_changed) became >0, or inputs_modified became
              true; metric drift with --fail-on-drift.
  WARNING     PASS -> SKIP (a regression with --strict-skip); metric drift: an error metric
              (max_abs_err, max_rel_err, cos_diff, any *_err) with NEW > BASE * (1 + --drift-rel)
              and NEW - BASE > --drift-abs. Null (NaN) metrics are not compared. A scenario or
              check added in NEW with a failing verdict.
  IMPROVED    a verdict got better (FAIL -> PASS, SKIP -> PASS, ERROR -> FAIL, ...).
  INFO        a scenario or check added in NEW.
  A scenario's own verdict is listed only when none of its checks accounts for it (a crash, an
  error before the first check). Metrics are not examined for checks whose verdict regressed.

benchmark files
  Benchmarks are keyed by run_name. Each is reduced to a centre (the median aggregate's
  real_time, else the mean of its iterations) and a spread (the stddev aggregate, else half the
  range of the iterations, else 0), in a common time unit. NEW is a performance REGRESSION when
    new - base > max(spread BASE, spread NEW, --perf-floor * base).
  A speed-up beyond the same limit is listed as IMPROVED and never fails. A benchmark with
  error_occurred (Google Benchmark's error_message is shown) is a REGRESSION when it errored in
  NEW only, a WARNING when it errored in both files, INFO ("now runs") when it errored in BASE
  only. A benchmark of BASE missing in NEW is a REGRESSION (a WARNING with --allow-missing); one
  added in NEW is INFO (a WARNING when it errored). User counters are not compared, except
  late_queue_calls (mla-bench and peer_timing.py on a GPU: timed calls whose start the GPU had
  reached before the call was queued, so the time holds the caller's launch gaps), read from
  the rows the time comes from (median aggregate, iterations' mean, mean aggregate; absent or
  NaN is not reported). Where BASE or NEW has late_queue_calls > 0, the benchmark's finding
  keeps its severity and names the side and the count ("NEW: median 85 late-queued calls: the
  time holds launch gaps; raise --lead-cycles"); a benchmark within noise gets a WARNING of its
  own ("late-queued calls in NEW"), which does not fail. --json: base_late_queue_calls and
  new_late_queue_calls (null: not reported).
  Google Benchmark writes the literal NaN (or Infinity) for a statistic it cannot compute, such
  as the cv aggregate of a counter whose mean is 0 (late_queue_calls): benchmark files may hold
  these literals. A real_time that is read (median, mean or stddev aggregate, iteration) must
  be a finite number; NaN or Infinity there is a malformed document (exit 3).

output
  A table of the changes only (regressions first), then one summary line. --json OUT also writes
  the comparison as JSON (written atomically: temp file + rename).

exit codes
  {EXIT_OK}  no regression
  {EXIT_REGRESSION}  reports: a regression
  {EXIT_PERF_REGRESSION}  benchmark files: a regression (slower beyond noise, errored in NEW, missing in NEW)
  {EXIT_BAD_INVOCATION}  bad invocation: missing or unreadable file (a directory, FIFO or device is not read,
     nor a file over {MAX_INPUT_BYTES >> 20} MiB), invalid JSON (a key given twice in one object
     included; in a report also NaN and Infinity literals: mla-check writes null), --json naming
     BASE or NEW, schema mismatch, a report compared with a benchmark file, a malformed document
     (e.g. a compared metric that is not a number or null, a time that is NaN, infinite or <= 0,
     two aggregates of one kind for a benchmark, a benchmark file without results), a bad option

See docs/report-format.md for the report format."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error; 2 means a performance regression here."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INVOCATION, f"{self.prog}: error: {message}\n")


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value


def output_path(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("the file name is empty")
    return Path(text)


def build_parser() -> ArgumentParser:
    defaults = Options()
    parser = ArgumentParser(
        prog="compare_reports.py",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("base", metavar="BASE", type=Path, help="the reference file (e.g. from the main branch)")
    parser.add_argument("new", metavar="NEW", type=Path, help="the file under review")
    parser.add_argument("--json", metavar="OUT", type=output_path, help="also write the comparison as JSON to OUT")
    parser.add_argument("--allow-missing", action="store_true",
                        help="a scenario, check or benchmark of BASE missing in NEW is a warning, "
                             "not a regression")

    reports = parser.add_argument_group("reports")
    reports.add_argument("--strict-skip", action="store_true",
                         help="PASS -> SKIP is a regression, not a warning")
    reports.add_argument("--fail-on-drift", action="store_true",
                         help="metric drift is a regression, not a warning")
    reports.add_argument("--drift-rel", metavar="R", type=non_negative_float, default=defaults.drift_rel,
                         help="drift needs NEW > BASE * (1 + R) (default: %(default)g)")
    reports.add_argument("--drift-abs", metavar="A", type=non_negative_float, default=defaults.drift_abs,
                         help="drift also needs NEW - BASE > A (default: %(default)g)")

    benchmarks = parser.add_argument_group("benchmark files")
    benchmarks.add_argument("--perf-floor", metavar="F", type=non_negative_float, default=defaults.perf_floor,
                            help="smallest slowdown that can count, relative to BASE (default: %(default)g)")
    return parser


def options_from(arguments: argparse.Namespace) -> Options:
    return Options(
        allow_missing=arguments.allow_missing,
        strict_skip=arguments.strict_skip,
        fail_on_drift=arguments.fail_on_drift,
        drift_rel=arguments.drift_rel,
        drift_abs=arguments.drift_abs,
        perf_floor=arguments.perf_floor,
    )


def compare_files(base_path: Path, new_path: Path, options: Options) -> Comparison:
    base_doc, new_doc = load_either(base_path, "BASE"), load_either(new_path, "NEW")
    base_kind, new_kind = detect_kind(base_doc, "BASE", base_path), detect_kind(new_doc, "NEW", new_path)
    if base_kind is not new_kind:
        raise BadInput(f"cannot compare different kinds: BASE is a {base_kind.value}, NEW is a {new_kind.value}")
    if base_kind is Kind.REPORT:
        check_schemas(base_doc, new_doc)
        return compare_reports(
            parse_report(base_doc, "BASE", base_path), parse_report(new_doc, "NEW", new_path), options
        )
    return compare_benchmarks(
        parse_benchmarks(base_doc, "BASE", base_path), parse_benchmarks(new_doc, "NEW", new_path), options
    )


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    options = options_from(arguments)
    try:
        if arguments.json is not None:
            for role, path in (("BASE", arguments.base), ("NEW", arguments.new)):
                if same_file(arguments.json, path):
                    raise BadInput(f"--json {arguments.json} is the {role} file (an input is never overwritten)")
        comparison = compare_files(arguments.base, arguments.new, options)
        if arguments.json:  # first: a failed write must not follow a printed verdict
            write_json_atomically(
                arguments.json, comparison_json(comparison, arguments.base, arguments.new, options)
            )
        print(render(comparison))
    except BadInput as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return EXIT_BAD_INVOCATION
    return comparison.exit_code


if __name__ == "__main__":
    sys.exit(main())
