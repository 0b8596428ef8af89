"""Follow a growing log: re-read it through the store every few seconds and show the latest."""

import os
from pathlib import Path

import streamlit as st
from logscope.app import _common as ui
from logscope.app._cards import finding_card

from logscope.analyze import analyze_run
from logscope.charts import metric_figure
from logscope.exceptions import LogscopeError
from logscope.present import md_escape

ui.page_setup()
st.title("Live")
path = st.text_input(
    "Log file to follow", value=os.environ.get("LOGSCOPE_LIVE", ""), key="live_path"
)
every = st.sidebar.select_slider("Refresh every (s)", [2, 5, 10, 30], value=5, key="live_every")


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
    report = ui.load_report(ui.store_root(), run.id) or analyze_run(run)
    run = report.run
    steps = run.steps
    c = st.columns(3)
    c[0].metric("last step", int(steps[-1]) if len(steps) else "–")
    c[1].metric("findings", len(report.findings))
    c[2].metric("worst", report.worst_severity or "none")
    if len(steps):
        last = run.metrics.filter(run.metrics["step"] == steps[-1])
        st.dataframe(last.select("metric", "value").sort("metric"), hide_index=True, height=250)
    for n, f in enumerate(ui.worst_first(report.findings)[:10]):
        finding_card(f, run.id, n)
    score = next(
        (m for m in ("critic/score/mean", "critic/rewards/mean") if run.has_metric(m)), None
    )
    if score:
        st.plotly_chart(
            metric_figure(run, [score], findings=report.findings, incidents=report.incidents),
            key="live-score",
        )


if path:
    follow(path)
else:
    st.info("Give the path of a log that is being written (e.g. `tee verl.log`).")
