"""Plotly figures for the dashboard: metric groups, finding markers, incident spans.

Pure functions of a Run (and its Report): no Streamlit here, so the figures are testable and
usable from a notebook. Two numeric helpers do the heavy lifting for long runs:

- `ema`: TensorBoard's debiased exponential moving average (bias-corrected like Adam, so the
  first points are not dragged towards zero).
- `downsample`: min/max per bucket (a vectorised numpy reshape). Each bucket keeps its lowest
  and highest point, so a one-step spike survives any reduction; the first non-finite point of
  a bucket and any step a finding points at are kept too.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from logscope.aliases import ALIASES, VALIDATION_PREFIXES

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from logscope.model import Finding, Incident, Run
    from logscope.report import Report

DEFAULT_MAX_POINTS = 2000

SEVERITY_COLOR = {
    "critical": "#8b0000",
    "error": "#c0392b",
    "warning": "#d68910",
    "info": "#2471a3",
}
RUN_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class MetricGroup:
    """A panel of related metrics as a verl user reads them.

    `concepts` are alias-table concepts (every verl spelling of them belongs here); `prefixes`
    catch the rest of a family (e.g. every `timing_s/...`); `exclude` wins over both.
    """

    key: str
    title: str
    concepts: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def names(self) -> set[str]:
        return {name for c in self.concepts for name in ALIASES.get(c, ())}

    def primary_names(self) -> set[str]:
        """Names of the metrics drawn by default (the rest start hidden in the legend)."""
        return {name for c in PRIMARY.get(self.key, ()) for name in ALIASES.get(c, ())}

    def matches(self, metric: str) -> bool:
        if self.exclude and metric.startswith(self.exclude):
            return False
        return metric in self.names() or (bool(self.prefixes) and metric.startswith(self.prefixes))


# Concepts each group draws by default; its other metrics start hidden (click the legend).
PRIMARY: dict[str, tuple[str, ...]] = {
    "reward": ("score_mean", "reward_mean"),
    "kl": ("kl_ref", "ppo_kl", "pg_clipfrac", "response_clip_ratio"),
    "lengths": ("response_length_mean", "response_length_max"),
    "timing": ("time_gen", "time_step"),
    "memory": ("gpu_mem_reserved", "gpu_mem_allocated"),
    "throughput": ("throughput",),
    "losses": ("pg_loss", "actor_grad_norm", "vf_loss"),
}

# Order matters: a metric goes to the first group that claims it.
GROUPS: tuple[MetricGroup, ...] = (
    MetricGroup(
        "reward",
        "Reward / score",
        concepts=("score_mean", "reward_mean", "score_max", "score_min"),
        prefixes=("critic/score/", "critic/rewards/", "critic/advantages/", "critic/returns/"),
    ),
    MetricGroup(
        "kl",
        "KL & clipping",
        concepts=(
            "kl_ref",
            "kl_loss",
            "kl_coef",
            "ppo_kl",
            "critic_kl",
            "pg_clipfrac",
            "pg_clipfrac_lower",
            "response_clip_ratio",
            "prompt_clip_ratio",
        ),
        prefixes=(
            "actor/kl",
            "actor/ppo_kl",
            "actor/pg_clipfrac",
            "critic/kl",
            "critic/vf_clipfrac",
        ),
    ),
    MetricGroup("entropy", "Entropy", concepts=("entropy",), prefixes=("actor/entropy",)),
    MetricGroup(
        "lengths",
        "Lengths",
        concepts=("response_length_mean", "response_length_max"),
        prefixes=("response_length/", "prompt_length/", "response/aborted"),
    ),
    MetricGroup(
        "timing",
        "Timing",
        concepts=("time_gen", "time_step"),
        prefixes=("timing_s/", "timing/", "timing_per_token_ms/"),
    ),
    MetricGroup(
        "memory",
        "Memory",
        concepts=("gpu_mem_reserved", "gpu_mem_allocated", "cpu_mem_used"),
        prefixes=("perf/max_memory", "actor/perf/", "perf/cpu_memory"),
    ),
    MetricGroup(
        "throughput",
        "Throughput",
        concepts=("throughput",),
        prefixes=("perf/throughput", "perf/total_num_tokens", "perf/time_per_step", "perf/mfu"),
    ),
    MetricGroup("validation", "Validation", prefixes=(*VALIDATION_PREFIXES, "val/")),
    MetricGroup(
        "losses",
        "Losses & gradients",
        concepts=(
            "pg_loss",
            "actor_grad_norm",
            "critic_grad_norm",
            "vf_loss",
            "vf_explained_var",
            "lr",
        ),
        prefixes=("actor/", "critic/"),
    ),
)
OTHER = MetricGroup("other", "Other")


def group_of(metric: str) -> MetricGroup:
    """The first group that claims `metric` (`OTHER` when none does)."""
    for group in GROUPS:
        if group.matches(metric):
            return group
    return OTHER


def metric_groups(metrics: Iterable[str]) -> dict[str, list[str]]:
    """{group key: sorted metric names} in GROUPS order, empty groups left out."""
    out: dict[str, list[str]] = {g.key: [] for g in (*GROUPS, OTHER)}
    for name in metrics:
        out[group_of(name).key].append(name)
    return {k: sorted(v) for k, v in out.items() if v}


def group_by_key(key: str) -> MetricGroup:
    for group in (*GROUPS, OTHER):
        if group.key == key:
            return group
    raise KeyError(key)


def visible_by_default(
    key: str, names: Sequence[str], findings: Sequence[Finding] = ()
) -> set[str]:
    """The metrics of a group drawn at first: its primary ones plus any a finding points at
    (all of them when the group has no primary metric in this run)."""
    primary = set(headline_names(key, names))
    flagged = {f.metric for f in findings if f.metric in names}
    return (primary | flagged) if primary else set(names)


#: at most this many headline panels of a group without a named headline (e.g. validation)
MAX_HEADLINE = 6
_VAL_WORDS = ("score", "reward", "acc", "pass")


def headline_names(key: str, names: Sequence[str]) -> list[str]:
    """The metrics a group leads with, in headline order: its primary concepts (alias order);
    for validation the `val-core/` scores (else score/reward/accuracy names, never `val-aux/`);
    [] when the group names none in this run."""
    present = set(names)
    if key == "validation":
        core = [n for n in sorted(present) if n.startswith("val-core/")]
        if not core:
            core = [
                n
                for n in sorted(present)
                if not n.startswith("val-aux/") and any(w in n.lower() for w in _VAL_WORDS)
            ]
        return core[:MAX_HEADLINE]
    out: list[str] = []
    for concept in PRIMARY.get(key, ()):
        out += [n for n in ALIASES.get(concept, ()) if n in present and n not in out]
    return out


@dataclass(frozen=True)
class PanelGroup:
    """A group as small multiples: `names` in panel order (metrics with findings, headline
    metrics, the rest), `default` the panels drawn before "show all", `flagged` the metrics
    findings point at."""

    key: str
    title: str
    names: tuple[str, ...]
    default: tuple[str, ...]
    flagged: frozenset[str]
    worst: int  # SEVERITY_RANK of the group's worst finding, -1 without one


def matches_query(name: str, query: str) -> bool:
    """Whether every whitespace-separated word of `query` is in `name` (case-insensitive)."""
    low = name.lower()
    return all(word in low for word in query.lower().split())


def panel_groups(
    metric_names: Iterable[str], findings: Sequence[Finding] = (), query: str = ""
) -> list[PanelGroup]:
    """The run's metric groups as panel grids: groups holding findings first (worst first),
    then in GROUPS order; inside a group metrics with findings first, then headline metrics,
    then the rest by name. With a `query`, only matching metrics, all of them by default."""
    from logscope.model import SEVERITY_RANK

    worst: dict[str, int] = {}
    for f in findings:
        if f.metric:
            worst[f.metric] = max(worst.get(f.metric, -1), SEVERITY_RANK.get(f.severity, 0))
    out = []
    for key, names in metric_groups(metric_names).items():
        if query.strip():
            names = [n for n in names if matches_query(n, query)]
            if not names:
                continue
        head = headline_names(key, names)
        flagged = sorted((n for n in names if n in worst), key=lambda n: (-worst[n], n))
        rest = [n for n in names if n not in worst and n not in head]
        order = (*flagged, *(n for n in head if n not in worst), *rest)
        if query.strip():
            default = order
        else:
            chosen = set(flagged) | set(head)
            default = tuple(n for n in order if n in chosen) or order[:MAX_HEADLINE]
        out.append(
            PanelGroup(
                key,
                group_title(key),
                order,
                default,
                frozenset(flagged),
                max((worst[n] for n in flagged), default=-1),
            )
        )
    order_of = {g.key: i for i, g in enumerate((*GROUPS, OTHER))}
    return sorted(out, key=lambda g: (-g.worst, order_of[g.key]))


def group_title(key: str) -> str:
    for group in (*GROUPS, OTHER):
        if group.key == key:
            return group.title
    return key


# ---- numerics ---------------------------------------------------------------------------
def ema(values: np.ndarray, weight: float) -> np.ndarray:
    """Debiased exponential moving average (TensorBoard's smoothing), vectorised.

    s_k = w·s_{k-1} + (1-w)·x_k with s_0 = 0, divided by (1 - w^k) over the finite values seen
    so far. Non-finite values are left out of the average and stay as they are (a NaN remains
    visible as a gap). weight 0 returns the values unchanged.
    """
    x = np.asarray(values, dtype=np.float64)
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    if weight == 0.0 or x.size == 0:
        return x.copy()
    from scipy.signal import lfilter

    finite = np.isfinite(x)
    out = x.copy()
    xf = x[finite]
    if xf.size == 0:
        return out
    raw = lfilter([1.0 - weight], [1.0, -weight], xf)
    k = np.arange(1, xf.size + 1, dtype=np.float64)
    out[finite] = raw / (1.0 - weight**k)
    return out


def downsample_indices(
    values: np.ndarray,
    max_points: int = DEFAULT_MAX_POINTS,
    keep: np.ndarray | Sequence[int] | None = None,
) -> np.ndarray:
    """Sorted indices of a min/max-per-bucket reduction of `values` to about `max_points`.

    The series is cut into max_points/2 equal buckets (a padded reshape, no Python loop); each
    bucket keeps the index of its smallest and largest finite value and of its first
    non-finite value. The first and last points and the indices in `keep` are always kept.
    """
    y = np.asarray(values, dtype=np.float64)
    n = y.size
    extra = np.asarray(keep if keep is not None else [], dtype=np.int64)
    extra = extra[(extra >= 0) & (extra < n)]
    if n <= max_points:
        return np.arange(n)
    buckets = max(1, max_points // 2)
    size = -(-n // buckets)
    pad = buckets * size - n
    finite = np.isfinite(y)
    lo = np.where(finite, y, np.inf)
    hi = np.where(finite, y, -np.inf)
    if pad:
        lo = np.concatenate([lo, np.full(pad, np.inf)])
        hi = np.concatenate([hi, np.full(pad, -np.inf)])
        nonfin = np.concatenate([~finite, np.zeros(pad, dtype=bool)])
    else:
        nonfin = ~finite
    base = np.arange(buckets) * size
    idx_min = base + lo.reshape(buckets, size).argmin(axis=1)
    idx_max = base + hi.reshape(buckets, size).argmax(axis=1)
    nf = nonfin.reshape(buckets, size)
    has_nf = nf.any(axis=1)
    idx_nf = (base + nf.argmax(axis=1))[has_nf]
    chosen = np.concatenate([idx_min, idx_max, idx_nf, extra, [0, n - 1]])
    chosen = chosen[chosen < n]
    return np.unique(chosen)


def downsample(
    steps: np.ndarray,
    values: np.ndarray,
    max_points: int = DEFAULT_MAX_POINTS,
    keep_steps: Sequence[int] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) reduced by `downsample_indices`; `keep_steps` are steps to keep."""
    steps = np.asarray(steps)
    keep = None
    if keep_steps is not None and len(keep_steps):
        wanted = np.asarray(keep_steps, dtype=steps.dtype if steps.size else np.int64)
        pos = np.searchsorted(steps, wanted)
        inside = pos < steps.size
        pos, wanted = pos[inside], wanted[inside]
        keep = pos[steps[pos] == wanted]
    idx = downsample_indices(values, max_points, keep)
    return steps[idx], np.asarray(values)[idx]


def plain(text: object) -> str:
    """Text for a plotly label: plotly reads a small HTML subset (<a href>, <b>, …) in every
    label, so the characters that start markup are written as entities (shown as typed)."""
    return html.escape(str(text), quote=False)


def zoom_range(
    first: int, last: int, start: int, end: int | None = None, min_context: int = 25
) -> tuple[int, int]:
    """The steps a "show on chart" link draws for a finding at [start, end] in a run of steps
    first..last: the window plus context on both sides, context = max(`min_context`, half the
    window, 5% of the run)."""
    end = start if end is None or end < start else end
    context = max(min_context, (end - start) // 2, int(0.05 * max(last - first, 0)))
    return start - context, end + context


# ---- number formats -----------------------------------------------------------------------
def value_format(values: np.ndarray | Sequence[float]) -> str:
    """The d3 format (plotly `hoverformat`/`tickformat`) for a series, from its magnitude:
    `.3~e` when its typical |value| is under 1e-3 (1.5e-6, not 0.000002), `,.0f` from 1,000
    on (1,168), `.4~g` between (0.0123, 12.35); the same rule as `present.fmt_number`."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    v = v[np.isfinite(v) & (v > 0)]
    if v.size == 0:
        return ".4~g"
    typical = float(np.median(v))
    if typical < 1e-3 or float(v.max()) >= 1e15:
        return ".3~e"
    if typical >= 1000:
        return ",.0f"
    return ".4~g"


def spans_decades(values: np.ndarray | Sequence[float], decades: float = 2.0) -> bool:
    """Whether a log y-axis shows every point and helps: all finite values > 0 and the
    largest at least 10^`decades` times the smallest."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return bool(v.size) and float(v.min()) > 0 and float(v.max()) >= 10**decades * float(v.min())


# ---- figures ----------------------------------------------------------------------------
def _value_at(steps: np.ndarray, values: np.ndarray, step: int) -> float | None:
    if steps.size == 0:
        return None
    pos = int(np.clip(np.searchsorted(steps, step), 0, steps.size - 1))
    if pos > 0 and abs(steps[pos - 1] - step) < abs(steps[pos] - step):
        pos -= 1
    v = float(values[pos])
    return v if np.isfinite(v) else None


def _layout_dict(title: str, height: int) -> dict[str, Any]:
    return {
        "title": {"text": plain(title), "x": 0.0, "xanchor": "left"},
        "height": height,
        "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.2},
        "xaxis": {"title": {"text": "step"}},
    }


def _layout(fig: go.Figure, title: str, height: int) -> None:
    fig.update_layout(_layout_dict(title, height))


def _spans(
    fig: go.Figure,
    incidents: Sequence[Incident],
    step_range: tuple[int, int] | None,
    run_span: float | None = None,
) -> None:
    """Incident spans as layout shapes (see `_span_shapes`)."""
    shapes = _span_shapes(incidents, step_range, run_span)
    if shapes:
        fig.update_layout(shapes=[*fig.layout.shapes, *shapes])


def _span_shapes(
    incidents: Sequence[Incident],
    step_range: tuple[int, int] | None,
    run_span: float | None = None,
) -> list[dict[str, Any]]:
    """Incident spans as shape dicts: shaded full height when short, else a ribbon on top.

    An incident that covers most of the run (e.g. a slow drift found from step 20 on) would
    wash the whole chart; it is drawn as a coloured ribbon along the top edge instead.
    """
    shapes = []
    for inc in incidents:
        if inc.step is None:
            continue
        end = inc.end_step if inc.end_step is not None else inc.step
        x0, x1 = inc.step - 0.5, end + 0.5
        if step_range and (x1 < step_range[0] or x0 > step_range[1]):
            continue
        long = run_span is not None and (x1 - x0) > 0.15 * max(run_span, 1.0)
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": x0,
                "x1": x1,
                "y0": 0.97 if long else 0,
                "y1": 1,
                "fillcolor": SEVERITY_COLOR.get(inc.severity, "#888"),
                "opacity": 0.5 if long else 0.12,
                "line": {"width": 0},
                "layer": "below",
                "name": f"incident {inc.id}",
            }
        )
    return shapes


