"""`logscope query` and the store's fleet tables (findings.parquet, summary.parquet).

A fleet of 8 simulated runs (two projects, five experiments, KL jumps, OOMs at known steps with
different `data.max_response_length`, a throughput drop, two runs last modified 20 days ago) is
analysed once with `logscope analyze FOLDER --store S`; docs/fleet.md's example queries are run
on it and their answers checked against the reports and the logs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl
import pytest
from typer.testing import CliRunner

from logscope.cli import app
from logscope.cli.query import run_query
from logscope.ingest import load
from logscope.schemas import FINDINGS_SCHEMA, RUNS_SCHEMA
from logscope.store import Store
from logscope.synthetic import Injection, simulate, write_console_log

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "fleet.md"

# (project, experiment, injected pathology, its step, data.max_response_length, age in days)
FLEET = [
    ("math", "grpo-base", "kl-jump", 120, 1024, 2),
    ("math", "grpo-base", None, 0, 1024, 2),
    ("math", "grpo-long", "cuda-oom", 150, 4096, 2),
    ("math", "grpo-long", "cuda-oom", 90, 4096, 20),
    ("math", "grpo-mid", "cuda-oom", 130, 2048, 20),
    ("code", "code-a", "kl-jump", 100, 2048, 20),
    ("code", "code-a", None, 0, 2048, 20),
    ("code", "code-b", "throughput-drop", 100, 1024, 20),
]


def write_fleet(folder: Path) -> list[Path]:
    """The fleet's console logs, their modification times set to their age."""
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    paths = []
    for i, (project, experiment, kind, step, max_len, age) in enumerate(FLEET):
        config = {
            "trainer": {"project_name": project, "experiment_name": experiment},
            "data": {"max_response_length": max_len},
        }
        sim = simulate(
            200, "grpo", seed=i, inject=[Injection(kind, step)] if kind else [], config=config
        )
        path = write_console_log(sim, folder / f"run{i}.log")
        os.utime(path, (now - age * 86400, now - age * 86400))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("fleet")
    logs = write_fleet(base / "runs")
    store = base / "store"
    out = base / "fleet.json"
    args = ["analyze", str(base / "runs"), "--store", str(store), "-f", "json", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output  # errors (OOM crashes) among the runs
    reports = json.loads(out.read_text())["reports"]
    assert len(reports) == len(FLEET)
    by_path = {r["run"]["source"]["path"]: r for r in reports}
    return {"base": base, "store": store, "logs": logs, "reports": by_path}


def query(store: Path, sql: str, *extra: str) -> Any:
    """The JSON rows of `logscope query SQL --store store`."""
    result = CliRunner().invoke(app, ["query", sql, "--store", str(store), "-f", "json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["rows"]


def doc_queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOC.read_text(), re.S)


def report_of(fleet: dict[str, Any], i: int) -> dict[str, Any]:
    return fleet["reports"][str(fleet["logs"][i])]


# ---- docs/fleet.md's example queries, answered ---------------------------------------------------
def test_the_docs_have_the_example_queries() -> None:
    assert len(doc_queries()) == 5


def test_runs_with_a_kl_jump_last_week(fleet: dict[str, Any]) -> None:
    rows = query(fleet["store"], doc_queries()[0])
    # run0 and run5 both jump; run5's log is 20 days old
    assert rows == [
        {"experiment": "grpo-base", "source_path": str(fleet["logs"][0]), "kl_jump_step": 120}
    ]
    jumped = {
        f["step"]
        for r in fleet["reports"].values()
        for f in r["findings"]
        if f["name"] == "kl-jump"
    }
    assert jumped == {100, 120}


def test_median_throughput_per_experiment(fleet: dict[str, Any]) -> None:
    rows = query(fleet["store"], doc_queries()[1])
    expected: dict[str, list[float]] = {}
    for i, log in enumerate(fleet["logs"]):
        (run,) = load(log)
        _, values = run.series("perf/throughput")
        expected.setdefault(FLEET[i][1], []).extend(values.tolist())
    medians = {k: float(pl.Series(v).median()) for k, v in expected.items()}  # type: ignore[arg-type]
    assert {r["experiment"]: r["median_throughput"] for r in rows} == pytest.approx(medians)
    assert [r["median_throughput"] for r in rows] == sorted(medians.values(), reverse=True)
    assert rows[-1]["experiment"] == "code-b"  # the throughput drop
    assert {r["experiment"]: r["runs"] for r in rows} == {
        "grpo-base": 2,
        "grpo-long": 2,
        "grpo-mid": 1,
        "code-a": 2,
        "code-b": 1,
    }


def test_first_oom_step_per_config_value(fleet: dict[str, Any]) -> None:
    rows = query(fleet["store"], doc_queries()[2])
    assert rows == [
        {"max_response_length": "4096", "first_oom_step": 90, "runs": 2},
        {"max_response_length": "2048", "first_oom_step": 130, "runs": 1},
    ]


def test_findings_by_diagnosis_per_project(fleet: dict[str, Any]) -> None:
    rows = query(fleet["store"], doc_queries()[3])
    expected: dict[tuple[str, str], list[int]] = {}  # (project, name) → [runs, findings]
    for i, log in enumerate(fleet["logs"]):
        names = [
            f["name"]
            for f in fleet["reports"][str(log)]["findings"]
            if f["severity"] in ("warning", "error", "critical")
        ]
        for name in set(names):
            counts = expected.setdefault((FLEET[i][0], name), [0, 0])
            counts[0] += 1
            counts[1] += names.count(name)
    got = {(r["project"], r["diagnosis"]): [r["runs"], r["findings"]] for r in rows}
    assert got == expected
    assert got[("math", "cuda-oom")] == [3, 3]
    assert got[("code", "throughput-drop")] == [1, 1]
    assert [r["project"] for r in rows] == sorted(r["project"] for r in rows)


def test_largest_kl_jumps_from_the_evidence(fleet: dict[str, Any]) -> None:
    rows = query(fleet["store"], doc_queries()[4])
    expected = sorted(
        (
            f["evidence"]["ratio"]
            for r in fleet["reports"].values()
            for f in r["findings"]
            if f["name"] == "kl-jump"
        ),
        reverse=True,
    )
    assert [r["ratio"] for r in rows] == expected
    assert {r["experiment"] for r in rows} == {"grpo-base", "code-a"}


# ---- the tables match the reports and the report schema ------------------------------------------
def finding_validator() -> Any:
    schema = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    defs = schema["$defs"]
    finding = {"$ref": "#/$defs/finding", "$defs": defs}
    return jsonschema.Draft202012Validator(finding), defs["finding"]


def test_parquet_findings_validate_against_the_report_schema(fleet: dict[str, Any]) -> None:
    validator, definition = finding_validator()
    frame = pl.read_parquet(fleet["store"] / "runs" / "run_id=*" / "findings.parquet")
    assert dict(frame.schema) == FINDINGS_SCHEMA
    assert set(definition["required"]) <= set(frame.columns)
    assert frame.height == sum(len(r["findings"]) for r in fleet["reports"].values()) > 10
    for row in frame.iter_rows(named=True):
        finding = {k: row[k] for k in definition["properties"]}
        finding["evidence"] = json.loads(finding["evidence"])
        finding["advice"] = json.loads(finding["advice"])
        errors = [e.message for e in validator.iter_errors(finding)]
        assert not errors, (row["code"], errors)
    assert frame.get_column("step").dtype == pl.Int64  # integer|null, as the schema says
    broken = finding_validator()[0].iter_errors({"code": "LS1", "advice": [{"parameter": "a b"}]})
    assert len(list(broken)) > 2  # the validator does check


def test_parquet_findings_are_the_reports_findings(fleet: dict[str, Any]) -> None:
    store = Store(fleet["store"])
    for report in fleet["reports"].values():
        run_id = report["run"]["id"]
        frame = pl.read_parquet(store.run_dir(run_id) / "findings.parquet")
        assert frame.get_column("run_id").unique().to_list() in ([run_id], [])
        rows = frame.sort("position").to_dicts()
        fields = list(report["findings"][0]) if report["findings"] else []
        decoded = [
            {
                **{k: r[k] for k in fields},
                "evidence": json.loads(r["evidence"]),
                "advice": json.loads(r["advice"]),
            }
            for r in rows
        ]
        assert decoded == report["findings"]
        incident_of = {k: i["id"] for i in report["incidents"] for k in i["findings"]}
        assert [r["incident"] for r in rows] == [incident_of.get(n) for n in range(len(rows))]


def test_runs_table_has_one_row_per_run(fleet: dict[str, Any]) -> None:
    frame = pl.read_parquet(fleet["store"] / "runs" / "run_id=*" / "summary.parquet")
    assert dict(frame.schema) == RUNS_SCHEMA
    assert frame.height == len(FLEET)
    for row in frame.iter_rows(named=True):
        report = fleet["reports"][row["source_path"]]
        i = fleet["logs"].index(Path(row["source_path"]))
        assert row["run_id"] == report["run"]["id"]
        assert (row["project"], row["experiment"]) == FLEET[i][:2]
        assert row["n_steps"] == report["run"]["steps"]["count"]
        assert row["last_step"] == report["run"]["steps"]["last"]
        assert row["worst_severity"] == report["summary"]["worst_severity"]
        assert row["findings"] == len(report["findings"])
        assert set(row["diagnoses"]) == {f["name"] for f in report["findings"]}
        assert json.loads(row["config"])["data"]["max_response_length"] == FLEET[i][4]
        assert row["source_kind"] == "verl-console" and row["n_gpus"] == 8
        age_days = (time.time() - row["source_modified_at"].timestamp()) / 86400
        assert age_days == pytest.approx(FLEET[i][5], abs=0.01)


def test_metrics_view_has_every_stored_run(fleet: dict[str, Any]) -> None:
    rows = query(
        fleet["store"],
        "SELECT run_id, max(step) AS last FROM metrics GROUP BY run_id ORDER BY run_id",
    )
    expected = sorted(
        (r["run"]["id"], r["run"]["steps"]["last"]) for r in fleet["reports"].values()
    )
    assert [(r["run_id"], r["last"]) for r in rows] == expected


# ---- the command ---------------------------------------------------------------------------------
def test_formats(fleet: dict[str, Any]) -> None:
    sql = "SELECT experiment, n_steps, diagnoses FROM runs WHERE experiment = 'grpo-mid'"
    runner = CliRunner()
    csv_out = runner.invoke(app, ["query", sql, "--store", str(fleet["store"]), "-f", "csv"])
    assert csv_out.exit_code == 0
    lines = csv_out.stdout.splitlines()
    assert lines[0] == "experiment,n_steps,diagnoses"
    assert lines[1].startswith("grpo-mid,131,")
    md = runner.invoke(app, ["query", sql, "--store", str(fleet["store"]), "-f", "markdown"])
    assert md.stdout.splitlines()[:2] == ["| experiment | n_steps | diagnoses |", "|---|---|---|"]
    assert "| grpo-mid | 131 | [" in md.stdout
    table = runner.invoke(app, ["query", sql, "--store", str(fleet["store"])])
    assert table.exit_code == 0 and "grpo-mid" in table.stdout and "1 row" in table.stdout
    out = fleet["base"] / "q.json"
    runner.invoke(app, ["query", sql, "--store", str(fleet["store"]), "-f", "json", "-o", str(out)])
    body = json.loads(out.read_text())
    assert body["schema"] == "logscope.query/1"
    assert body["columns"] == ["experiment", "n_steps", "diagnoses"]
    assert body["rows"][0]["n_steps"] == 131 and "cuda-oom" in body["rows"][0]["diagnoses"]


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELEC 1", "Parser Error"),
        ("SELECT nope FROM runs", "Binder Error"),
        ("SELECT * FROM no_such_table", "Catalog Error"),
    ],
)
def test_bad_sql_exits_2_with_duckdbs_message(fleet: dict[str, Any], sql: str, says: str) -> None:
    result = CliRunner().invoke(app, ["query", sql, "--store", str(fleet["store"])])
    assert result.exit_code == 2
    assert says in result.output and "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def test_no_store_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["query", "SELECT 1", "--store", str(tmp_path / "none")])
    assert result.exit_code == 2 and "no store at" in result.output


