"""Incident grouping: related findings close in time join; unrelated or distant ones don't."""

from __future__ import annotations

from logscope.incidents import group_incidents, window_for
from logscope.model import Finding


def _f(name: str, step: int | None, severity: str = "warning") -> Finding:
    return Finding(code="LS100", name=name, severity=severity, title=name, message=name, step=step)  # type: ignore[arg-type]


def test_story_joins_and_names_first_mover() -> None:
    findings = [
        _f("entropy-collapse", 130),
        _f("kl-jump", 122, "error"),
        _f("clip-ratio-spike", 120),
    ]
    incidents = group_incidents(findings, n_steps=400)
    assert len(incidents) == 1
    inc = incidents[0]
    assert inc.first_mover == "clip-ratio-spike"
    assert inc.step == 120 and inc.end_step == 130
    assert inc.severity == "error"
    assert sorted(inc.findings) == [0, 1, 2]


def test_unrelated_findings_stay_apart() -> None:
    incidents = group_incidents([_f("memory-leak", 100), _f("kl-jump", 100)], n_steps=400)
    assert len(incidents) == 2


def test_distant_findings_stay_apart() -> None:
    w = window_for(400)
    incidents = group_incidents([_f("kl-jump", 100), _f("entropy-collapse", 100 + w + 1)], 400)
    assert len(incidents) == 2


def test_run_level_findings_stand_alone() -> None:
    incidents = group_incidents([_f("kl-jump", None), _f("kl-jump", 10)], n_steps=100)
    assert len(incidents) == 2


def test_cause_wins_a_tie() -> None:
    findings = [_f("reward-sawtooth", 50), _f("kl-coef-changed-midrun", 50)]
    (inc,) = group_incidents(findings, 300)
    assert inc.first_mover == "kl-coef-changed-midrun"


def test_a_finding_naming_its_cause_joins_it_and_never_leads() -> None:
    """Truncation at a NaN step names non-finite-metric as its cause: one incident, led by the
    cause even when the consequence's span starts earlier; without the link they stay apart."""
    cause = {"name": "non-finite-metric", "metric": "actor/pg_loss", "step": 60}
    clipped = _f("response-length-clipped", 58, "info")
    clipped.evidence["consequence_of"] = cause
    (inc,) = group_incidents([clipped, _f("non-finite-metric", 60, "error")], n_steps=100)
    assert inc.first_mover == "non-finite-metric" and sorted(inc.findings) == [0, 1]
    apart = [_f("response-length-clipped", 58), _f("non-finite-metric", 60, "error")]
    assert len(group_incidents(apart, n_steps=100)) == 2
