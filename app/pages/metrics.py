"""Metric charts grouped as a verl user reads them, with finding markers and incident spans."""

import streamlit as st
from logscope.app import _common as ui

from logscope.charts import group_title, metric_figure, metric_groups
from logscope.present import md_escape

picked = ui.run_page("Metrics")
if picked is not None:
    run_id, report = picked
    run = report.run
    groups = metric_groups(run.metric_names)
    smoothing = st.sidebar.slider(
        "Smoothing (debiased EMA weight)", 0.0, 0.99, 0.0, 0.01, key="smoothing"
    )
    max_points = st.sidebar.select_slider(
        "Points per curve (min/max per bucket; spikes kept)",
        options=[500, 1000, 2000, 5000, 20000],
        value=2000,
        key="max_points",
    )
    shown = st.sidebar.multiselect(
        "Groups",
        list(groups),
        default=list(groups),
        format_func=group_title,
        key=f"groups-{run_id}",  # per run: runs have different groups
    )
    marks = st.sidebar.toggle("Finding markers and incident spans", value=True, key="marks")
    findings = report.findings if marks else ()
    incidents = report.incidents if marks else ()

    # A link from a finding: ?metric=...&step=... zooms on that metric around that step.
    focus_metric = st.query_params.get("metric")
    focus_step = st.query_params.get("step")
    if focus_metric and run.has_metric(focus_metric) and focus_step and focus_step.isdigit():
        step = int(focus_step)
        steps = run.steps
        half = max(25, int(0.05 * (int(steps[-1]) - int(steps[0])))) if len(steps) else 25
        st.subheader(f"Focus: {md_escape(focus_metric)} around step {step}")
        st.plotly_chart(
            metric_figure(
                run,
                [focus_metric],
                title=f"{focus_metric} · steps {step - half}–{step + half}",
                findings=findings,
                incidents=incidents,
                smoothing=smoothing,
                max_points=max_points,
                step_range=(step - half, step + half),
            ),
            key="focus",
        )

    if not groups:
        st.info("This run has no metrics.")
    else:
        st.caption(
            "Each group draws its headline metrics and any metric a finding points at; click a "
            "name in a legend to show the others. An x marks a finding at its step; shaded spans "
            "and top ribbons are incidents."
        )
    root = ui.store_root()
    for key in shown:
        fig = ui.group_chart(root, run_id, key, smoothing, max_points, marks)
        if fig is not None:
            st.plotly_chart(fig, key=f"chart-{key}")
