"""How a report's values and header read, in every renderer (terminal, Markdown, HTML, Slack, app).

One place for: a value as text (`fmt_value`; `fmt_number` by magnitude for tables and charts),
the escaping of log text for Markdown and HTML, the rows of a run's header, a finding's step
span and the overrides of its advice. Renderers differ in markup only; what they say comes from
here.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, SupportsFloat

#: a value the run does not tell (e.g. the `current` of an unset config key)
UNKNOWN = "unknown"
#: an empty cell of a table
DASH = "–"
#: what a report says instead of "No findings" when nothing in the input could be judged
NOTHING_READ = (
    "Nothing to judge: no training metric, config or failure signature was read from this "
    "input, so the absence of findings says nothing about the run (the notes above say what "
    "was read)."
)
#: the run's meta fields a header shows, in order
META_FIELDS = ("framework", "verl_version", "algorithm", "project", "experiment")


def fmt_value(value: Any, digits: int = 6, missing: str = UNKNOWN) -> str:
    """A value as text: floats to `digits` significant digits, None as `missing`."""
    if value is None:
        return missing
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def fmt_number(value: Any, digits: int = 4, missing: str = DASH, sign: bool = False) -> str:
    """A number as text by its magnitude, for tables and charts: `1.5e-06` under 1e-3,
    `0.0123` / `12.35` (`digits` significant), `1,168` from 1,000 on, exponent from 1e15;
    ints with thousands separators; None as `missing`; other values as str. `sign`: a `+`
    before positive numbers (a delta). The same rule as `charts.value_format`."""
    if value is None:
        return missing
    if isinstance(value, bool) or not isinstance(value, int | float | SupportsFloat):
        return str(value)
    plus = "+" if sign else ""
    if isinstance(value, int) or type(value).__name__.startswith(("int", "uint")):
        return f"{int(value):{plus},}"
    v = float(value)
    if not math.isfinite(v) or v == 0:
        return "0" if v == 0 else str(v)
    a = abs(v)
    if a < 1e-3 or a >= 1e15:
        mantissa, exp = f"{v:{plus}.{digits - 1}e}".split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{exp}"
    if a >= 1000:
        return f"{v:{plus},.0f}"
    return f"{v:{plus}.{digits}g}"


# ---- escaping ------------------------------------------------------------------------------
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


def md_value(value: Any) -> str:
    """Numbers as code spans; text (which may come from a log) escaped."""
    if isinstance(value, str):
        return md_escape(value)
    return md_code(fmt_value(value))


def html_escape(value: Any) -> str:
    """A value as HTML text (log content is never markup)."""
    return html.escape(value if isinstance(value, str) else fmt_value(value), quote=True)


HTML_STYLE = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}
.sev{display:inline-block;padding:0 .5em;border-radius:4px;color:#fff;font-size:.85em}
.critical{background:#8b0000}.error{background:#c0392b}.warning{background:#d68910}.info{background:#2471a3}
.finding{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:1em 0}
code,pre{background:#f4f4f4;padding:0 .3em;border-radius:3px}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .6em;text-align:left}
"""


# ---- the run's header ----------------------------------------------------------------------
def meta_rows(meta: dict[str, Any], escape: Callable[[Any], str] = str) -> list[tuple[str, str]]:
    """(label, value) of the meta fields the run has: `verl version`, `algorithm`, …; `escape`
    is applied to the values (they come from the log)."""
    return [
        (key.replace("_", " "), escape(meta[key]))
        for key in META_FIELDS
        if meta.get(key) is not None
    ]


def header_rows(
    summary: dict[str, Any], escape: Callable[[Any], str] = str
) -> list[tuple[str, str]]:
    """The header table of a report (Markdown, HTML) from `Run.summary()`; `escape` is applied
    to what came from the log (the source kind and meta values)."""
    steps, lines = summary["steps"], summary["parse_stats"]
    return [
        ("source", escape(summary["source"]["kind"])),
        *meta_rows(summary["meta"], escape),
        *(
            [("segments", escape(segments_text(summary["meta"]["segments"])))]
            if summary["meta"].get("segments")
            else []
        ),
        *(
            [("nodes", escape(nodes_text(summary["meta"]["nodes"])))]
            if summary["meta"].get("nodes")
            else []
        ),
        ("steps", f"{steps['count']} ({steps['first']}–{steps['last']})"),
        ("metrics", str(summary["metrics_count"])),
        ("config segments", str(len(summary["config_segments"]))),
        (
            "lines",
            f"{lines['lines_read']} read, {lines['step_lines']} step lines, "
            f"{lines['skipped_lines']} skipped",
        ),
    ]


def segments_text(segments: list[dict[str, Any]]) -> str:
    """`3 files: a.log (steps 1–130, lines 1–900), b.log (…)` of a stitched run."""
    parts = [
        f"{Path(s['path']).name} (steps {s['first_step']}–{s['last_step']}, "
        f"lines {s['first_line']}–{s['last_line']})"
        for s in segments
    ]
    return f"{len(segments)} files: " + ", ".join(parts)


def nodes_text(nodes: list[dict[str, Any]]) -> str:
    """`2 nodes: node0/train.log (head), node1/worker.log (4 events)` of a multi-node run."""
    parts = [
        f"{Path(n['path']).parent.name}/{Path(n['path']).name} "
        + ("(head)" if n["role"] == "head" else f"({n['events']} events)")
        for n in nodes
    ]
    return f"{len(nodes)} nodes: " + ", ".join(parts)


def duration(seconds: float) -> str:
    """`1h 02m 03s`, or `2m 03s` under an hour."""
    hours, rem = divmod(int(seconds), 3600)
    minutes, secs = divmod(rem, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


# ---- findings ------------------------------------------------------------------------------
def step_span(step: int | None, end_step: int | None) -> str:
    """`step 5`, `step 5–9` for an episode, "" for a run-level finding."""
    if step is None:
        return ""
    if end_step is not None and end_step != step:
        return f"step {step}–{end_step}"
    return f"step {step}"


#: characters an evidence value takes in a one-line view before it is summarised (JSON,
#: Markdown and HTML keep every value whole)
EVIDENCE_VALUE_CHARS = 80


def evidence_text(
    evidence: dict[str, Any], digits: int = 6, missing: str = UNKNOWN, limit: int | None = None
) -> str:
    """`key=value, …` of a finding's evidence (the first `limit` entries); a long nested value
    as a summary (`{5 entries: a, b, …}`, `[3 items: …]`)."""
    items = list(evidence.items())[:limit]
    return ", ".join(f"{k}={_evidence_value(v, digits, missing)}" for k, v in items)


def _evidence_value(value: Any, digits: int, missing: str) -> str:
    text = fmt_value(value, digits, missing)
    if len(text) <= EVIDENCE_VALUE_CHARS or not isinstance(value, dict | list | tuple):
        return text
    if isinstance(value, dict):
        head, kind, brackets = [str(k) for k in value], "entries", "{}"
    else:
        head, kind, brackets = [fmt_value(v, digits, missing) for v in value], "items", "[]"
    shown = ""
    for part in head:
        if len(shown) + len(part) > EVIDENCE_VALUE_CHARS - 20:
            shown += ", …"
            break
        shown += (", " if shown else "") + part
    return f"{brackets[0]}{len(value)} {kind}: {shown}{brackets[1]}"


def overrides(advice: Iterable[Any]) -> list[str]:
    """The Hydra overrides of these advice entries, in order."""
    return [a.override for a in advice if a.override]
