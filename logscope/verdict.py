"""One-shot verdicts: a compact JSON of a report (or a fleet) for an agent's context window.

`verdict(report)` (`logscope.verdict/1`) says, in at most `MAX_BYTES` of JSON whatever the log:
the overall status, the first incident (step, title, first mover), the top findings with their
overrides, what was not understood (unknown metric keys, skipped lines) and the run. Status:

- `crashed`: the run-crashed diagnosis (LS017) at error or above;
- `broken`: otherwise the worst finding is error or critical;
- `warning`: the worst finding is a warning;
- `no-data`: nothing was read to judge: no metric, no config and no finding (an excerpt
  logscope does not understand is not a healthy run);
- `healthy`: only info findings, or none;
- `unreadable`: the input could not be read (fleets only: one unreadable run is a CLI error).

`fleet_verdict(reports)` (`logscope.fleet-verdict/1`) counts runs by status and gives the worst
runs' verdicts (triage order, `logscope.fleet.triage`), as many as fit in `MAX_BYTES`. Both are
built from the Report the other formats render; nothing is recomputed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from logscope.model import SEVERITY_RANK, Finding
from logscope.report import Report

SCHEMA = "logscope.verdict/1"
FLEET_SCHEMA = "logscope.fleet-verdict/1"
#: the size a verdict's JSON (indent 2) never exceeds
MAX_BYTES = 4096
CRASH_CODE = "LS017"
STATUSES = ("crashed", "broken", "warning", "no-data", "healthy", "unreadable")
TOP_FINDINGS = 3
#: unknown metric keys named (the count is always given)
UNKNOWN_SHOWN = 5
#: runs of a fleet given in full at most (fewer when they would not fit)
FLEET_RUNS = 10

#: (message, override, path, unknown-key length limits, overrides per finding), widest first:
#: a verdict takes the first that fits MAX_BYTES
_BUDGETS = (
    (240, 160, 200, 60, 3),
    (160, 120, 160, 48, 2),
    (100, 100, 120, 40, 1),
    (60, 80, 80, 32, 1),
    (0, 60, 60, 24, 1),
)


def status(report: Report) -> str:
    """crashed / broken / warning / no-data / healthy / unreadable (see the module docstring)."""
    if not report.readable:
        return "unreadable"
    if report.nothing_read:
        return "no-data"
    if any(
        f.code == CRASH_CODE and SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"]
        for f in report.findings
    ):
        return "crashed"
    worst = report.worst_severity
    if worst in ("error", "critical"):
        return "broken"
    return "warning" if worst == "warning" else "healthy"


def _cut(text: str | None, limit: int) -> str | None:
    """`text` at most `limit` characters (an ellipsis marks a cut); None stays None."""
    if text is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…"


def _cut_left(text: str, limit: int) -> str:
    """A path at most `limit` characters, keeping its end (the file name)."""
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def top_findings(report: Report, n: int = TOP_FINDINGS) -> list[Finding]:
    """The `n` findings that matter most: highest severity, then earliest step, then file order."""
    order = sorted(
        range(len(report.findings)),
        key=lambda k: (
            -SEVERITY_RANK[report.findings[k].severity],
            report.findings[k].step if report.findings[k].step is not None else 1 << 62,
            k,
        ),
    )
    return [report.findings[k] for k in order[:n]]


def _finding(f: Finding, budget: tuple[int, int, int, int, int]) -> dict[str, Any]:
    message, override, _, _, per = budget
    overrides = [a.override for a in f.advice if a.override and a.changes]
    out: dict[str, Any] = {
        "code": f.code,
        "name": f.name,
        "severity": f.severity,
        "step": f.step,
        "title": _cut(f.title, 120),
        "overrides": [_cut(o, override) for o in overrides[:per]],
    }
    if len(overrides) > per:
        out["more_overrides"] = len(overrides) - per
    if message:
        out["message"] = _cut(f.message, message)
    return out


def _first_incident(report: Report) -> dict[str, Any] | None:
    """The earliest incident of training (config lint left out); one without a step (a crash
    before the first step) only when none has a step."""
    timed = report.timed_incidents()
    if not timed:
        return None
    first = min(timed, key=lambda i: (i.step is None, i.step or 0))
    return {
        "step": first.step,
        "end_step": first.end_step,
        "severity": first.severity,
        "title": _cut(first.title, 120),
        "first_mover": first.first_mover,
    }


def _build(report: Report, budget: tuple[int, int, int, int, int]) -> dict[str, Any]:
    _, _, path_len, key_len, _ = budget
    run = report.run
    summary = run.summary()
    steps = summary["steps"]
    parse = summary["parse_stats"]
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "status": status(report),
        "worst_severity": report.worst_severity,
        "run": {
            "id": run.id,
            "source": {"kind": run.source.kind, "path": _cut_left(run.source.path, path_len)},
            "steps": {"count": steps["count"], "first": steps["first"], "last": steps["last"]},
            "verl_version": _cut(_str(run.meta.get("verl_version")), 40),
            "algorithm": _cut(_str(run.meta.get("algorithm")), 40),
        },
        "counts": report.counts(),
        "first_incident": _first_incident(report),
        "top_findings": [_finding(f, budget) for f in top_findings(report)],
        "not_understood": {
            "unknown_metrics": len(report.unknown_metrics),
            "unknown_examples": [_cut(k, key_len) for k in report.unknown_metrics[:UNKNOWN_SHOWN]],
            "skipped_lines": parse["skipped_lines"],
            "skipped_detectors": len(report.skipped),
        },
    }
    crash = next((f for f in report.findings if f.code == CRASH_CODE), None)
    if crash is not None:
        from logscope.fleet import _crash_cause

        out["crash_cause"] = _cut(_crash_cause(crash.evidence), 120)
    if report.errors:
        out["errors"] = [_cut(e, 200) for e in report.errors[:2]]
    return out


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def size(data: dict[str, Any]) -> int:
    """Bytes of `data` as `to_json` writes it."""
    return len(to_json(data).encode())


def verdict(report: Report) -> dict[str, Any]:
    """The verdict of one report, at most MAX_BYTES of JSON (texts are cut to fit)."""
    for budget in _BUDGETS:
        out = _build(report, budget)
        if size(out) <= MAX_BYTES:
            return out
    out["top_findings"] = out["top_findings"][:1]  # unreachable with the limits above
    return out


def _run_line(report: Report) -> dict[str, Any]:
    """A fleet's run in brief: status, path, steps, first incident, top finding."""
    full = verdict(report)
    top = full["top_findings"][:1]
    return {
        "status": full["status"],
        "run": full["run"]["id"][:12],
        "path": _cut_left(report.run.source.path, 120),
        "steps": full["run"]["steps"]["count"],
        "worst_severity": full["worst_severity"],
        "findings": len(report.findings),
        "first_incident": full["first_incident"],
        "top_finding": {k: top[0][k] for k in ("code", "name", "severity", "step", "overrides")}
        if top
        else None,
        **({"error": _cut("; ".join(report.errors), 160)} if report.errors else {}),
    }


