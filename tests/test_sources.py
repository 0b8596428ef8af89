"""Every source logscope cites is something a user can open, in every output.

Findings come from the committed fixtures (logs and launch scripts), the catalogue from the
registry, and every other citation from a scan of the string literals detectors and rules
write (so a citation no fixture exercises is still checked).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from logscope import catalogue, check, sources
from logscope.analyze import analyze_run
from logscope.ingest import load
from logscope.model import Finding
from logscope.report import Report

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_LOGS = sorted((ROOT / "fixtures").rglob("*.log")) + sorted(
    (ROOT / "fixtures" / "pasted").glob("*.txt")
)
SCRIPTS = sorted((ROOT / "fixtures" / "check").glob("*.sh"))

#: What a reader cannot resolve: logscope's own notes, the seed files' numbers, rule labels
#: (A1–A16, B1–B13 of those notes) and an article left unnamed.
OPAQUE = re.compile(
    r"seed:|\b[Ss]eed 00\d|tuning_knowledge|verl_formats|verl_metrics|\b[AB]1?\d\b"
    r"|\b[Tt]he article\b|\b[Tt]he articles\b"
)
SOURCE_ID = re.compile(r"[a-z]+:[A-Za-z_][\w/.#-]+")
OPENABLE = re.compile(r"https://\S+|Article \"[^\"]+\" \([^)]*\)")


@pytest.fixture(scope="module")
def reports() -> list[Report]:
    out = [analyze_run(run) for path in FIXTURE_LOGS for run in load(path)]
    for script in SCRIPTS:
        out += check.check_path(script)
    return out


@pytest.fixture(scope="module")
def findings(reports: list[Report]) -> list[Finding]:
    return [f for r in reports for f in r.findings]


def _parts(text: str) -> list[str]:
    """The sources in a `;`-separated list (a `;` inside a note in parentheses is the note's)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ";" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


# ---- cite ------------------------------------------------------------------------------------


def test_an_article_is_named_by_title_gloss_and_place_then_section() -> None:
    text = sources.cite("seed:ppo-tuning §3.3")
    assert text.startswith(
        'Article "verl实战分享：如何优化PPO参数提升训练效率" (the PPO article, "'
    )
    assert "CSDN" in text
    assert text.endswith(", §3.3")
    assert sources.cite("seed:grpo-pitfalls §2.1–2.2").endswith(", §2.1–2.2")


def test_verl_files_folders_docs_and_issues_become_urls() -> None:
    assert sources.cite("verl:workers/actor/dp_actor.py (kl_loss)") == (
        "verl source: https://github.com/volcengine/verl/blob/main/verl/workers/actor/dp_actor.py"
        " (kl_loss)"
    )
    assert sources.cite("verl:workers/rollout/vllm_rollout").endswith(
        "/tree/main/verl/workers/rollout/vllm_rollout"
    )
    assert sources.cite("verl:docs/start/install") == (
        "verl docs: https://verl.readthedocs.io/en/latest/start/install.html"
    )
    # a page named by its source file is the same page
    assert sources.cite("verl:docs/algo/rollout_corr.md") == sources.cite(
        "verl:docs/algo/rollout_corr"
    )
    assert sources.cite("verl#7817, verl#4025") == (
        "verl #7817: https://github.com/volcengine/verl/issues/7817, "
        "verl #4025: https://github.com/volcengine/verl/issues/4025"
    )
    assert sources.cite("paper:ppo").endswith("https://arxiv.org/abs/1707.06347")


def test_cite_is_idempotent_and_leaves_prose_alone() -> None:
    text = "seed:grpo-pitfalls §4; verl:trainer/ppo/ray_trainer.py. See step:10 - a:1."
    once = sources.cite(text)
    assert sources.cite(once) == once
    assert once.endswith("ray_trainer.py. See step:10 - a:1.")
    assert sources.unresolved(once) == []
    assert sources.unresolved("seed:nope §1; verl_formats.md §6") == ["seed:", "verl_formats"]


# ---- findings --------------------------------------------------------------------------------


def test_fixture_findings_cite_only_openable_sources(findings: list[Finding]) -> None:
    assert len({f.code for f in findings}) >= 15  # the fixtures exercise most families
    for f in findings:
        cited = [a.source for a in f.advice] + list(f.references)
        for text in cited:
            for part in _parts(text):
                assert OPENABLE.search(part), (f.code, part)
            assert sources.unresolved(text) == [], (f.code, text)


def test_no_output_shows_an_opaque_reference(reports: list[Report]) -> None:
    for report in reports:
        for text in (report.to_markdown(), report.to_html(), report.to_json()):
            assert not OPAQUE.findall(text), OPAQUE.findall(text)
        for f in report.findings:
            assert sources.unresolved(json.dumps(f.to_dict(), ensure_ascii=False)) == []


# ---- catalogue -------------------------------------------------------------------------------


def test_catalogue_references_are_openable() -> None:
    for item in catalogue.entries():
        refs = item["sections"]["References"]
        assert refs, item["code"]
        assert sources.unresolved(refs) == [], item["code"]
        for part in _parts(refs):
            assert OPENABLE.search(part), (item["code"], part)
        text = json.dumps(item, ensure_ascii=False)
        assert not OPAQUE.findall(text), (item["code"], OPAQUE.findall(text))


def test_generated_catalogue_names_every_article() -> None:
    text = catalogue.render_markdown()
    for article in sources.ARTICLES.values():
        assert article.title in text
    assert "seed:" not in text


# ---- what detectors and rules write ----------------------------------------------------------


def _literals(path: Path) -> list[tuple[int, str]]:
    """Non-docstring string literals of a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


WRITERS = [  # every module that writes messages, advice or citations
    *sorted((ROOT / "detectors").glob("*.py")),
    ROOT / "logscope" / "verl_config.py",
    ROOT / "logscope" / "config_view.py",
    ROOT / "logscope" / "health.py",
    ROOT / "logscope" / "advice.py",
]


@pytest.mark.parametrize("path", WRITERS, ids=lambda p: p.name)
def test_written_citations_resolve_and_prose_names_its_source(path: Path) -> None:
    for line, text in _literals(path):
        shown = sources.cite(text)
        assert sources.unresolved(shown) == [], (path.name, line, text)
        if SOURCE_ID.fullmatch(text):  # a bare id: of a site `cite` knows
            assert OPENABLE.search(shown), (path.name, line, text)
        assert not OPAQUE.findall(shown), (path.name, line, OPAQUE.findall(shown), text)
