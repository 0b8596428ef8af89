"""Metric charts of the dashboard: cached one-metric figures and W&B-style grids of them.

Every page that draws a run's metrics goes through here: `metric_grid` draws panels (one plotly
figure per metric, each with its own y-axis) in rows, `grouped_grids` draws a run's metric
groups as collapsible grids (groups holding findings first; a collapsed group builds nothing),
`focus_chart` draws the zoom a finding's "show on chart" link asks for. With `root` (the run is
in the store) figures come from `metric_chart`, cached by (root, run id, metric, ChartStyle,
Frame); without it they are built from the Report given (e.g. the Live
page's growing run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import streamlit as st
from logscope.app import _common as ui

from logscope.charts import DEFAULT_MAX_POINTS, metric_figure, panel_groups, zoom_range
from logscope.model import SEVERITIES

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from logscope.report import Report

#: panels per row
COLUMNS = 3
#: height of one panel (px)
PANEL_HEIGHT = 260
#: height of the zoomed chart of a finding (full width)
FOCUS_HEIGHT = 360
#: groups drawn open at first; the others start collapsed and are built only when opened
OPEN_GROUPS = 4
#: groups drawn open wherever they come (the run's headline curve)
ALWAYS_OPEN = ("reward",)


@dataclass(frozen=True)
class ChartStyle:
    """How every panel is drawn: smoothing (debiased EMA weight), points per curve, finding
    markers and incident spans (`marks`), a log y-axis where a metric spans two decades."""

    smoothing: float = 0.0
    max_points: int = DEFAULT_MAX_POINTS
    marks: bool = True
    log: bool = False


PLAIN = ChartStyle()


@dataclass(frozen=True)
class Frame:
    """What one panel shows of its metric: the step range it zooms to (None: every step), its
    title (None: the metric's name) and its height in px."""

    step_range: tuple[int, int] | None = None
    title: str | None = None
    height: int = PANEL_HEIGHT


GRID_PANEL = Frame()


def panel_figure(
    report: Report, metric: str, style: ChartStyle = PLAIN, frame: Frame = GRID_PANEL
) -> go.Figure:
    """One metric's panel (uncached) in `style`, framed by `frame` (a step range zooms the
    x-axis to exactly that range)."""
    return metric_figure(
        report.run,
        [metric],
        title=frame.title or metric,
        findings=report.findings if style.marks else (),
        incidents=report.incidents if style.marks else (),
        smoothing=style.smoothing,
        max_points=style.max_points,
        step_range=frame.step_range,
        x_range=frame.step_range,
        height=frame.height,
        log_y=style.log,
    )


@st.cache_data(show_spinner=False, max_entries=2048)
def metric_chart(
    root: str, run_id: str, metric: str, style: ChartStyle = PLAIN, frame: Frame = GRID_PANEL
) -> Any:
    """`panel_figure` of a stored run's metric as a figure dict, cached (a rerun only
    re-sends the JSON; a dict unpickles ten times faster than a Figure, which re-validates);
    None when the run or the metric is not there. `as_figure` makes it a Figure again."""
    report = ui.load_report(root, run_id)
    if report is None or not report.run.has_metric(metric):
        return None
    return panel_figure(report, metric, style, frame).to_dict()


def panel(
    report: Report, metric: str, style: ChartStyle, frame: Frame, root: str | None
) -> go.Figure | None:
    """The panel of `metric`: from the cache with `root` (the run stored under
    `report.run.id`), else built from `report`; None when the metric is not there."""
    if root is not None:
        spec = metric_chart(root, report.run.id, metric, style, frame)
        return as_figure(spec) if spec is not None else None
    return panel_figure(report, metric, style, frame) if report.run.has_metric(metric) else None


def as_figure(spec: dict[str, Any]) -> go.Figure:
    """A Figure of a figure dict this module built (not validated again: it was, when built)."""
    import plotly.graph_objects as go

    try:
        return go.Figure(spec, _validate=False)
    except TypeError:  # pragma: no cover - a plotly without the private switch
        return go.Figure(spec)


def metric_grid(
    report: Report,
    names: Sequence[str],
    *,
    root: str | None = None,
    style: ChartStyle = PLAIN,
    columns: int = COLUMNS,
    key: str = "grid",
) -> int:
    """Draw one panel per metric in `names`, `columns` per row; return how many were drawn.

    With `root` the figures come from the cache (`metric_chart`, the run being stored under
    `report.run.id`); without it they are built from `report` on every call."""
    drawn = 0
    for first in range(0, len(names), columns):
        row = names[first : first + columns]
        for col, name in zip(st.columns(columns), row, strict=False):
            fig = panel(report, name, style, GRID_PANEL, root)
            if fig is not None:
                col.plotly_chart(fig, key=f"{key}-{name}")
                drawn += 1
    return drawn


def _group_label(title: str, shown: int, total: int, flagged: int, worst: int) -> str:
    icon = ui.SEVERITY_ICON.get(SEVERITIES[worst]) if worst >= 0 else None
    noun = "metric" if total == 1 else "metrics"
    what = f"{total} {noun}" if shown == total else f"{shown} of {total} {noun}"
    if flagged:
        what += f" · {flagged} with findings"
    return " ".join(x for x in (icon, title, "·", what) if x)


def grouped_grids(
    report: Report,
    *,
    root: str | None = None,
    query: str = "",
    style: ChartStyle = PLAIN,
    open_groups: int = OPEN_GROUPS,
    key: str = "metrics",
) -> int:
    """Draw the run's metric groups as panel grids (see `charts.panel_groups` for the order
    and each group's default panels) and return the number of panels drawn.

    Each group is an expander; the first `open_groups` and those in ALWAYS_OPEN start open
    (all of them while `query` filters the names), the others collapsed, and a collapsed group builds no figure. A group
    with more metrics than its default panels offers "show all N metrics of this group"."""
    tag = f"{key}-{report.run.id[:16]}"
    qtag = f"-q:{query.strip()}" if query.strip() else ""
    drawn = 0
    for i, group in enumerate(panel_groups(report.run.metric_names, report.findings, query)):
        all_key = f"{tag}-all-{group.key}"
        show_all = bool(st.session_state.get(all_key)) or len(group.default) == len(group.names)
        label = _group_label(
            group.title,
            len(group.names if show_all else group.default),
            len(group.names),
            len(group.flagged) if style.marks else 0,
            group.worst if style.marks else -1,
        )
        box = st.expander(
            label,
            expanded=bool(qtag) or i < open_groups or group.key in ALWAYS_OPEN,
            key=f"{tag}-open-{group.key}{qtag}",
            on_change="rerun",
        )
        if not box.open:
            continue
        with box:
            if len(group.default) < len(group.names):
                show_all = st.toggle(
                    f"Show all {len(group.names)} metrics of this group", key=all_key
                )
            names = group.names if show_all else group.default
            drawn += metric_grid(report, names, root=root, style=style, key=f"{key}-{group.key}")
    return drawn


def focus_chart(
    report: Report,
    metric: str,
    start: int,
    end: int | None = None,
    *,
    root: str | None = None,
    style: ChartStyle = PLAIN,
    key: str = "focus",
) -> tuple[int, int] | None:
    """Draw `metric` zoomed on steps [start, end] (shaded) with context on both sides (see
    `charts.zoom_range`), full width; return the x-range drawn (None: no such metric)."""
    run = report.run
    if not run.has_metric(metric):
        return None
    steps = run.steps
    first, last = (int(steps[0]), int(steps[-1])) if len(steps) else (start, start)
    lo, hi = zoom_range(first, last, start, end)
    title = f"{metric} · steps {lo}–{hi}"
    fig = panel(report, metric, style, Frame((lo, hi), title, FOCUS_HEIGHT), root)
    if fig is None:
        return None
    # The finding's own window, lightly shaded under the curve.
    window = {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": start - 0.5,
        "x1": (end if end is not None and end >= start else start) + 0.5,
        "y0": 0,
        "y1": 1,
        "fillcolor": "#888",
        "opacity": 0.1,
        "line": {"width": 0},
        "layer": "below",
        "name": "focus window",
    }
    fig.update_layout(shapes=[*fig.layout.shapes, window])
    st.plotly_chart(fig, key=key)
    return lo, hi
