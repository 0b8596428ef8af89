"""Follow a growing log: re-read it through the store every few seconds and show the latest."""

import os
from pathlib import Path

import streamlit as st
from logscope.app import _common as ui
from logscope.app._cards import finding_card
from logscope.app._plots import ChartStyle, metric_grid

from logscope.analyze import analyze_run
from logscope.charts import panel_groups
from logscope.exceptions import LogscopeError
from logscope.present import fmt_number, md_escape
from logscope.report import Report

#: panels the Live page draws: the metrics findings point at, then each group's headline ones
LIVE_PANELS = 9

ui.page_setup()
st.title("Live")
path = st.text_input(
    "Log file to follow", value=os.environ.get("LOGSCOPE_LIVE", ""), key="live_path"
)
every = st.sidebar.select_slider("Refresh every (s)", [2, 5, 10, 30], value=5, key="live_every")
smoothing = ui.smoothing_setting()


def live_panels(report: Report) -> list[str]:
    """Up to LIVE_PANELS metrics: those with findings first, then the groups' headline ones."""
    groups = panel_groups(report.run.metric_names, report.findings)
    flagged = [n for g in groups for n in g.default if n in g.flagged]
    headline = [n for g in groups for n in g.default if n not in g.flagged]
    return list(dict.fromkeys([*flagged, *headline]))[:LIVE_PANELS]


@st.fragment(run_every=every)
def follow(path: str) -> None:
    try:
        p = Path(ui.check_path(path))  # again on every refresh: a link may change under us
    except ui.Refused as exc:
        st.error(md_escape(exc))
        return
    if not p.is_file():
        st.warning(f"Not a file: {md_escape(path)}")
        return
    try:
        runs = ui.get_store().load(p)  # content-hashed: unchanged file → cached Parquet
    except LogscopeError as exc:
        st.error(md_escape(exc))
        return
    if not runs:
        st.info("No run in this file yet.")
        return
    run = runs[-1]
    # The run id is the content hash: an unchanged file reuses the cached Report.
    root = ui.store_root()
    stored = ui.load_report(root, run.id)
    report = stored or analyze_run(run)
    run = report.run
    steps = run.steps
    c = st.columns(3)
    c[0].metric("last step", int(steps[-1]) if len(steps) else "–")
    c[1].metric("findings", len(report.findings))
    c[2].metric("worst", report.worst_severity or "none")
    if len(steps):
        # Curves first: what the run is doing; the findings as they appear below them.
        panels = live_panels(report)
        style = ChartStyle(smoothing=smoothing)
        metric_grid(report, panels, root=root if stored else None, style=style, key="live")
        last = run.metrics.filter(run.metrics["step"] == steps[-1]).sort("metric")
        rows = [
            {"metric": m, "value": fmt_number(v)}
            for m, v in zip(last["metric"], last["value"], strict=True)
        ]
        with st.expander(f"Values at step {int(steps[-1])} ({len(rows)})"):
            st.dataframe(rows, hide_index=True, height=250)
    for n, f in enumerate(ui.worst_first(report.findings)[:10]):
        finding_card(f, run.id, n)


if path:
    follow(path)
else:
    st.info("Give the path of a log that is being written (e.g. `tee verl.log`).")