def metric_figure(
    run: Run,
    metrics: Sequence[str],
    *,
    title: str | None = None,
    findings: Sequence[Finding] = (),
    incidents: Sequence[Incident] = (),
    smoothing: float = 0.0,
    max_points: int = DEFAULT_MAX_POINTS,
    step_range: tuple[int, int] | None = None,
    height: int = 320,
    visible: Iterable[str] | None = None,
    x_range: tuple[float, float] | None = None,
    log_y: bool = False,
) -> go.Figure:
    """One panel: `metrics` of `run` with finding markers, changepoint lines, incident spans.

    A finding on one of these metrics gets a marker at its step (on the raw value) and a
    dashed vertical line there (the changepoint the detector located); the steps findings
    point at survive downsampling. With `smoothing` > 0 the smoothed curve is drawn over a
    faint raw one, like TensorBoard. Hover and tick labels are formatted from the values'
    magnitude (`value_format`); `log_y` draws a log y-axis when the values span two decades
    (`spans_decades`); `x_range` fixes the x-axis (a zoom). One metric: no legend.
    """
    import plotly.graph_objects as go

    traces: list[go.Scatter] = []
    wanted = set(metrics)
    mine = [
        f
        for f in findings
        if f.metric in wanted
        and f.step is not None
        and (step_range is None or step_range[0] <= f.step <= step_range[1])
    ]
    keep_steps = sorted({int(s) for f in mine for s in (f.step, f.end_step) if s is not None})
    shown = set(metrics) if visible is None else set(visible)
    line_steps: dict[int, str] = {}
    lo_step: int | None = None
    hi_step = 0
    drawn: list[np.ndarray] = []
    for i, name in enumerate(metrics):
        steps, values = run.series(name)
        if step_range is not None and steps.size:
            lo, hi = np.searchsorted(steps, [step_range[0], step_range[1] + 1])
            steps, values = steps[lo:hi], values[lo:hi]
        if steps.size == 0:
            continue
        if name in shown:
            drawn.append(values)
        lo_step = int(steps[0]) if lo_step is None else min(lo_step, int(steps[0]))
        hi_step = max(hi_step, int(steps[-1]))
        color = RUN_COLORS[i % len(RUN_COLORS)]
        vis: bool | str = True if name in shown else "legendonly"
        ds_steps, ds_values = downsample(steps, values, max_points, keep_steps)
        if smoothing > 0:
            traces.append(
                go.Scatter(
                    x=ds_steps,
                    y=ds_values,
                    mode="lines",
                    name=f"{plain(name)} (raw)",
                    line={"color": color, "width": 1},
                    opacity=0.3,
                    showlegend=False,
                    hoverinfo="skip",
                    visible=vis,
                )
            )
            # the smoothed curve is the line; the raw values stay as a faint trace behind it
            main_x, main_y = downsample(steps, ema(values, smoothing), max_points, keep_steps)
            line: dict[str, object] = {"color": color}
        else:
            main_x, main_y, line = ds_steps, ds_values, {"color": color, "width": 1.5}
        traces.append(
            go.Scatter(
                x=main_x,
                y=main_y,
                mode="lines",
                name=plain(name),
                line=line,
                visible=vis,
            )
        )
        marks = [f for f in mine if f.metric == name]
        if marks:
            xs, ys, texts, colors = [], [], [], []
            for f in marks:
                y = _value_at(steps, values, int(f.step))  # type: ignore[arg-type]
                xs.append(f.step)
                ys.append(y if y is not None else np.nanmedian(values) if values.size else 0.0)
                texts.append(plain(f"{f.code} {f.name}: {f.title}"))
                colors.append(SEVERITY_COLOR.get(f.severity, "#888"))
                line_steps[int(f.step)] = colors[-1]  # type: ignore[arg-type]
            traces.append(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="markers",
                    name="findings",
                    marker={"symbol": "x", "size": 12, "color": colors, "line": {"width": 2}},
                    text=texts,
                    hovertemplate="%{text}<br>step %{x}<extra></extra>",
                    showlegend=False,
                )
            )
    shapes = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": s,
            "x1": s,
            "y0": 0,
            "y1": 1,
            "line": {"color": c, "dash": "dash", "width": 1},
            "name": f"changepoint {s}",
        }
        for s, c in sorted(line_steps.items())
    ]
    span = float(hi_step - lo_step) if lo_step is not None else None
    shapes += _span_shapes(incidents, step_range, span)
    layout = _layout_dict(title or ", ".join(metrics), height)
    if shapes:
        layout["shapes"] = shapes
    every = np.concatenate(drawn) if drawn else np.array([])
    _axis_formats(layout, every, log=log_y and spans_decades(every))
    if x_range is not None:
        layout["xaxis"].update(range=[x_range[0], x_range[1]], autorange=False)
    if len(metrics) == 1:
        layout["showlegend"] = False
        layout["title"]["font"] = {"size": 13}
    return go.Figure(data=traces, layout=layout)


