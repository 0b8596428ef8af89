"""Many runs in one command (logscope.fleet, `logscope analyze FOLDER|GLOB...`): discovery, the
process pool, the triage table, the fleet JSON; the same findings as one file at a time."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

from logscope import fleet
from logscope.analyze import analyze_paths
from logscope.cli import app
from logscope.synthetic import Injection, simulate, write_console_log

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())
runner = CliRunner()


@pytest.fixture(scope="module")
def runs_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six simulated runs (two with a KL jump at step 120, one with NaN losses), a note, a
    binary file, and a logscope store inside the folder."""
    root = tmp_path_factory.mktemp("runs")
    for i in range(6):
        inject = [Injection("kl-jump", 120)] if i in (1, 4) else []
        if i == 5:
            inject = [Injection("nan-loss", 150)]
        (root / f"exp{i % 2}").mkdir(exist_ok=True)
        write_console_log(
            simulate(200, "grpo", seed=i, inject=inject), root / f"exp{i % 2}" / f"r{i}.log"
        )
    (root / "notes.md").write_text("what I tried\n")
    (root / "blob.log").write_bytes(bytes(range(256)) * 8)
    analyze_paths([root / "exp0" / "r0.log"], store_dir=root / "store")  # a store in the folder
    return root


def _findings(reports) -> dict[str, list[tuple]]:
    return {
        Path(r.run.source.path).name: sorted((f.code, f.step, f.message) for f in r.findings)
        for r in reports
    }


def test_inputs_search_folders_and_expand_globs(runs_folder: Path) -> None:
    entries, passed = fleet.inputs([str(runs_folder), str(runs_folder / "nothing*.log")])
    names = sorted(Path(p).name for p, _ in entries if "nothing" not in p)
    assert names == ["r0.log", "r1.log", "r2.log", "r3.log", "r4.log", "r5.log"]
    assert not any("store" in p for p, _ in entries)  # a logscope store is never a run
    assert any(p.endswith("notes.md") for p in passed)
    assert (str(runs_folder / "nothing*.log"), None) in entries  # read: "no such file"
    globbed, _ = fleet.inputs([str(runs_folder / "exp1" / "*.log")])
    assert sorted(Path(p).name for p, _ in globbed) == ["r1.log", "r3.log", "r5.log"]
    # what discovery sniffed goes to the workers (they do not sniff every reader again)
    found = [e for e in entries if "nothing" not in e[0]]
    assert {e.reader.kind for e in found} == {"verl-console"}
    assert (found[0][0], None) == found[0] and fleet.Entry.of("a", None, None) == ("a", None)


