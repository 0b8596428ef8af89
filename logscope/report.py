"""The Report every renderer shows: run summary, findings, incidents, skipped detectors.

`to_dict`/`to_json` are the public contract `logscope.report/1` (docs/report-json.md);
`to_markdown` and `to_html` escape everything that came from a log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from logscope import __version__
from logscope.model import SEVERITIES, SEVERITY_RANK, Finding, HealthRow, Incident, Run, jsonable
from logscope.present import (
    HTML_STYLE,
    NOTHING_READ,
    fmt_value,
    header_rows,
    html_escape,
    md_code,
    md_escape,
    md_value,
)

SCHEMA = "logscope.report/1"
#: Runs with at most this many training steps get the health table printed.
SHORT_RUN_STEPS = 10
UNREADABLE = "unreadable"  # the source kind of an input that could not be read


@dataclass
class Skipped:
    """A detector that did not run on this run, and why."""

    code: str
    name: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Skipped:
        return cls(**data)


@dataclass
class Report:
    """What `analyze`/`check` found on one run."""

    run: Run
    findings: list[Finding] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    kind: str = "analyze"
    #: key metrics of the last training step with their verdicts (`logscope.health`)
    health: list[HealthRow] = field(default_factory=list)
    #: metric names the registry does not know (`logscope.metric_registry.unknown`)
    unknown_metrics: list[str] = field(default_factory=list)

    @classmethod
    def unreadable(cls, path: str, error: str, kind: str = "analyze") -> Report:
        """The entry for an input that could not be read at all (the others are still reported)."""
        import hashlib

        from logscope.model import Source

        run_id = "unreadable-" + hashlib.blake2b(path.encode(), digest_size=6).hexdigest()
        return cls(run=Run(id=run_id, source=Source(UNREADABLE, path)), errors=[error], kind=kind)

    @property
    def readable(self) -> bool:
        """False for the entry of an input that could not be read (`unreadable`)."""
        return self.run.source.kind != UNREADABLE

    @property
    def nothing_read(self) -> bool:
        """Read, but no metric, config or finding came of it: nothing to judge (not healthy)."""
        return (
            self.readable
            and not self.findings
            and self.run.metrics.height == 0
            and not self.run.config_segments
        )

    @property
    def show_health(self) -> bool:
        """Renderers print the health table for short runs, where it is the main read-out."""
        return bool(self.health) and self.run.summary()["steps"]["count"] <= SHORT_RUN_STEPS + 1

    def timed_incidents(self) -> list[Incident]:
        """The incidents that are moments of training: holding a finding that is not config
        lint (config findings alone, at the config's first step, are about the launch)."""
        return [
            i for i in self.incidents if not all(self.findings[k].is_config for k in i.findings)
        ]

    @property
    def worst_severity(self) -> str | None:
        if not self.findings:
            return None
        return max(self.findings, key=lambda f: SEVERITY_RANK[f.severity]).severity

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(SEVERITIES, 0)
        for f in self.findings:
            out[f.severity] += 1
        return out

    def fails(self, threshold: str) -> bool:
        """True when a finding is at or above `threshold` ('never' never fails)."""
        if threshold == "never":
            return False
        return any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK[threshold] for f in self.findings)

    # ---- renderers --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "kind": self.kind,
            "logscope_version": __version__,
            "run": self.run.summary(),
            "summary": {"worst_severity": self.worst_severity, "counts": self.counts()},
            "findings": [f.to_dict() for f in self.findings],
            "incidents": [i.to_dict() for i in self.incidents],
            "skipped": [s.to_dict() for s in self.skipped],
            "errors": list(self.errors),
            "health": [h.to_dict() for h in self.health],
            "unknown_metrics": list(self.unknown_metrics),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], run: Run | None = None) -> Report:
        """The Report `to_dict` gave. Its run is `run` when given (e.g. the stored run), else
        one rebuilt from the summary (`Run.from_dict`). Raises ValueError for another schema,
        KeyError or TypeError for a damaged one."""
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} report: {data.get('schema')!r}")
        return cls(
            run=Run.from_dict(data["run"]) if run is None else run,
            findings=[Finding.from_dict(f) for f in data["findings"]],
            incidents=[Incident.from_dict(i) for i in data["incidents"]],
            skipped=[Skipped.from_dict(s) for s in data["skipped"]],
            errors=list(data["errors"]),
            kind=data["kind"],
            health=[HealthRow(**h) for h in data.get("health", [])],
            unknown_metrics=list(data.get("unknown_metrics", [])),
        )

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(jsonable(self.to_dict()), indent=indent, allow_nan=False)

    def to_markdown(self) -> str:
        return render_markdown([self])

    def to_html(self) -> str:
        return render_html([self])


