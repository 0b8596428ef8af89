"""`logscope analyze --format verdict`: status from the worst severity and the crash diagnosis,
the first incident, the top findings with overrides, what was not understood; at most 4 KB
whatever the log; a fleet's verdict bounded too; commands without a verdict refuse it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logscope import verdict
from logscope.analyze import analyze_paths
from logscope.cli import app
from logscope.ingest._common import metrics_frame
from logscope.model import Advice, Finding, Incident, Run, Source
from logscope.report import Report

ROOT = Path(__file__).resolve().parent.parent
TUNED = ROOT / "fixtures" / "verl_tuned.log"
BASELINE = ROOT / "fixtures" / "verl_baseline.log"
SCRIPT = ROOT / "fixtures" / "check" / "run_ppo_baseline.sh"
REAL_LOGS = ROOT.parent / "shared" / "real_logs"

runner = CliRunner()


def _finding(code: str, severity: str, step: int | None = 10, text: str = "x", n: int = 1):
    advice = [Advice(f"a.b.c{k}", 1, 2, f"a.b.c{k}={text}", "because", "source") for k in range(n)]
    return Finding(code, f"name-{code.lower()}", severity, f"title {text}", f"message {text}",
                   step=step, advice=advice)  # fmt: skip


def _report(*findings: Finding, path: str = "run.log", unknown: int = 0) -> Report:
    run = Run(id="abc123", source=Source("verl-console", path))
    run.metrics = metrics_frame([1, 2], ["actor/entropy"] * 2, [0.5, 0.5])  # a run with data
    incidents = [
        Incident(f"i{k}", f.title, f.severity, f.step, f.step, f.name, [k])
        for k, f in enumerate(findings)
    ]
    return Report(
        run=run,
        findings=list(findings),
        incidents=incidents,
        unknown_metrics=[f"custom/metric_{k}" for k in range(unknown)],
    )


@pytest.mark.parametrize(
    ("findings", "status"),
    [
        ((), "healthy"),
        ((_finding("LS202", "info"),), "healthy"),
        ((_finding("LS202", "info"), _finding("LS010", "warning")), "warning"),
        ((_finding("LS001", "error"),), "broken"),
        ((_finding("LS001", "critical"), _finding("LS010", "warning")), "broken"),
        ((_finding("LS017", "error", step=None), _finding("LS001", "critical")), "crashed"),
        ((_finding("LS017", "warning"),), "warning"),  # interrupted, not crashed
    ],
)
def test_status_follows_the_worst_severity_and_the_crash(findings, status) -> None:
    report = _report(*findings)
    v = verdict.verdict(report)
    assert v["status"] == verdict.status(report) == status
    assert v["worst_severity"] == report.worst_severity


def test_nothing_read_is_no_data_not_healthy(tmp_path) -> None:
    empty = _report()
    empty.run.metrics = empty.run.metrics.clear()
    assert empty.nothing_read and verdict.status(empty) == "no-data"
    # the CLI says so in every format, and the fleet counts it
    log = tmp_path / "pasted.log"
    log.write_text("I ran the GRPO script and it hangs after loading the model.\nAny idea?\n")
    out = runner.invoke(app, ["analyze", str(log), "--no-cache", "--format", "verdict"])
    assert out.exit_code == 0 and json.loads(out.stdout)["status"] == "no-data"
    for fmt in ("rich", "markdown", "html"):
        out = runner.invoke(app, ["analyze", str(log), "--no-cache", "--format", fmt])
        assert "Nothing to judge" in " ".join(out.stdout.split()), fmt
    fleet = verdict.fleet_verdict([empty, _report()])
    assert fleet["by_status"] == {"no-data": 1, "healthy": 1} and fleet["status"] == "no-data"


def test_unreadable_status() -> None:
    assert verdict.status(Report.unreadable("gone.log", "no such file")) == "unreadable"


def test_top_findings_first_incident_and_not_understood() -> None:
    report = _report(
        _finding("LS202", "info", step=5),
        _finding("LS010", "warning", step=50, n=2),
        _finding("LS001", "error", step=80),
        _finding("LS011", "warning", step=20),
        unknown=8,
    )
    v = verdict.verdict(report)
    assert [f["code"] for f in v["top_findings"]] == ["LS001", "LS011", "LS010"]
    assert v["top_findings"][2]["overrides"] == ["a.b.c0=x", "a.b.c1=x"]
    assert v["first_incident"] == {
        "step": 5,
        "end_step": 5,
        "severity": "info",
        "title": "title x",
        "first_mover": "name-ls202",
    }
    assert v["not_understood"]["unknown_metrics"] == 8
    assert len(v["not_understood"]["unknown_examples"]) == verdict.UNKNOWN_SHOWN


def test_config_lint_is_not_the_first_incident() -> None:
    report = _report(_finding("LS510", "info", step=1), _finding("LS010", "warning", step=40))
    assert verdict.verdict(report)["first_incident"]["step"] == 40


def test_bounded_whatever_the_report() -> None:
    long = "y" * 5000
    findings = [_finding(f"LS{k + 100:03d}", "error", step=k, text=long, n=20) for k in range(500)]
    report = _report(*findings, path="/deep/" + "d" * 3000 + "/run.log", unknown=10_000)
    report.errors = [long, long, long]
    v = verdict.verdict(report)
    assert verdict.size(v) <= verdict.MAX_BYTES
    assert len(v["top_findings"]) == 3 and v["top_findings"][0]["overrides"]
    assert v["run"]["source"]["path"].endswith("/run.log")
    fleet = verdict.fleet_verdict([report] * 200 + [Report.unreadable("gone", long)])
    assert verdict.size(fleet) <= verdict.MAX_BYTES
    assert fleet["runs"] == 201 and fleet["by_status"] == {"broken": 200, "unreadable": 1}
    assert fleet["status"] == "broken"
    assert fleet["omitted_runs"] == 201 - len(fleet["worst_runs"]) > 0
    assert fleet["worst_runs"][0]["status"] == "unreadable"  # triage order: unreadable first


def test_cli_verdict_is_the_library_verdict_of_the_report(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(TUNED), "-f", "verdict", "--store", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.encode()) <= verdict.MAX_BYTES + 1  # + the final newline
    [report] = analyze_paths([str(TUNED)], store_dir=tmp_path)
    assert json.loads(result.stdout) == json.loads(verdict.to_json(verdict.verdict(report)))
    data = json.loads(result.stdout)
    assert data["status"] == "healthy" and data["run"]["steps"]["count"] == 210
    assert data["top_findings"] and data["first_incident"]["first_mover"] == "reward-plateau"


def test_cli_fleet_verdict(tmp_path: Path) -> None:
    args = ["analyze", str(BASELINE), str(TUNED), "-f", "verdict", "--store", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == verdict.FLEET_SCHEMA and data["runs"] == 2
    assert sum(data["by_status"].values()) == 2
    assert [r["path"] for r in data["worst_runs"]] != []


def test_check_gives_a_verdict_and_compare_refuses_it(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(SCRIPT), "-f", "verdict"])
    assert result.exit_code in (0, 1), result.stderr
    assert json.loads(result.stdout)["schema"] == verdict.SCHEMA
    result = runner.invoke(
        app, ["compare", str(BASELINE), str(TUNED), "-f", "verdict", "--store", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "--format verdict is not offered here" in " ".join(result.stderr.split())


@pytest.mark.skipif(not REAL_LOGS.is_dir(), reason="../shared/real_logs is not beside the checkout")
def test_every_real_log_verdict_is_bounded_and_matches_its_report() -> None:
    logs = sorted(REAL_LOGS.glob("*.log"))
    assert logs
    for log in logs:
        [report] = analyze_paths([str(log)], use_cache=False)
        v = verdict.verdict(report)
        assert verdict.size(v) <= verdict.MAX_BYTES, log.name
        assert v["worst_severity"] == report.worst_severity, log.name
        crashed = any(f.code == "LS017" and f.severity == "error" for f in report.findings)
        assert (v["status"] == "crashed") == crashed, log.name
        if not crashed:
            expected = {None: "healthy", "info": "healthy", "warning": "warning"}
            assert v["status"] == expected.get(report.worst_severity, "broken"), log.name