def test_the_pool_finds_what_one_file_at_a_time_finds(
    runs_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries, _ = fleet.inputs([str(runs_folder)])
    one_by_one = [r for p, _ in entries for r in analyze_paths([p], use_cache=False)]
    monkeypatch.setattr(fleet, "POOL_MIN_ENTRIES", 2)  # six small logs: pool them anyway
    seen: list[tuple[int, int]] = []
    pooled = fleet.analyze_inputs(
        entries, jobs=2, done=lambda n, total: seen.append((n, total)), store_dir=tmp_path
    )
    assert _findings(pooled) == _findings(one_by_one)
    assert [r.run.source.path for r in pooled] == [p for p, _ in entries]  # order kept
    assert seen[-1] == (6, 6)
    kl = {n for n, fs in _findings(pooled).items() if any(c == "LS101" for c, _, _ in fs)}
    assert kl == {"r1.log", "r4.log"}


def test_pool_workers_send_stored_runs_and_their_rows(
    runs_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a store, a worker sends each run as its place in the store (its metrics are read
    again only when the parent needs them) and its triage row: the same table and JSON as
    reports holding their whole runs."""
    from logscope.store import StoredRun

    entries, passed = fleet.inputs([str(runs_folder)])
    whole = fleet.analyze_inputs(entries, jobs=1, use_cache=False)
    monkeypatch.setattr(fleet, "POOL_MIN_ENTRIES", 2)
    pooled = fleet.analyze_inputs(entries, jobs=2, store_dir=tmp_path / "store")
    readable = [r for r in pooled if r.readable]
    assert readable and all(isinstance(r.run, StoredRun) for r in readable)
    assert fleet.fleet_dict(pooled, passed) == fleet.fleet_dict(whole, passed)
    expected = json.dumps(fleet.fleet_dict(whole, passed), indent=2, allow_nan=False)
    assert fleet.fleet_json(pooled, passed) == expected  # the workers' texts, spliced
    assert fleet.fleet_json(whole, passed) == expected
    assert fleet.fleet_json([], passed) == json.dumps(fleet.fleet_dict([], passed), indent=2)
    assert not any(r.run.metrics_read() for r in readable)  # the table and JSON: no metrics
    steps = {r.run.source.path: list(r.run.steps) for r in whole if r.readable}
    assert {r.run.source.path: list(r.run.steps) for r in readable} == steps  # read on use
    uncached = fleet.analyze_inputs(entries, jobs=2, use_cache=False)
    assert not any(isinstance(r.run, StoredRun) for r in uncached)  # no store: sent whole
    assert {r.run.source.path: list(r.run.steps) for r in uncached if r.readable} == steps


def test_triage_puts_the_worst_first_with_the_first_incident(runs_folder: Path) -> None:
    entries, _ = fleet.inputs([str(runs_folder)])
    reports = fleet.analyze_inputs(entries, jobs=1, use_cache=False)
    rows = [row for row, _ in fleet.triage(reports)]
    ranks = [fleet.SEVERITY_RANK.get(r.worst or "", -1) for r in rows]
    assert ranks == sorted(ranks, reverse=True)
    nan = next(r for r in rows if r.path.endswith("r5.log"))
    assert rows[0] is nan and nan.worst in ("critical", "error")
    kl = next(r for r in rows if r.path.endswith("r1.log"))
    assert "kl-jump" in kl.diagnoses and abs(kl.first_incident_step - 120) <= 5
    healthy = next(r for r in rows if r.path.endswith("r0.log"))
    assert healthy.first_incident is None  # config-lint findings are not incidents


def test_gpu_hours_after_the_first_incident_come_from_step_times(runs_folder: Path) -> None:
    (report,) = analyze_paths([runs_folder / "exp1" / "r1.log"], use_cache=False)
    row = fleet.triage_row(report)
    steps, seconds = report.run.series("timing_s/step")
    gpus = 8 * 1  # the simulator's trainer.n_gpus_per_node × trainer.nnodes
    expected = float(np.nansum(seconds[steps >= row.first_incident_step])) * gpus / 3600
    assert row.gpu_hours_since_incident == pytest.approx(expected, abs=0.01)


def test_cli_on_a_folder_gives_the_table_and_json(runs_folder: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    blob = str(runs_folder / "blob.log")  # in the folder: passed over; named: a row
    args = ["analyze", str(runs_folder), blob, "--store", store, "-f", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1  # the NaN run fails at the default --fail-on error
    data = json.loads(result.stdout)
    assert data["schema"] == fleet.SCHEMA
    assert data["summary"]["runs"] == 7  # six runs and the binary file as an unreadable row
    assert any(p.endswith("blob.log") for p in data["summary"]["passed_over"])
    assert data["summary"]["by_worst_severity"]["unreadable"] == 1
    assert data["runs"][0]["error"] and "blob.log" in data["runs"][0]["path"]
    assert [r["run"]["source"]["path"] for r in data["reports"]] == [
        r["path"] for r in data["runs"]
    ]
    for report in data["reports"]:
        jsonschema.validate(report, SCHEMA)
    text = runner.invoke(
        app, ["analyze", str(runs_folder), "--store", store], env={"COLUMNS": "160"}
    )
    assert "6 runs: 1 critical" in text.stdout
    assert "exp1/r5.log" in text.stdout and "add --details" in text.stdout
    details = runner.invoke(
        app, ["analyze", str(runs_folder / "exp1"), "--store", store, "--details"]
    )
    assert details.stdout.count("logscope analyze: ") == 3  # each run's report after the table


def test_markdown_and_html_fleets_hold_the_triage_table(runs_folder: Path, tmp_path: Path) -> None:
    args = ["analyze", str(runs_folder / "exp1"), "--store", str(tmp_path), "--fail-on", "never"]
    md = runner.invoke(app, [*args, "-f", "markdown"]).stdout
    assert md.startswith("# logscope fleet: 3 runs")
    assert "| run | framework | steps |" in md and "r5\\.log" in md
    assert "# logscope analyze" not in md
    assert "# logscope analyze" in runner.invoke(app, [*args, "-f", "markdown", "--details"]).stdout
    html = runner.invoke(app, [*args, "-f", "html"]).stdout
    assert "<h1>logscope fleet: 3 runs</h1>" in html and html.count("<tr>") == 4


def test_config_file_reaches_the_workers(
    runs_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "logscope.toml"
    cfg.write_text('ignore = ["LS101"]\n')
    monkeypatch.setattr(fleet, "POOL_MIN_ENTRIES", 2)
    from logscope import settings

    entries, _ = fleet.inputs([str(runs_folder / "exp1")])
    with settings.using(cfg):
        reports = fleet.analyze_inputs(entries, jobs=2, use_cache=False)
    assert reports and not any(f.code == "LS101" for r in reports for f in r.findings)
    without = fleet.analyze_inputs(entries, jobs=2, use_cache=False)
    assert any(f.code == "LS101" for r in without for f in r.findings)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_ray_executor_gives_the_fleet_summary_of_the_pool(
    runs_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local Ray instance (2 CPUs), one task per run: the same reports as the process pool."""
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setattr(fleet, "POOL_MIN_ENTRIES", 2)
    entries, passed = fleet.inputs([str(runs_folder)])
    seen: list[tuple[int, int]] = []
    on_ray = fleet.analyze_inputs(
        entries,
        executor="ray",
        done=lambda n, total: seen.append((n, total)),
        store_dir=tmp_path / "ray-store",
    )
    pooled = fleet.analyze_inputs(entries, jobs=2, store_dir=tmp_path / "pool-store")
    assert seen[-1] == (6, 6)
    assert _findings(on_ray) == _findings(pooled)
    ray_fleet, pool_fleet = fleet.fleet_dict(on_ray, passed), fleet.fleet_dict(pooled, passed)
    assert ray_fleet["summary"] == pool_fleet["summary"]
    assert ray_fleet["runs"] == pool_fleet["runs"]
    assert (tmp_path / "ray-store" / "runs").is_dir()  # the tasks wrote the store


def test_a_narrow_terminal_keeps_run_names_readable_and_says_what_it_left_out(
    tmp_path: Path,
) -> None:
    """At 80 columns the triage table drops columns in DROPPED_FIRST order (saying which)
    instead of folding run names into slivers; a wide terminal shows every column with values."""
    from rich.console import Console

    from logscope.cli.render import NAME_FLOOR, render_fleet

    for i, inject in enumerate(([Injection("kl-jump", 60)], [Injection("nan-loss", 70)], [])):
        name = f"exp{i}_a-rather-long-run-name-as-people-give-them-seed{i}.log"
        write_console_log(simulate(100, "grpo", seed=i, inject=inject), tmp_path / name)
    reports = analyze_paths(sorted(tmp_path.glob("*.log")), store_dir=tmp_path / "store")

    narrow = Console(width=80, record=True, force_terminal=False)
    render_fleet(reports, narrow)
    text = narrow.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    name_cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    name = "exp0_a-rather-long-run-name-as-people-give-them-seed0.log"
    assert any(cell.startswith(name[:NAME_FLOOR]) for cell in name_cells), name_cells
    assert "Not shown at this width: framework" in text
    assert "kl-jump" in text and "non-finite-metric" in text

    wide = Console(width=220, record=True, force_terminal=False)
    render_fleet(reports, wide)
    text = wide.export_text()
    assert "Not shown" not in text
    header = next(line for line in text.splitlines() if "diagnoses" in line)
    for column in ("run", "framework", "steps", "last", "worst", "first incident"):
        assert column in header
    assert name in text