def reports_to_json(reports: list[Report]) -> str:
    """One JSON object for one report, a JSON array for several."""
    if len(reports) == 1:
        return reports[0].to_json()
    return json.dumps([jsonable(r.to_dict()) for r in reports], indent=2, allow_nan=False)


# ---- the opening of a report: title, then the header table or what could not be read --------
_ESCAPE: dict[str, Callable[[Any], str]] = {"markdown": md_escape, "html": html_escape}
_TITLE = {"markdown": "# logscope {kind}: {path}\n", "html": "<h1>logscope {kind}: {path}</h1>"}
_ERROR = {
    "markdown": "**Could not read:** {error}\n",
    "html": "<p><strong>Could not read:</strong> {error}</p>",
}
_TABLE = {"markdown": "| | |\n|---|---|\n{rows}\n", "html": "<table>\n{rows}\n</table>"}
_ROW = {"markdown": "| {label} | {value} |", "html": "<tr><th>{label}</th><td>{value}</td></tr>"}


def _opening(report: Report, summary: dict[str, Any], markup: str) -> list[str]:
    """The start of one report in `markup` (markdown, html), as lines."""
    esc = _ESCAPE[markup]
    out = [_TITLE[markup].format(kind=report.kind, path=esc(summary["source"]["path"]))]
    if not report.readable:
        return out + [_ERROR[markup].format(error=esc(e)) for e in report.errors]
    rows = [_ROW[markup].format(label=k, value=v) for k, v in header_rows(summary, esc)]
    return [*out, _TABLE[markup].format(rows="\n".join(rows))]


# ---- Markdown ---------------------------------------------------------------------------
def render_markdown(reports: list[Report]) -> str:
    out: list[str] = []
    for report in reports:
        s = report.run.summary()
        out += _opening(report, s, "markdown")
        if not report.readable:
            continue
        ps = s["parse_stats"]
        counts = report.counts()
        out.append(
            "**Findings:** " + ", ".join(f"{counts[s_]} {s_}" for s_ in reversed(SEVERITIES)) + "\n"
        )
        if report.nothing_read:
            out.append(f"**{NOTHING_READ}**\n")
        for finding in report.findings:
            where = f" at step {finding.step}" if finding.step is not None else ""
            out.append(
                f"## {finding.severity.upper()} {finding.code} `{finding.name}`{where}: "
                f"{md_escape(finding.title)}\n"
            )
            out.append(md_escape(finding.message) + "\n")
            if finding.evidence:
                ev = ", ".join(f"{md_escape(k)}={md_value(v)}" for k, v in finding.evidence.items())
                out.append(f"Evidence: {ev}\n")
            for adv in finding.advice:
                line = (
                    f"- {md_code(adv.parameter)}: current {md_code(fmt_value(adv.current))}, "
                    f"suggested {md_code(fmt_value(adv.suggested))}"
                )
                if adv.override:
                    line += f", override {md_code(adv.override)}"
                line += f". {md_escape(adv.rationale)} ({md_escape(adv.source)})"
                out.append(line)
            out.append("")
        if report.show_health:
            out += _md_health(report.health)
        if report.incidents and any(len(i.findings) > 1 for i in report.incidents):
            out.append("## Incidents\n")
            for inc in report.incidents:
                if len(inc.findings) > 1:
                    out.append(
                        f"- {inc.severity}: {md_escape(inc.title)} (steps {inc.step}–{inc.end_step}, "
                        f"first mover {md_code(inc.first_mover)})"
                    )
            out.append("")
        if report.unknown_metrics:
            out.append("## Metrics logscope does not know\n")
            out.append(md_escape(unknown_line(report)))
            out.append("")
        if ps["skipped_examples"]:
            out.append("## Skipped lines\n")
            for reason, count in ps.get("skip_reasons", {}).items():
                out.append(f"- {count} line(s): {md_escape(reason)}")
            for ex in ps["skipped_examples"]:
                out.append(f"- line {ex['line']}: {md_code(ex['text'])}")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def unknown_line(report: Report, shown: int = 5) -> str:
    """`not understood: 3 metric keys (env/a, env/b, env/c); logscope explain KEY` ."""
    names = report.unknown_metrics
    listed = ", ".join(names[:shown]) + (
        f", … (+{len(names) - shown})" if len(names) > shown else ""
    )
    return (
        f"not understood: {len(names)} metric key{'s' if len(names) != 1 else ''} ({listed}); "
        "no diagnosis reads them"
    )


