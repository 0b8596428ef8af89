"""Terminal rendering of a Report with rich. Log content is always plain Text (never markup)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from logscope.model import SEVERITIES
from logscope.present import (
    NOTHING_READ,
    duration,
    evidence_text,
    fmt_value,
    meta_rows,
    nodes_text,
    overrides,
    segments_text,
    step_span,
)
from logscope.report import Report, unknown_line

SEVERITY_STYLE = {
    "critical": "bold white on red",
    "error": "bold red",
    "warning": "bold yellow",
    "info": "cyan",
}


def summary_table(s: dict[str, Any]) -> Table:
    """The run's header from `Run.summary()`."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    meta = s["meta"]
    table.add_row("source", Text(f"{s['source']['kind']}  {s['source']['path']}"))
    for label, value in meta_rows(meta):
        table.add_row(label, Text(value))
    if meta.get("segments"):
        table.add_row("segments", Text(segments_text(meta["segments"])))
    if meta.get("nodes"):
        table.add_row("nodes", Text(nodes_text(meta["nodes"])))
    st = s["steps"]
    if st["count"]:
        table.add_row("steps", Text(f"{st['count']} (step {st['first']} to {st['last']})"))
    else:
        table.add_row("steps", Text("none logged"))
    table.add_row("metrics", Text(str(s["metrics_count"])))
    if s["wall_time_s"]:
        table.add_row("wall time", Text(duration(s["wall_time_s"])))
    segs = s["config_segments"]
    if segs:
        firsts = ", ".join(str(x["first_step"]) for x in segs)
        table.add_row("config", Text(f"{len(segs)} segment(s), from step {firsts}"))
    else:
        table.add_row("config", Text("no config dump found"))
    if meta.get("value_resolution"):
        table.add_row("values", Text("printed with 3 decimals (0.000 means |x| < 5e-4)"))
    return table


def finding_panel(finding: Any) -> Panel:
    style = SEVERITY_STYLE[finding.severity]
    head = Text()
    head.append(f" {finding.severity.upper()} ", style=style)
    head.append(f" {finding.code} ", style="bold")
    head.append(finding.name, style="magenta")
    if finding.step is not None:
        head.append(f"  {step_span(finding.step, finding.end_step)}", style="bold")
    body: list[Any] = [Text(finding.message)]
    if finding.evidence:
        ev = Text("evidence: ", style="dim")
        ev.append(evidence_text(finding.evidence), style="dim")
        body.append(ev)
    for a in finding.advice:
        # one block per parameter reads well at any terminal width (a table folds words)
        line = Text("→ ", style="bold")
        line.append(a.parameter, style="bold")
        line.append(f": {fmt_value(a.current)} → ")
        line.append(fmt_value(a.suggested), style="green")
        body.append(line)
        body.append(Padding(Text(f"{a.rationale} [{a.source}]", style="dim"), (0, 0, 0, 2)))
    if ovs := overrides(finding.advice):
        ov = Text("override: ", style="bold")
        ov.append(" ".join(ovs), style="green")
        body.append(ov)
    return Panel(Group(*body), title=head, title_align="left", border_style=style.split()[-1])


#: verdicts of the health table, by how they are shown
VERDICT_STYLE = {
    "ok": "green",
    "low": "bold yellow",
    "high": "bold yellow",
    "constant": "bold yellow",
}
#: up to this many skipped detectors are named; more are counted
MAX_SKIPPED_NAMES = 8


def health_table(report: Report) -> Table:
    """The key metrics of the last training step, with their healthy ranges and verdicts."""
    steps = sorted({r.step for r in report.health if r.step is not None})
    title = "Health of the last training step" + (f" (step {steps[-1]})" if steps else "")
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in ("metric", "value", "healthy", "verdict", "note"):
        table.add_column(column)
    for row in report.health:
        table.add_row(
            Text(row.label),
            Text(row.display),
            Text(row.healthy),
            Text(row.verdict, style=VERDICT_STYLE.get(row.verdict, "dim")),
            Text(row.note, style="dim"),
        )
    return table


def skipped_line(report: Report) -> str:
    """`not applicable here (N): a, b` for a few; with many (an excerpt) only the count."""
    n = len(report.skipped)
    if n <= MAX_SKIPPED_NAMES:
        return f"not applicable here ({n}): " + ", ".join(s.name for s in report.skipped)
    return (
        f"not applicable here: {n} diagnoses whose metrics or text are not in this log "
        "(--format json lists them)"
    )


