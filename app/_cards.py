"""Finding cards: one bordered box per finding, every piece of it readable in full.

A card shows the severity (icon and word), code, name and step span, the title and message,
the evidence as `key: value` text, every piece of advice in full (parameter, current →
suggested, rationale, source), the references, the Hydra overrides in a code block (it has a
copy button) and a "Show on chart" link to the Metrics page zoomed to the finding's window.

Markdown wraps where a dataframe cell would clip, so cards are Markdown; everything that came
from a log is escaped (`md_escape`, `md_value`). Only the advice's sources, rationales and the
references (written by detectors and resolved by `logscope.sources.cite`) become links, and only
to the sites `cite` resolves to.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

import streamlit as st
from logscope.app._common import SEVERITY_ICON, worst_first

from logscope import present, sources
from logscope.model import Finding, Incident
from logscope.present import md_escape, md_value

#: the config-lint rules (logscope/check): facts about the config, not events in training

_URL = re.compile(r"https?://[^\s<>()\[\]{}\"'`|\\]+")
_TRAILING = ".,;:!?"


def is_config(f: Finding) -> bool:
    """Whether `f` is a config finding (LS5xx): it belongs to a Config section, not incidents."""
    return f.is_config


def split_incidents(
    findings: Sequence[Finding], incidents: Iterable[Incident]
) -> list[tuple[Incident, list[int], list[int]]]:
    """(incident, indices of its non-config findings, indices of its config findings) for each
    incident holding at least one finding that is not a config finding, in order.

    An incident of config findings only (each lint rule alone at the config's first step) is
    left out: those findings go to a Config section. A config finding inside a story (a KL
    coefficient changed mid-run, then the KL jumped) stays named in it.
    """
    out = []
    for inc in incidents:
        events = [k for k in inc.findings if not is_config(findings[k])]
        if events:
            out.append((inc, events, [k for k in inc.findings if is_config(findings[k])]))
    return out


def config_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The config findings, worst first."""
    return worst_first([f for f in findings if is_config(f)])


@functools.cache
def _link_hosts() -> frozenset[str]:
    """The hosts `logscope.sources.cite` links to (the only ones a card makes links of)."""
    ids = [f"{site}:docs/a/b" for site in sources.SITES] + [f"{s}:a/b.py" for s in sources.SITES]
    ids += ["verl#1", *(f"paper:{key}" for key in sources.PAPERS)]
    urls = _URL.findall(" ".join(sources.cite(i) for i in ids))
    return frozenset(urlsplit(u).netloc for u in urls)


def md_linked(text: str, short: bool = False) -> str:
    """`text` cited (`sources.cite`, `short` for prose) and escaped as Markdown, its resolved
    URLs as links."""
    text = sources.cite(str(text), short=short)
    out, pos = [], 0
    for m in _URL.finditer(text):
        url = m[0].rstrip(_TRAILING)
        if urlsplit(url).netloc not in _link_hosts():
            continue
        out.append(md_escape(text[pos : m.start()]))
        out.append(f"[{md_escape(url)}]({url})")
        pos = m.start() + len(url)
    out.append(md_escape(text[pos:]))
    return "".join(out)


def header(f: Finding) -> str:
    """`<icon> **ERROR** · `LS001` · non-finite-metric · step 121` (Markdown)."""
    parts = [f"{SEVERITY_ICON.get(f.severity, '')} **{md_escape(f.severity.upper())}**"]
    parts += [present.md_code(f.code), md_escape(f.name)]
    if span := present.step_span(f.step, f.end_step):
        parts.append(span)
    return " · ".join(parts)


def evidence_md(f: Finding) -> str:
    """`**Evidence** · key: `value` · …` (Markdown; "" without evidence)."""
    if not f.evidence:
        return ""
    items = [f"{md_escape(k)}: {_value(v)}" for k, v in f.evidence.items()]
    return "**Evidence** · " + " · ".join(items)


def _value(v: object) -> str:
    return md_value(v if isinstance(v, str) else present.fmt_value(v)) if v is not None else "–"


def advice_md(f: Finding) -> list[str]:
    """One Markdown block per advice: parameter, current → suggested, rationale, source."""
    blocks = []
    for a in f.advice:
        current, suggested = present.fmt_value(a.current), present.fmt_value(a.suggested)
        lines = [
            f"**{md_escape(a.parameter)}**: {md_value(current)} → {md_value(suggested)}",
            md_linked(a.rationale, short=True) if a.rationale else "",
            f"Source: {md_linked(a.source)}" if a.source else "",
        ]
        blocks.append("  \n".join(x for x in lines if x))
    return blocks


def chart_query(f: Finding, run_id: str) -> dict[str, str] | None:
    """Query params of the finding's "Show on chart" link (None: nothing to chart)."""
    if not f.metric or f.step is None:
        return None
    query = {"run": run_id, "metric": f.metric, "step": str(f.step)}
    if f.end_step is not None:
        query["end"] = str(f.end_step)
    return query


def finding_card(f: Finding, run_id: str, index: int, key_prefix: str = "card") -> None:
    """A finding as a bordered card. `index` must be unique on the page: the card's key is
    `{key_prefix}-{index}` (the browser sees it as the CSS class `st-key-{key_prefix}-{index}`)."""
    with st.container(border=True, key=f"{key_prefix}-{index}"):
        st.markdown(header(f))
        st.markdown(f"**{md_escape(f.title)}**")
        if f.message:
            st.markdown(md_escape(f.message))
        if ev := evidence_md(f):
            st.markdown(ev)
        if f.advice:
            st.markdown("**Advice**")
            for block in advice_md(f):
                st.markdown(block)
        if ovs := present.overrides(f.advice):
            st.caption("Hydra overrides (copy with the button at the right)")
            st.code(" \\\n".join(ovs), language="bash")
        if f.references:
            st.markdown("**References**\n\n" + "\n".join(f"- {md_linked(r)}" for r in f.references))
        if query := chart_query(f, run_id):
            st.page_link(
                "pages/metrics.py",
                label=f"Show on chart: {md_escape(f.metric)} · "
                f"{present.step_span(f.step, f.end_step)}",
                icon=":material/show_chart:",
                query_params=query,
            )


def finding_cards(
    findings: Iterable[Finding], run_id: str, start: int = 0, key_prefix: str = "card"
) -> int:
    """Cards of `findings` numbered from `start`; returns the next free index."""
    n = start
    for f in findings:
        finding_card(f, run_id, n, key_prefix)
        n += 1
    return n