def _axis_formats(layout: dict[str, Any], values: np.ndarray, log: bool = False) -> None:
    """Hover and tick formats of a layout dict from the values' magnitude (`value_format`)."""
    fmt = value_format(values)
    yaxis = layout.setdefault("yaxis", {})
    yaxis["hoverformat"] = fmt
    if log:
        yaxis.update(type="log", exponentformat="power")
    else:
        yaxis["tickformat"] = fmt
    layout.setdefault("xaxis", {}).update(hoverformat=",d", tickformat=",d")


def _format_y(fig: go.Figure, values: np.ndarray, log: bool = False) -> None:
    layout: dict[str, Any] = {}
    _axis_formats(layout, values, log)
    fig.update_layout(layout)


def group_figures(
    run: Run,
    report: Report | None = None,
    *,
    groups: Sequence[str] | None = None,
    smoothing: float = 0.0,
    max_points: int = DEFAULT_MAX_POINTS,
    step_range: tuple[int, int] | None = None,
) -> dict[str, go.Figure]:
    """{group key: figure} for every metric group the run has (or those in `groups`)."""
    found = metric_groups(run.metric_names)
    findings = report.findings if report is not None else ()
    incidents = report.incidents if report is not None else ()
    out = {}
    for key, names in found.items():
        if groups is not None and key not in groups:
            continue
        out[key] = metric_figure(
            run,
            names,
            title=group_title(key),
            findings=findings,
            incidents=incidents,
            smoothing=smoothing,
            max_points=max_points,
            step_range=step_range,
            visible=visible_by_default(key, names, findings),
        )
    return out