def _md_health(rows: list[HealthRow]) -> list[str]:
    steps = sorted({r.step for r in rows if r.step is not None})
    head = f" (step {steps[-1]})" if steps else ""
    out = [f"## Health of the last training step{head}\n"]
    out.append("| metric | value | healthy | verdict | note |\n|---|---|---|---|---|")
    for r in rows:
        out.append(
            f"| {md_escape(r.label)} | {md_escape(r.display)} | {md_escape(r.healthy)} | "
            f"{md_escape(r.verdict)} | {md_escape(r.note)} |"
        )
    out.append("")
    return out


# ---- HTML -------------------------------------------------------------------------------
_h = html_escape


def render_html(reports: list[Report]) -> str:
    return _html_page("logscope report", _html_reports(reports))


def _html_page(title: str, body: list[str]) -> str:
    head = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_h(title)}</title>",
        f"<style>{HTML_STYLE}</style></head><body>",
    ]
    return "\n".join([*head, *body, "</body></html>"])


def _html_reports(reports: list[Report]) -> list[str]:
    parts: list[str] = []
    for report in reports:
        parts += _opening(report, report.run.summary(), "html")
        if not report.readable:
            continue
        for f in report.findings:
            where = f" at step {f.step}" if f.step is not None else ""
            parts.append("<div class='finding'>")
            parts.append(
                f"<h3><span class='sev {_h(f.severity)}'>{_h(f.severity)}</span> "
                f"{_h(f.code)} <code>{_h(f.name)}</code>{_h(where)}: {_h(f.title)}</h3>"
            )
            parts.append(f"<p>{_h(f.message)}</p>")
            if f.evidence:
                parts.append(
                    "<p>Evidence: "
                    + ", ".join(f"{_h(k)}=<code>{_h(v)}</code>" for k, v in f.evidence.items())
                    + "</p>"
                )
            if f.advice:
                parts.append("<ul>")
                for a in f.advice:
                    ov = f" <pre>{_h(a.override)}</pre>" if a.override else ""
                    parts.append(
                        f"<li><code>{_h(a.parameter)}</code>: current <code>{_h(a.current)}</code>, "
                        f"suggested <code>{_h(a.suggested)}</code>. {_h(a.rationale)} "
                        f"<em>({_h(a.source)})</em>{ov}</li>"
                    )
                parts.append("</ul>")
            parts.append("</div>")
        if not report.findings:
            parts.append(f"<p>{NOTHING_READ if report.nothing_read else 'No findings.'}</p>")
        if report.show_health:
            parts.append("<h2>Health of the last training step</h2><table>")
            parts.append(
                "<tr><th>metric</th><th>value</th><th>healthy</th><th>verdict</th><th>note</th></tr>"
            )
            parts += [
                f"<tr><td>{_h(r.label)}</td><td>{_h(r.display)}</td><td>{_h(r.healthy)}</td>"
                f"<td>{_h(r.verdict)}</td><td>{_h(r.note)}</td></tr>"
                for r in report.health
            ]
            parts.append("</table>")
        if report.unknown_metrics:
            parts.append(f"<p><em>{_h(unknown_line(report))}</em></p>")
    return parts


# ---- a fleet: the triage table, then each report on request ---------------------------------
def render_fleet_markdown(
    reports: list[Report], passed: Sequence[str] = (), details: bool = False
) -> str:
    from logscope import fleet

    view = fleet.overview(reports, passed)
    out = [f"# logscope fleet: {len(view.pairs)} runs\n", md_escape(view.headline) + "\n"]
    out.append("| " + " | ".join(fleet.COLUMNS) + " |")
    out.append("|" + "---|" * len(fleet.COLUMNS))
    out += ["| " + " | ".join(md_escape(c) for c in cells) + " |" for cells in view.cells]
    text = "\n".join(out) + "\n"
    if details:
        text += "\n" + render_markdown([r for _, r in view.pairs])
    return text


def render_fleet_html(
    reports: list[Report], passed: Sequence[str] = (), details: bool = False
) -> str:
    from logscope import fleet

    view = fleet.overview(reports, passed)
    parts = [
        f"<h1>logscope fleet: {len(view.pairs)} runs</h1>",
        f"<p>{_h(view.headline)}</p>",
        "<table>",
        "<tr>" + "".join(f"<th>{_h(c)}</th>" for c in fleet.COLUMNS) + "</tr>",
        *("<tr>" + "".join(f"<td>{_h(c)}</td>" for c in cells) + "</tr>" for cells in view.cells),
        "</table>",
    ]
    if details:
        parts += _html_reports([r for _, r in view.pairs])
    return _html_page("logscope fleet", parts)
