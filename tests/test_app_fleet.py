"""The Fleet page (app/pages/fleet.py): runs × diagnoses, worst first, filters, click to open."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from logscope.analyze import analyze_run
from logscope.model import SEVERITY_RANK, Run
from logscope.report import Report
from logscope.store import Store
from tests.dashboard_data import APP, FIXTURES, build_run

DAY = 86_400.0
FIXED = ("run", "project", "experiment", "date", "steps", "worst severity", "findings")


def _run(run_id: str, project: str, days: int, **kw) -> Run:
    run = build_run(run_id, **kw)
    run.meta["project"] = project
    run.meta["experiment"] = f"{project}-{run_id[:4]}"
    run.metrics = run.metrics.with_columns(pl.col("wall_time") + days * DAY)
    return run


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Report]]:
    """Four runs over two projects and three dates: a faulty one, a tuned one, a clean one,
    and a clean one but for a NaN loss."""
    root = tmp_path_factory.mktemp("fleet_store")
    runs = [
        _run("aaaa0000000000000000", "alpha", 0, seed=1),
        _run("bbbb0000000000000000", "alpha", 10, tuned=True, seed=2),
        _run("cccc0000000000000000", "beta", 20, faults=False, seed=3),
        _run("dddd0000000000000000", "beta", 20, faults=False, seed=4),
    ]
    nan = (pl.col("metric") == "actor/pg_loss") & (pl.col("step") == 50)
    runs[3].metrics = runs[3].metrics.with_columns(
        pl.when(nan).then(float("nan")).otherwise(pl.col("value")).alias("value")
    )
    store = Store(root)
    for run in runs:
        store.put_run(run)
    return root, {run.id: analyze_run(run) for run in runs}


def _open(root: Path, monkeypatch: pytest.MonkeyPatch, **state) -> AppTest:
    monkeypatch.setenv("LOGSCOPE_STORE", str(root))
    monkeypatch.delenv("LOGSCOPE_RUNS", raising=False)
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    for k, v in state.items():
        at.session_state[k] = v
    at.switch_page("pages/fleet.py").run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Fleet"
    return at


def _ids(at: AppTest, reports: dict[str, Report]) -> list[str]:
    by_experiment = {r.run.meta["experiment"]: rid for rid, r in reports.items()}
    return [by_experiment[e] for e in at.dataframe[0].value["experiment"]]


def test_rows_worst_first_one_column_per_diagnosis(fleet, monkeypatch) -> None:
    root, reports = fleet
    at = _open(root, monkeypatch)
    table = at.dataframe[0].value
    order = _ids(at, reports)
    assert sorted(order) == sorted(reports)

    def rank(rid: str) -> tuple[int, int]:
        r = reports[rid]
        return (-SEVERITY_RANK[r.worst_severity] if r.worst_severity else 1, -len(r.findings))

    assert order == sorted(order, key=rank)
    # Two runs with an error: the one with more findings first.
    assert [reports[r].worst_severity for r in order[:2]] == ["error", "error"]
    assert order[:2] == ["aaaa0000000000000000", "dddd0000000000000000"]
    # One column per diagnosis that fires in any run; each cell its worst severity there.
    names = {f.name for r in reports.values() for f in r.findings}
    assert list(table.columns[: len(FIXED)]) == list(FIXED)
    assert set(table.columns[len(FIXED) :]) == names
    for row, rid in zip(table.to_dict("records"), order, strict=True):
        worst: dict[str, str] = {}
        for f in reports[rid].findings:
            if SEVERITY_RANK[f.severity] > SEVERITY_RANK.get(worst.get(f.name, ""), -1):
                worst[f.name] = f.severity
        assert {n: row[n] for n in names if row[n]} == worst, rid  # blank: did not fire
        assert row["findings"] == len(reports[rid].findings)
        assert row["steps"] == reports[rid].run.n_steps
        assert row["project"] == reports[rid].run.meta["project"]
    assert set(table["date"]) == {"2025-11-30", "2025-12-10", "2025-12-20"}


def test_filters_narrow_the_rows(fleet, monkeypatch) -> None:
    root, reports = fleet
    at = _open(root, monkeypatch)
    at.sidebar.multiselect(key="fleet_project").set_value(["beta"]).run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert set(table["project"]) == {"beta"} and len(table) == 2
    # The diagnosis columns follow the rows shown.
    beta = {f.name for r in reports.values() if r.run.meta["project"] == "beta" for f in r.findings}
    assert set(table.columns[len(FIXED) :]) == beta

    at.sidebar.multiselect(key="fleet_project").set_value([]).run()
    assert len(at.dataframe[0].value) == 4
    day = dt.date(2025, 12, 10)
    at.sidebar.date_input(key="fleet_dates").set_value((dt.date(2025, 11, 30), day)).run()
    assert not at.exception, at.exception
    assert set(at.dataframe[0].value["date"]) == {"2025-11-30", "2025-12-10"}
    experiment = sorted(r.run.meta["experiment"] for r in reports.values())[1]
    at.sidebar.multiselect(key="fleet_experiment").set_value([experiment]).run()
    assert list(at.dataframe[0].value["experiment"]) == [experiment]


def test_clicking_a_row_opens_that_run(fleet, monkeypatch) -> None:
    root, reports = fleet
    at = _open(root, monkeypatch)
    order = _ids(at, reports)
    at.session_state["fleet_table"] = {"selection": {"rows": [1], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Run"
    assert at.session_state["run_id"] == order[1]
    assert at.sidebar.selectbox[0].value == order[1]
    # Back on the Fleet page the old click does not switch again; the fallback link opens the
    # run picked below the table.
    at.switch_page("pages/fleet.py").run()
    assert at.title[0].value == "Fleet"
    at.selectbox(key="fleet_open").set_value(order[2]).run()
    [link] = [p.proto for p in at.get("page_link") if p.proto.page.endswith("run")]
    assert link.query_string == f"run={order[2]}"


def test_fleet_is_in_the_navigation_after_runs() -> None:
    source = APP.read_text()
    assert source.index('"pages/runs.py"') < source.index('"pages/fleet.py"')
    assert source.index('"pages/fleet.py"') < source.index('"pages/run.py"')


def test_fleet_on_the_committed_fixtures_and_an_empty_store(tmp_path: Path, monkeypatch) -> None:
    at = _open(tmp_path / "empty", monkeypatch)
    assert any("No runs yet" in i.value for i in at.info)
    store = Store(tmp_path / "fixtures")
    ids = [run.id for path in FIXTURES for run in store.load(path)]
    at = _open(tmp_path / "fixtures", monkeypatch)
    table = at.dataframe[0].value
    assert len(table) == len(ids)
    assert set(table["project"]) == {"verl_ppo_gsm8k"}  # the readers' meta reaches the table
    assert all(table["date"])  # a console log's date is its file's time


def test_log_text_in_the_fleet_is_text(tmp_path: Path, monkeypatch) -> None:
    evil = "<img src=x onerror=alert(1)> [link](javascript:alert(1))"
    run = _run("evil0000000000000000", evil, 0, seed=5)
    Store(tmp_path).put_run(run)
    at = _open(tmp_path, monkeypatch)
    assert list(at.dataframe[0].value["project"]) == [evil]  # shown as it is, in a table
    assert at.sidebar.multiselect(key="fleet_project").options == [evil]
    assert not any("onerror" in m.value or "javascript" in m.value for m in at.markdown)
    assert not any("javascript" in p.proto.label for p in at.get("page_link"))