def overlay_figure(
    runs: Sequence[Run],
    metric: str,
    *,
    labels: Sequence[str] | None = None,
    smoothing: float = 0.0,
    max_points: int = DEFAULT_MAX_POINTS,
    divergence_step: int | None = None,
    height: int = 320,
) -> go.Figure:
    """One metric of several runs on one chart (Compare), with the divergence step marked."""
    import plotly.graph_objects as go

    fig = go.Figure()
    drawn: list[np.ndarray] = []
    for i, run in enumerate(runs):
        steps, values = run.series(metric)
        if steps.size == 0:
            continue
        drawn.append(values)
        if smoothing > 0:
            values = ema(values, smoothing)
        ds_steps, ds_values = downsample(steps, values, max_points)
        fig.add_trace(
            go.Scatter(
                x=ds_steps,
                y=ds_values,
                mode="lines",
                name=plain(labels[i] if labels else run.id),
                line={"color": RUN_COLORS[i % len(RUN_COLORS)], "width": 1.5},
            )
        )
    if divergence_step is not None:
        fig.add_vline(
            x=divergence_step,
            line={"color": "#555", "dash": "dot"},
            annotation_text=f"diverge @ {divergence_step}",
        )
    _layout(fig, metric, height)
    _format_y(fig, np.concatenate(drawn) if drawn else np.array([]))
    return fig


