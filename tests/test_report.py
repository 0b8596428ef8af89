"""The Report and its renderers: JSON contract, escaping of log content, exit semantics."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from logscope.analyze import analyze_run
from logscope.detector import Detector
from logscope.model import Advice, Finding, Run
from logscope.report import Report, md_code, render_markdown
from tests.helpers import make_run

SCHEMA = json.loads((Path(__file__).parent.parent / "docs" / "report.schema.json").read_text())

HOSTILE = "<script>alert(1)</script> *bold* `tick` [link](x) | pipe <!-- -->"


def _finding(step: int | None = 5, severity: str = "error", name: str = "kl-jump") -> Finding:
    return Finding(
        code="LS101",
        name=name,
        severity=severity,  # type: ignore[arg-type]
        title="KL jumped",
        message=f"seen in {HOSTILE}",
        metric="actor/kl_loss",
        step=step,
        end_step=None if step is None else step + 3,
        evidence={"before": 0.01, "after": float("nan"), "text": HOSTILE},
        advice=[
            Advice(
                parameter="actor_rollout_ref.actor.kl_loss_coef",
                current=0.001,
                suggested=0.0015,
                override="actor_rollout_ref.actor.kl_loss_coef=0.0015",
                rationale="pull the policy back",
                source="seed:grpo-pitfalls §3",
            )
        ],
    )


def _report(findings: list[Finding]) -> Report:
    run = make_run({"actor/kl_loss": np.linspace(0.01, 0.02, 20)})
    return Report(run=run, findings=findings)


def test_json_validates_against_documented_schema() -> None:
    data = json.loads(_report([_finding(), _finding(None, "info")]).to_json())
    jsonschema.validate(data, SCHEMA)
    assert data["schema"] == "logscope.report/1"
    assert data["summary"]["counts"] == {"info": 1, "warning": 0, "error": 1, "critical": 0}
    # NaN in evidence becomes null, so the output is strict JSON
    assert data["findings"][0]["evidence"]["after"] is None


def test_schema_rejects_a_broken_finding() -> None:
    data = json.loads(_report([_finding()]).to_json())
    data["findings"][0]["severity"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


def test_fails_respects_threshold() -> None:
    report = _report([_finding(severity="warning")])
    assert report.fails("warning")
    assert report.fails("info")
    assert not report.fails("error")
    assert not report.fails("never")


def test_html_escapes_log_content() -> None:
    out = _report([_finding()]).to_html()
    assert "<script>" not in out
    assert "&lt;script&gt;" in out


def test_markdown_escapes_log_content() -> None:
    out = render_markdown([_report([_finding()])])
    assert "<script>" not in out
    assert "\\*bold\\*" in out
    assert "actor_rollout_ref.actor.kl_loss_coef=0.0015" in out


def test_md_code_survives_backticks() -> None:
    span = md_code("a`b")
    assert span.startswith("``") and span.endswith("``")


class _Boom(Detector):
    """Always fails."""

    code = "LS999"
    name = "boom"
    title = "boom"
    reads = "events"

    def detect(self, run: Run) -> list[Finding]:
        raise RuntimeError("bug")


class _Needs(Detector):
    """Needs a metric the run lacks."""

    code = "LS998"
    name = "needs-entropy"
    title = "needs entropy"
    concepts = ("entropy",)

    def detect(self, run: Run) -> list[Finding]:  # pragma: no cover - skipped
        return []


def test_analyze_run_records_skips_and_detector_errors() -> None:
    run = make_run({"actor/kl_loss": [0.1, 0.2, 0.3]})
    report = analyze_run(run, detectors=[_Boom(), _Needs()])
    assert [s.name for s in report.skipped] == ["needs-entropy"]
    assert "actor/entropy" in report.skipped[0].reason
    assert len(report.errors) == 1 and "LS999" in report.errors[0]


# ---- the round trip: Report.from_dict(report.to_dict()) ------------------------------------
FIXTURES = Path(__file__).parent.parent / "fixtures"
FIXTURE_LOGS = sorted(
    p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".txt", ".sh") and p.is_file()
)


def _fixture_reports(path: Path, store: Path) -> list[Report]:
    if path.suffix == ".sh":
        from logscope.check import check_path

        return check_path(str(path))
    from logscope.analyze import analyze_paths

    return analyze_paths([path], store_dir=store, use_cache=False)


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_report_round_trips_through_its_dict(path: Path, tmp_path: Path) -> None:
    reports = _fixture_reports(path, tmp_path)
    assert reports
    for report in reports:
        again = Report.from_dict(report.to_dict())
        assert again.to_dict() == report.to_dict()
        assert again.to_json() == report.to_json()
        # equal as JSON says it (NaN is written as null); every renderer shows the same
        assert again.worst_severity == report.worst_severity
        assert again.show_health == report.show_health
        assert again.to_markdown() == report.to_markdown()
        assert again.to_html() == report.to_html()
        assert _rich(again) == _rich(report)


def _rich(report: Report) -> str:
    import io

    from rich.console import Console

    from logscope.cli.render import render_report

    out = io.StringIO()
    render_report(report, Console(file=out, width=110, force_terminal=False))
    return out.getvalue()


def test_from_dict_refuses_another_schema() -> None:
    data = _report([_finding()]).to_dict()
    with pytest.raises(ValueError, match=r"logscope\.report/1"):
        Report.from_dict({**data, "schema": "logscope.report/0"})
