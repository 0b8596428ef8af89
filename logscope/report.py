"""The Report every renderer shows: run summary, findings, incidents, skipped detectors.

`to_dict`/`to_json` are the public contract `logscope.report/1` (docs/report-json.md);
`to_markdown` and `to_html` escape everything that came from a log.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

from logscope import __version__
from logscope.health import SHORT_RUN_STEPS, HealthRow
from logscope.model import SEVERITIES, SEVERITY_RANK, Finding, Incident, Run, jsonable

SCHEMA = "logscope.report/1"
UNREADABLE = "unreadable"  # the source kind of an input that could not be read


@dataclass
class Skipped:
    """A detector that did not run on this run, and why."""

    code: str
    name: str
    reason: str


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
    def show_health(self) -> bool:
        """Renderers print the health table for short runs, where it is the main read-out."""
        return bool(self.health) and self.run.summary()["steps"]["count"] <= SHORT_RUN_STEPS + 1

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
            "skipped": [{"code": s.code, "name": s.name, "reason": s.reason} for s in self.skipped],
            "errors": list(self.errors),
            "health": [h.to_dict() for h in self.health],
        }

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


# ---- Markdown ---------------------------------------------------------------------------
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def md_escape(text: Any) -> str:
    """Escape Markdown control characters (log content is shown as text, never as markup)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def md_code(text: Any) -> str:
    """An inline code span that stays one span whatever backticks `text` holds."""
    s = str(text).replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or longest else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _fmt_value(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _md_value(value: Any) -> str:
    """Numbers as code spans; text (which may come from a log) escaped."""
    if isinstance(value, str):
        return md_escape(value)
    return md_code(_fmt_value(value))


def render_markdown(reports: list[Report]) -> str:
    out: list[str] = []
    for report in reports:
        s = report.run.summary()
        out.append(f"# logscope {report.kind}: {md_escape(s['source']['path'])}\n")
        if not report.readable:
            out += [f"**Could not read:** {md_escape(e)}\n" for e in report.errors]
            continue
        meta = s["meta"]
        out.append("| | |\n|---|---|")
        out.append(f"| source | {md_escape(s['source']['kind'])} |")
        for key in ("verl_version", "algorithm", "project", "experiment"):
            if meta.get(key) is not None:
                out.append(f"| {key.replace('_', ' ')} | {md_escape(meta[key])} |")
        st = s["steps"]
        out.append(f"| steps | {st['count']} ({st['first']}–{st['last']}) |")
        out.append(f"| metrics | {s['metrics_count']} |")
        out.append(f"| config segments | {len(s['config_segments'])} |")
        ps = s["parse_stats"]
        out.append(
            f"| lines | {ps['lines_read']} read, {ps['step_lines']} step lines, "
            f"{ps['skipped_lines']} skipped |\n"
        )
        counts = report.counts()
        out.append(
            "**Findings:** " + ", ".join(f"{counts[s_]} {s_}" for s_ in reversed(SEVERITIES)) + "\n"
        )
        for finding in report.findings:
            where = f" at step {finding.step}" if finding.step is not None else ""
            out.append(
                f"## {finding.severity.upper()} {finding.code} `{finding.name}`{where}: "
                f"{md_escape(finding.title)}\n"
            )
            out.append(md_escape(finding.message) + "\n")
            if finding.evidence:
                ev = ", ".join(
                    f"{md_escape(k)}={_md_value(v)}" for k, v in finding.evidence.items()
                )
                out.append(f"Evidence: {ev}\n")
            for adv in finding.advice:
                line = (
                    f"- {md_code(adv.parameter)}: current {md_code(_fmt_value(adv.current))}, "
                    f"suggested {md_code(_fmt_value(adv.suggested))}"
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
        if ps["skipped_examples"]:
            out.append("## Skipped lines\n")
            for reason, count in ps.get("skip_reasons", {}).items():
                out.append(f"- {count} line(s): {md_escape(reason)}")
            for ex in ps["skipped_examples"]:
                out.append(f"- line {ex['line']}: {md_code(ex['text'])}")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


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
HTML_STYLE = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}
.sev{display:inline-block;padding:0 .5em;border-radius:4px;color:#fff;font-size:.85em}
.critical{background:#8b0000}.error{background:#c0392b}.warning{background:#d68910}.info{background:#2471a3}
.finding{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:1em 0}
code,pre{background:#f4f4f4;padding:0 .3em;border-radius:3px}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .6em;text-align:left}
"""


def html_escape(value: Any) -> str:
    """A value as HTML text (log content is never markup)."""
    return html.escape(_fmt_value(value) if not isinstance(value, str) else value, quote=True)


_h = html_escape


def render_html(reports: list[Report]) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>logscope report</title>",
        f"<style>{HTML_STYLE}</style></head><body>",
    ]
    for report in reports:
        s = report.run.summary()
        parts.append(f"<h1>logscope {_h(report.kind)}: {_h(s['source']['path'])}</h1>")
        if not report.readable:
            parts += [f"<p><strong>Could not read:</strong> {_h(e)}</p>" for e in report.errors]
            continue
        parts.append("<table>")
        rows = [("source", s["source"]["kind"])]
        rows += [
            (k, s["meta"][k])
            for k in ("verl_version", "algorithm", "project", "experiment")
            if s["meta"].get(k) is not None
        ]
        st = s["steps"]
        rows += [
            ("steps", f"{st['count']} ({st['first']}–{st['last']})"),
            ("metrics", s["metrics_count"]),
            ("config segments", len(s["config_segments"])),
            (
                "lines",
                f"{s['parse_stats']['lines_read']} read, {s['parse_stats']['skipped_lines']} skipped",
            ),
        ]
        parts += [f"<tr><th>{_h(k)}</th><td>{_h(v)}</td></tr>" for k, v in rows]
        parts.append("</table>")
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
            parts.append("<p>No findings.</p>")
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
    parts.append("</body></html>")
    return "\n".join(parts)