def figure_points(fig: go.Figure) -> int:
    """Total points drawn (for tests and the bench)."""
    return sum(len(t.x) if t.x is not None else 0 for t in fig.data)


def marker_steps(fig: go.Figure) -> list[Any]:
    """Steps of the finding markers on a figure."""
    return [x for t in fig.data if t.name == "findings" for x in t.x]


def incident_timeline(report: Report, height: int | None = None) -> go.Figure:
    """Findings as bars on a step axis (one row per finding name), incidents shaded behind.
    Config findings are left out: they are about the launch, not a moment of training."""
    import plotly.graph_objects as go

    fig = go.Figure()
    located = [f for f in report.findings if f.step is not None and not f.is_config]
    names = sorted(
        {f.name for f in located}, key=lambda n: min(f.step for f in located if f.name == n)
    )  # type: ignore[type-var,return-value]
    for sev in ("info", "warning", "error", "critical"):
        these = [f for f in located if f.severity == sev]
        if not these:
            continue
        starts = [int(f.step) for f in these]  # type: ignore[arg-type]
        ends = [int(f.end_step if f.end_step is not None else f.step) for f in these]  # type: ignore[arg-type]
        fig.add_trace(
            go.Bar(
                base=[s - 0.5 for s in starts],
                x=[max(1.0, e - s + 1.0) for s, e in zip(starts, ends, strict=True)],
                y=[f.name for f in these],
                orientation="h",
                name=sev,
                marker={"color": SEVERITY_COLOR[sev]},
                text=[plain(f"{f.code} {f.metric or ''}") for f in these],
                hovertemplate="%{y}: step %{base:.0f}, %{text}<extra></extra>",
            )
        )
    last = report.run.steps[-1] if report.run.n_steps else None
    first = report.run.steps[0] if report.run.n_steps else None
    timed = [
        i for i in report.incidents if not all(report.findings[k].is_config for k in i.findings)
    ]
    _spans(fig, timed, None, float(last - first) if last is not None else None)
    _layout(fig, "Findings on the step axis (incidents shaded)", height or 80 + 28 * len(names))
    fig.update_layout(hovermode="closest", barmode="overlay", showlegend=True)
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1])
    if last is not None:
        fig.update_xaxes(range=[min([*(f.step for f in located), 0]) - 1, int(last) + 1])
    return fig
