"""One chart per metric, W&B-style: a grid of panels per group, findings marked, a search box."""

import streamlit as st
from logscope.app import _common as ui
from logscope.app import _plots

from logscope.charts import matches_query
from logscope.present import md_escape


def _int_param(name: str) -> int | None:
    raw = st.query_params.get(name)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


picked = ui.run_page("Metrics")
if picked is not None:
    run_id, report = picked
    run = report.run
    root = ui.store_root()
    smoothing = ui.smoothing_setting()
    max_points = st.sidebar.select_slider(
        "Points per curve (min/max per bucket; spikes kept)",
        options=[500, 1000, 2000, 5000, 20000],
        value=2000,
        key="max_points",
    )
    log = st.sidebar.toggle(
        "Log y-axis where a metric spans 2+ decades",
        value=False,
        key="log_y",
        help="Applied to panels whose values are all positive and span ≥ 100×.",
    )
    marks = st.sidebar.toggle("Finding markers and incident spans", value=True, key="marks")
    style = _plots.ChartStyle(smoothing, max_points, marks, log)

    # A finding's "show on chart" link: ?metric=...&step=...[&end=...] zooms on that window.
    focus_metric = st.query_params.get("metric")
    focus_step = _int_param("step")
    if focus_metric and focus_step is not None and run.has_metric(focus_metric):
        st.subheader(f"Focus: {md_escape(focus_metric)}")
        _plots.focus_chart(
            report, focus_metric, focus_step, _int_param("end"), root=root, style=style
        )
    elif focus_metric:
        st.warning(f"This run has no metric {md_escape(focus_metric)} with a step to zoom on.")

    query = st.text_input(
        "Search metrics",
        key="metric_search",
        placeholder="e.g. kl, grad_norm, val-core",
        help="Every word must be in the metric name (case-insensitive), across all groups.",
    )
    if not run.metric_names:
        st.info("This run has no metrics.")
    else:
        st.caption(
            "One chart per metric. Groups with findings come first, and inside a group the "
            "metrics with findings; an x marks a finding at its step, dashed lines its "
            "changepoint, shaded spans and top ribbons incidents. Collapsed groups are drawn "
            "when opened."
        )
        _plots.grouped_grids(report, root=root, query=query, style=style)
        if query.strip() and not any(matches_query(m, query) for m in run.metric_names):
            st.info(f"No metric name holds {md_escape(query.strip())}.")