def fleet_verdict(reports: Sequence[Report], passed: Sequence[str] = ()) -> dict[str, Any]:
    """Runs counted by status, then the worst runs in brief (as many as fit MAX_BYTES)."""
    from logscope.fleet import triage

    ordered = [r for _, r in triage(reports)]
    by_status = dict.fromkeys(STATUSES, 0)
    for r in reports:
        by_status[status(r)] += 1
    out: dict[str, Any] = {
        "schema": FLEET_SCHEMA,
        "status": _fleet_status(by_status),
        "runs": len(reports),
        "by_status": {k: v for k, v in by_status.items() if v},
        "passed_over": len(passed),
        "worst_runs": [],
        "omitted_runs": len(ordered),
    }
    for report in ordered[:FLEET_RUNS]:
        out["worst_runs"].append(_run_line(report))
        out["omitted_runs"] -= 1
        if size(out) > MAX_BYTES:
            out["worst_runs"].pop()
            out["omitted_runs"] += 1
            break
    return out


def _fleet_status(by_status: dict[str, int]) -> str:
    """The worst status among the readable runs (`unreadable` when none could be read)."""
    for name in STATUSES[:-1]:
        if by_status[name]:
            return name
    return "unreadable" if by_status["unreadable"] else "healthy"


def to_json(data: dict[str, Any]) -> str:
    """The verdict's JSON text (indent 2, as the CLI prints it)."""
    from logscope.model import jsonable

    return json.dumps(jsonable(data), indent=2, ensure_ascii=False, allow_nan=False)
