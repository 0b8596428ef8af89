"""Finding cards (app/_cards.py) on the Run and Config pages, through Streamlit's AppTest."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from logscope.app import _cards as cards
from streamlit.testing.v1 import AppTest

from logscope import present
from logscope.analyze import analyze_run
from logscope.model import Advice, Finding
from logscope.report import Report
from logscope.store import Store
from tests.dashboard_data import open_page

_LINK = re.compile(r"(?<!\\)\[(.+?)(?<!\\)\]\((https?://[^)\s]+)\)")


@pytest.fixture(scope="module")
def baseline(seeded: tuple[Path, list[str]]) -> Report:
    root, ids = seeded
    run = Store(root).get_run(ids[0])
    assert run is not None
    return analyze_run(run)


def _open(seeded: tuple[Path, list[str]], page: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    root, ids = seeded
    monkeypatch.delenv("LOGSCOPE_RUNS", raising=False)
    return open_page(root, monkeypatch, page, run_id=ids[0])


def plain(md: str) -> str:
    """What a reader sees of escaped Markdown: links as their label, no bold or code marks, no
    escapes."""
    text = re.sub(r"(?<!\\)(\*\*|`)", "", _LINK.sub(r"\1", md))
    return re.sub(r"\\(.)", r"\1", text)


def _walk(node):
    yield node
    children = getattr(node, "children", None) or {}
    for key in sorted(children):
        yield from _walk(children[key])


def _sequence(at: AppTest) -> list[tuple[str, str]]:
    """(type, text) of the main area's elements in page order."""
    out = []
    for node in _walk(at.main):
        kind = getattr(node, "type", "")
        if kind in ("markdown", "subheader", "code"):
            out.append((kind, str(node.value)))
    return out


def _card_code(md: str) -> str | None:
    """The finding code of a card's header line (`… **ERROR** · `LS001` · …`), else None."""
    m = re.search(r"\*\*[A-Z]+\*\* · `(LS\d+)`", md)
    return m[1] if m else None


def test_card_shows_every_advice_in_full(seeded, baseline, monkeypatch) -> None:
    at = _open(seeded, "run", monkeypatch)
    shown = "\n".join(plain(m.value) for m in at.markdown)
    advice = [(f, a) for f in baseline.findings for a in f.advice]
    assert len(advice) >= 5
    for f, a in advice:
        # Nothing is cut: the whole parameter, current → suggested, the whole rationale, source.
        line = f"{a.parameter}: {present.fmt_value(a.current)} → {present.fmt_value(a.suggested)}"
        assert line in shown, (f.code, line)
        assert a.rationale in shown, (f.code, a.rationale)
        assert f"Source: {a.source}" in shown, (f.code, a.source)
    for f in baseline.findings:  # title, message and every evidence key of every finding
        assert f.title in shown and f.message.replace("\n", " ") in shown, f.code
        assert all(f"{k}: " in shown for k in f.evidence), f.code


def test_card_override_is_a_code_block(seeded, baseline, monkeypatch) -> None:
    at = _open(seeded, "run", monkeypatch)
    codes = [c.value for c in at.code]
    with_ov = [f for f in baseline.findings if present.overrides(f.advice)]
    assert with_ov
    for f in with_ov:
        assert " \\\n".join(present.overrides(f.advice)) in codes, f.code


def test_chart_link_carries_the_findings_window(seeded, baseline, monkeypatch) -> None:
    at = _open(seeded, "run", monkeypatch)
    run_id = seeded[1][0]
    links = [p.proto for p in at.get("page_link") if p.proto.page.endswith("metrics")]
    queries = [parse_qs(p.query_string) for p in links]
    located = [f for f in baseline.findings if f.metric and f.step is not None]
    assert len(located) == len(links)
    for f in located:
        want = {"run": [run_id], "metric": [f.metric], "step": [str(f.step)]}
        want["end"] = [str(f.end_step)]  # every located finding of these runs has an end
        assert want in queries, (f.code, queries)
    # An episode (memory creeping up from step 25 to the end) links to its whole window.
    leak = next(f for f in located if f.name == "memory-leak")
    assert leak.end_step is not None and leak.end_step > leak.step
    [q] = [q for q in queries if q["metric"] == [leak.metric]]
    assert (q["step"], q["end"]) == ([str(leak.step)], [str(leak.end_step)])


