"""The store's runs × diagnoses: one row per run, one column per diagnosis that fires anywhere,
worst runs first; filter by project, experiment and date; click a row to open the run."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from typing import Any

import streamlit as st
from logscope.app import _common as ui

from logscope.model import SEVERITY_RANK
from logscope.report import Report

NONE = "(none)"  # the filter option of runs without a project / experiment
TABLE_KEY = "fleet_table"
#: the table's columns shown after the diagnoses
DETAILS = ("project", "experiment", "date", "steps")
SEVERITY_COLOR = {
    "critical": "background-color: #8b0000; color: white",
    "error": "background-color: #f5b7b1",
    "warning": "background-color: #fad7a0",
    "info": "background-color: #d6eaf8",
}


def run_date(report: Report) -> date | None:
    """When the run happened: its start time (W&B), else its first wall time when that is a
    clock time, else its source file's modification time; None when nothing tells."""
    run = report.run
    start = run.meta.get("start_time")
    if isinstance(start, int | float) and start > 1e9:
        return datetime.fromtimestamp(float(start), tz=UTC).date()
    _, walls = run.wall_times()
    if len(walls) and float(walls.min()) > 1e9:
        return datetime.fromtimestamp(float(walls.min()), tz=UTC).date()
    path = run.source.path or ""
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, tz=UTC).date() if path else None
    except (OSError, ValueError):
        return None


def diagnoses(report: Report) -> dict[str, str]:
    """Diagnosis name → the worst severity it fired with in this run."""
    worst: dict[str, str] = {}
    for f in report.findings:
        if f.name not in worst or SEVERITY_RANK[f.severity] > SEVERITY_RANK[worst[f.name]]:
            worst[f.name] = f.severity
    return worst


@st.cache_data(show_spinner=False, max_entries=2048)
def fleet_row(root: str, run_id: str) -> dict[str, Any] | None:
    """One run of the Fleet table: who, when, how long, how bad, and which diagnoses fired."""
    report = ui.load_report(root, run_id)
    if report is None:
        return None
    meta = report.run.meta
    day = run_date(report)
    return {
        "run": ui.run_label(report.run),
        "project": str(meta.get("project") or meta.get("wandb_project") or ""),
        "experiment": str(meta.get("experiment") or ""),
        "date": day.isoformat() if day else "",
        "steps": report.run.n_steps,
        "worst severity": report.worst_severity or "none",
        "findings": len(report.findings),
        "id": run_id,
        "diagnoses": diagnoses(report),
    }


def worst_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by worst severity, then number of findings (most first), then name."""

    def rank(row: dict[str, Any]) -> tuple[int, int, str]:
        return (-SEVERITY_RANK.get(row["worst severity"], -1), -row["findings"], row["run"])

    return sorted(rows, key=rank)


def diagnosis_columns(rows: list[dict[str, Any]]) -> list[str]:
    """Every diagnosis that fires in these rows: worst severity first, then how many runs."""
    worst: dict[str, int] = {}
    count: dict[str, int] = {}
    for row in rows:
        for name, sev in row["diagnoses"].items():
            worst[name] = max(worst.get(name, -1), SEVERITY_RANK[sev])
            count[name] = count.get(name, 0) + 1
    return sorted(worst, key=lambda n: (-worst[n], -count[n], n))


def _choices(rows: list[dict[str, Any]], field: str) -> list[str]:
    return sorted({row[field] or NONE for row in rows})


def _filtered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows the sidebar filters keep."""
    side = st.sidebar
    projects = side.multiselect("Project", _choices(rows, "project"), key="fleet_project")
    experiments = side.multiselect(
        "Experiment", _choices(rows, "experiment"), key="fleet_experiment"
    )
    # The date span of every run (not of the rows left): the widget's bounds stay put.
    days = sorted({r["date"] for r in rows if r["date"]})
    rows = [r for r in rows if not projects or (r["project"] or NONE) in projects]
    rows = [r for r in rows if not experiments or (r["experiment"] or NONE) in experiments]
    if days:
        first, last = date.fromisoformat(days[0]), date.fromisoformat(days[-1])
        picked = side.date_input(
            "Date", value=(first, last), min_value=first, max_value=last, key="fleet_dates"
        )
        span = tuple(picked) if isinstance(picked, list | tuple) else (picked,)
        if len(span) == 2 and span != (first, last):  # narrowed: runs without a date drop out
            lo, hi = span[0].isoformat(), span[1].isoformat()
            rows = [r for r in rows if r["date"] and lo <= r["date"] <= hi]
        side.caption("Date: the run's start, first logged time, or its log file's time.")
    return rows


def _table(rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    return [
        {
            **{k: v for k, v in row.items() if k not in ("diagnoses", "id")},
            **{name: row["diagnoses"].get(name, "") for name in names},
        }
        for row in rows
    ]


def _rows(root: str, ids: list[str]) -> list[dict[str, Any]]:
    """The rows of these runs; a bar shows progress while runs are analysed the first time (a
    cached row costs nothing, an uncached one a full analysis: ~0.1 s for 300 steps)."""
    bar = st.progress(0.0) if len(ids) > 10 else None
    rows = []
    for n, rid in enumerate(ids):
        if bar is not None and n % 5 == 0:
            bar.progress(n / len(ids), text=f"Reading the runs: {n} of {len(ids)}")
        if (row := fleet_row(root, rid)) is not None:
            rows.append(row)
    if bar is not None:
        bar.empty()
    return rows


ui.page_setup()
st.title("Fleet")
root = ui.store_root()
all_rows = list(_rows(root, ui.list_run_ids()))
if not all_rows:
    st.info("No runs yet. Add one on the Runs page, or run `logscope dashboard LOG...`.")
else:
    rows = worst_first(_filtered(all_rows))
    names = diagnosis_columns(rows)
    st.caption(
        f"{len(rows)} of {len(all_rows)} runs, {len(names)} diagnoses; worst runs first. "
        "A cell is the severity a diagnosis fired with in that run. Click a row to open the run."
    )
    if not rows:
        st.info("No run matches these filters.")
    else:
        import pandas as pd

        frame = pd.DataFrame(_table(rows, names))
        styled = frame.style.map(
            lambda v: SEVERITY_COLOR.get(v, ""), subset=["worst severity", *names]
        )
        event = st.dataframe(
            styled,
            hide_index=True,
            on_select="rerun",
            selection_mode="single-row",
            key=TABLE_KEY,
            column_config={"steps": st.column_config.NumberColumn(format="%d")},
            # The diagnoses next to the run (the matrix is the point), its details after.
            column_order=["run", "worst severity", "findings", *names, *DETAILS],
        )
        picked = list(event.selection.rows) if event is not None else []
        if picked and 0 <= picked[0] < len(rows):
            st.session_state["run_id"] = rows[picked[0]]["id"]
            st.switch_page("pages/run.py")
        # Without a click (or where clicks do not reach the app): pick a run, follow the link.
        ids = [r["id"] for r in rows]
        current = st.session_state.get("run_id")
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        chosen = c1.selectbox(
            "Run to open",
            ids,
            index=ids.index(current) if current in ids else 0,
            format_func=lambda rid: ui.label_of(root, rid),
            key="fleet_open",
        )
        c2.page_link(
            "pages/run.py",
            label="Open this run",
            icon=":material/stethoscope:",
            query_params={"run": chosen},
        )