def test_a_store_without_tables_gives_empty_views(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    for view in ("runs", "findings", "metrics", "config"):
        columns, rows = run_query(f"SELECT * FROM {view}", tmp_path)
        assert rows == [] and "run_id" in columns
    columns, _ = run_query("SELECT * FROM findings", tmp_path)
    assert columns == list(FINDINGS_SCHEMA)


def test_missing_duckdb_names_the_extra(
    fleet: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # import duckdb raises ImportError
    result = CliRunner().invoke(app, ["query", "SELECT 1", "--store", str(fleet["store"])])
    assert result.exit_code == 2
    assert "pip install 'logscope[query]'" in " ".join(result.output.split())


def test_query_imports_no_detector(fleet: dict[str, Any]) -> None:
    code = (
        "import sys\n"
        "from logscope.cli.query import run_query\n"
        f"run_query('SELECT count(*) FROM findings', __import__('pathlib').Path({str(fleet['store'])!r}))\n"
        "print([m for m in sys.modules if m.startswith('logscope.detectors') or m in "
        "('ruptures', 'scipy')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- the store's guarantees ----------------------------------------------------------------------
def copy_store(fleet: dict[str, Any], dest: Path) -> Path:
    shutil.copytree(fleet["store"], dest)
    return dest


def test_a_damaged_file_reads_as_absent_and_is_rebuilt(
    fleet: dict[str, Any], tmp_path: Path
) -> None:
    store = copy_store(fleet, tmp_path / "store")
    run0 = report_of(fleet, 0)["run"]["id"]
    damaged = Store(store).run_dir(run0) / "findings.parquet"
    damaged.write_bytes(damaged.read_bytes()[:40])  # a torn file (e.g. another tool's write)
    result = CliRunner().invoke(
        app, ["query", "SELECT DISTINCT run_id FROM findings", "--store", str(store), "-f", "csv"]
    )
    assert result.exit_code == 0, result.output
    ids = result.stdout.splitlines()[1:]
    assert run0 not in ids and len(ids) == len(FLEET) - 1
    assert "damaged" in result.stderr and str(damaged) in result.stderr.replace("\n", "")
    # a cached re-analysis (no detector runs) writes it again
    again = CliRunner().invoke(
        app, ["analyze", str(fleet["logs"][0]), "--store", str(store), "-f", "json"]
    )
    assert again.exit_code == 1
    assert len(pl.read_parquet(damaged)) == len(report_of(fleet, 0)["findings"])


def test_cached_reanalysis_restores_missing_tables(fleet: dict[str, Any], tmp_path: Path) -> None:
    store = copy_store(fleet, tmp_path / "store")
    folder = Store(store).run_dir(report_of(fleet, 5)["run"]["id"])
    before = (folder / "findings.parquet").read_bytes()
    row_before = pl.read_parquet(folder / "summary.parquet")
    (folder / "findings.parquet").unlink()
    (folder / "summary.parquet").unlink()  # an entry stored before the tables existed
    result = CliRunner().invoke(app, ["analyze", str(fleet["logs"][5]), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert (folder / "findings.parquet").read_bytes() == before  # same bytes
    row = pl.read_parquet(folder / "summary.parquet")
    assert row.drop("analysed_at").equals(row_before.drop("analysed_at"))


def test_only_and_skip_do_not_replace_the_full_analysis(
    fleet: dict[str, Any], tmp_path: Path
) -> None:
    store = copy_store(fleet, tmp_path / "store")
    folder = Store(store).run_dir(report_of(fleet, 0)["run"]["id"])
    before = (folder / "findings.parquet").read_bytes()
    for option in (["--only", "kl-jump"], ["--skip", "kl-jump"]):
        args = ["analyze", str(fleet["logs"][0]), "--store", str(store), *option]
        assert CliRunner().invoke(app, args).exit_code in (0, 1)
        assert (folder / "findings.parquet").read_bytes() == before
    fresh = tmp_path / "fresh"
    args = ["analyze", str(fleet["logs"][1]), "--store", str(fresh), "--only", "kl-jump"]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert run_query("SELECT * FROM findings", fresh)[1] == []
    assert run_query("SELECT * FROM runs", fresh)[1] == []
    assert run_query("SELECT count(*) FROM metrics", fresh)[1][0][0] > 0


def test_writers_of_one_analysis_write_the_same_findings_bytes(
    fleet: dict[str, Any], tmp_path: Path
) -> None:
    from logscope.store import findings_frame

    store = Store(copy_store(fleet, tmp_path / "store"))
    report = report_of(fleet, 2)
    folder = store.run_dir(report["run"]["id"])
    first = (folder / "findings.parquet").read_bytes()
    (run,) = store.get_source(store.key(fleet["logs"][2])) or []
    settings = pl.read_parquet(folder / "summary.parquet").item(0, "settings")
    store.put_tables(report, run, settings)
    assert (folder / "findings.parquet").read_bytes() == first
    assert findings_frame(report, settings).equals(pl.read_parquet(folder / "findings.parquet"))
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