def render_report(report: Report, console: Console) -> None:
    """Print one report: summary, findings by severity, incidents, parse stats."""
    path = report.run.source.path
    if not report.readable:
        for err in report.errors:
            console.print(
                Panel(
                    Text(f"{path}: {err}"),
                    title=Text(f"logscope {report.kind}: could not read"),
                    title_align="left",
                    border_style="red",
                )
            )
        console.print()
        return
    s = report.run.summary()
    console.print(
        Panel(summary_table(s), title=Text(f"logscope {report.kind}: {path}"), title_align="left")
    )
    for severity in reversed(SEVERITIES):
        for finding in (f for f in report.findings if f.severity == severity):
            console.print(finding_panel(finding))
    if report.show_health:
        console.print(health_table(report))
    multi = [i for i in report.incidents if len(i.findings) > 1]
    if multi:
        table = Table(title="Incidents", title_justify="left", show_lines=False)
        table.add_column("severity")
        table.add_column("steps")
        table.add_column("first mover")
        table.add_column("story")
        for inc in multi:
            table.add_row(
                Text(inc.severity, style=SEVERITY_STYLE[inc.severity]),
                Text(f"{inc.step}–{inc.end_step}"),
                Text(inc.first_mover),
                Text(inc.title),
            )
        console.print(table)
    ps = s["parse_stats"]
    if ps["lines_read"]:  # a check of a command or YAML reads no log lines
        stats = Text(
            f"parsed {ps['lines_read']:,} lines: {ps['step_lines']:,} step lines, "
            f"{s['events_count']:,} events, {ps['skipped_lines']:,} skipped",
            style="dim",
        )
        console.print(stats)
    for reason, count in ps["skip_reasons"].items():
        console.print(Text(f"  skipped {count:,} line(s): {reason}", style="dim"))
    for example in ps["skipped_examples"]:
        console.print(Text(f"  skipped line {example['line']}: {example['text']}", style="dim"))
    for note in ps["notes"]:
        console.print(Text(f"  note: {note}", style="dim"))
    if report.skipped:
        console.print(Text(skipped_line(report), style="dim"))
    if report.unknown_metrics:
        console.print(Text(unknown_line(report), style="dim"))
    for err in report.errors:
        console.print(Text(f"detector error: {err}", style="red"))
    counts = report.counts()
    verdict = Text()
    if report.findings:
        verdict.append(f"{len(report.findings)} finding(s): ", style="bold")
        verdict.append(
            ", ".join(f"{counts[s]} {s}" for s in reversed(SEVERITIES) if counts[s]),
        )
    elif report.nothing_read:
        verdict.append(NOTHING_READ, style="bold yellow")
    else:
        verdict.append("No findings.", style="bold green")
    console.print(verdict)
    console.print()


PASSED_SHOWN = 5


def render_fleet(
    reports: list[Report], console: Console, passed: Sequence[str] = (), details: bool = False
) -> None:
    """Print the triage table of many runs, worst first; then each report with `details`."""
    from logscope import fleet

    view = fleet.overview(reports, passed)
    shown, left_out = _fitting_columns(view.cells, console.width)
    table = Table(title=Text(view.headline), title_justify="left")
    for n in shown:
        column = fleet.COLUMNS[n]
        table.add_column(
            column,
            overflow="fold",
            no_wrap=column in ("worst", "steps"),
            min_width=_column_floor(view.cells, n),
        )
    at = fleet.COLUMNS.index("worst")
    for cells in view.cells:
        style = SEVERITY_STYLE.get(cells[at], "")
        table.add_row(*(Text(cells[n], style=style if n == at else "") for n in shown))
    console.print(table)
    if left_out:
        console.print(
            Text(
                f"Not shown at this width: {', '.join(left_out)} (a wider terminal, "
                "--format markdown or json show every column).",
                style="dim",
            )
        )
    for line in passed[:PASSED_SHOWN]:
        console.print(Text(f"passed over: {line}", style="dim"))
    if len(passed) > PASSED_SHOWN:
        console.print(Text(f"passed over {len(passed) - PASSED_SHOWN} more", style="dim"))
    if details:
        for _, report in view.pairs:
            render_report(report, console)
    else:
        console.print(Text("Each run's report: add --details.", style="dim"))


# On a narrow terminal the triage table keeps the columns a reader needs first; these go first,
# in this order, while the table would not fit (a crash cause is also among the diagnoses). A
# column no run has a value for is never shown.
DROPPED_FIRST = ("framework", "last", "GPU-h after", "first incident", "crash")
#: characters a line the run and diagnoses columns keep before the table drops a column
NAME_FLOOR = 20


def _column_floor(cells: list[list[str]], n: int) -> int:
    """The width column `n` keeps: its longest cell, at most NAME_FLOOR for the long ones."""
    from logscope import fleet

    longest = max([len(row[n]) for row in cells] + [len(fleet.COLUMNS[n].split()[0])])
    return min(longest, NAME_FLOOR)


def _fitting_columns(cells: list[list[str]], width: int) -> tuple[list[int], list[str]]:
    """(indexes of the columns to show, names of those left out for want of `width`)."""
    from logscope import fleet

    shown = [n for n in range(len(fleet.COLUMNS)) if any(row[n] for row in cells)]
    left_out: list[str] = []
    for name in DROPPED_FIRST:
        need = sum(_column_floor(cells, n) + 3 for n in shown) + 1  # a cell's padding and rule
        n = fleet.COLUMNS.index(name)
        if need <= width:
            break
        if n in shown:
            shown.remove(n)
            left_out.append(name)
    return shown, left_out