def test_config_findings_are_a_config_section_not_incidents(seeded, baseline, monkeypatch) -> None:
    at = _open(seeded, "run", monkeypatch)
    config = [f for f in baseline.findings if f.code.startswith("LS5")]
    assert len(config) >= 2  # seed-unset and log-prob-micro-batch at step 0, the kl_coef change
    seq = _sequence(at)
    heads = [text for kind, text in seq if kind == "markdown" and "Incident ·" in text]
    # Only incidents with a finding of training dynamics: no "Incident · step 0" of a lint rule.
    events = [
        inc
        for inc in baseline.incidents
        if any(not baseline.findings[k].code.startswith("LS5") for k in inc.findings)
    ]
    assert len(heads) == len(events) < len(baseline.incidents)
    assert not any("step 0" in h for h in heads), heads
    where = [n for n, (kind, text) in enumerate(seq) if kind == "subheader"]
    config_at = next(n for n in where if seq[n][1].startswith("Config"))
    before = [_card_code(t) for k, t in seq[:config_at] if k == "markdown"]
    after = [_card_code(t) for k, t in seq[config_at:] if k == "markdown"]
    assert not any(c and c.startswith("LS5") for c in before), before
    assert sorted(c for c in after if c) == sorted(f.code for f in config)
    # The kl_coef change is part of the KL story: its incident names it and points down.
    captions = " ".join(c.value for c in at.caption)
    assert "kl\\-coef\\-changed\\-midrun" in captions


def test_config_page_lists_config_cards(seeded, baseline, monkeypatch) -> None:
    at = _open(seeded, "config", monkeypatch)
    codes = [c for c in (_card_code(m.value) for m in at.markdown) if c]
    assert sorted(codes) == sorted(f.code for f in baseline.findings if f.code.startswith("LS5"))
    assert not at.expander or not any(" LS5" in e.label for e in at.expander)


def test_links_only_to_sites_the_resolver_names() -> None:
    # A short citation resolves (logscope.sources.cite) and becomes a link.
    md = cards.md_linked("see verl#7817.")
    assert "(https://github.com/volcengine/verl/issues/7817)" in md
    assert plain(md) == "see verl #7817: https://github.com/volcengine/verl/issues/7817."
    # Any other address stays text; so does markup.
    for text in ("https://evil.example/x", "javascript:alert(1)", "[x](https://evil.example)"):
        md = cards.md_linked(text)
        assert "](" not in md.replace("\\]\\(", ""), md
        assert plain(md) == text


def test_card_of_a_hand_made_finding(monkeypatch, tmp_path: Path) -> None:
    long_param = "actor_rollout_ref.actor.entropy_coeff"
    why = "0.001 when the entropy falls below 0.3; " + "x" * 300 + " (seed:ppo-tuning §5)"
    advice = Advice(long_param, 0.0, 0.001, f"{long_param}=0.001", why, "verl:docs/a/b.md")
    f = Finding("LS999", "made-up", "warning", "A title", "A message", "m/x", 5, 9, {"k": 1.5})
    f.advice.append(advice)
    assert cards.chart_query(f, "r1") == {"run": "r1", "metric": "m/x", "step": "5", "end": "9"}
    text = plain("\n".join(cards.advice_md(f)))
    assert f"{long_param}: 0 → 0.001" in text
    assert "x" * 300 in text and "the PPO article §5" in text
    assert "verl docs: https://verl.readthedocs.io/en/latest/a/b.html" in text
    assert cards.header(f).endswith("· step 5–9")
    assert not cards.is_config(f) and cards.is_config(Finding("LS501", "n", "info", "t", "m"))
