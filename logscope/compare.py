"""Compare runs: what config changed, how the key metrics moved, where the curves part.

`compare_runs([baseline, tuned, ...])` takes Runs or Reports; the first is the reference every
delta is measured against (like the seed's before/after table).

Key metrics: the median over the last 20% of each run's logged points (robust to a last-step
blip, and the part of a run tuning is judged on); for validation scores, the last logged value.

Divergence step (the method, for each run against the first one):
1. Take the key reward curve (`critic/score/mean`, else `critic/rewards/mean`) on the steps both
   runs logged, and the per-step difference d = run − reference.
2. Its noise σ is the robust sigma (1.4826·MAD) of d's step-to-step changes divided by √2: this
   measures the jitter of the two curves, not the slow drift we want to find.
3. d is averaged over a centred window of w steps (w = max(5, n/50)), whose noise is σ/√w. A step
   "differs" when |mean| > k·σ/√w (k = 3) with a consistent sign.
4. The runs diverge at the first step from which the difference holds persistently: for the
   next w steps without a break, at ≥ 90% of all shared steps after it, and over at least
   `min_persist` steps. So a one-off chance excursion cannot start it, and the step found is
   within about w/2 of where the curves actually part (the centred window sees ahead).
Runs that never satisfy this have no divergence step (None): they agree within noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from logscope.aliases import resolve, validation_metrics
from logscope.detectors._stats import robust_sigma
from logscope.model import Run, jsonable
from logscope.present import DASH, HTML_STYLE, fmt_value, md_code, md_escape
from logscope.present import html_escape as h
from logscope.report import Report

UNSET = "<unset>"
LAST_FRACTION = 0.2
#: how the key-metric table was made, said under its title
TABLE_NOTE = (
    "Median over the last 20% of each run; validation: last value. Δ and % against the first run."
)


def _validation_metric(run: Run) -> str | None:
    names = validation_metrics(run)
    return names[0] if names else None


@dataclass(frozen=True)
class KeyMetric:
    """A row of the table: a label, how to find the metric in a run, how to summarise it."""

    label: str
    find: Callable[[Run], str | None]
    how: str  # "tail-median" | "last"
    better: int  # +1 higher is better, -1 lower is better, 0 neither


def _concept(name: str) -> Callable[[Run], str | None]:
    return lambda run: resolve(run, name)


KEY_METRICS: tuple[KeyMetric, ...] = (
    KeyMetric("throughput (tokens/s)", _concept("throughput"), "tail-median", +1),
    KeyMetric("generation time (s)", _concept("time_gen"), "tail-median", -1),
    KeyMetric("response clip ratio", _concept("response_clip_ratio"), "tail-median", -1),
    KeyMetric("actor grad norm", _concept("actor_grad_norm"), "tail-median", 0),
    KeyMetric("critic vf_loss", _concept("vf_loss"), "tail-median", -1),
    KeyMetric("actor ppo_kl", _concept("ppo_kl"), "tail-median", 0),
    KeyMetric("reward (score mean)", _concept("score_mean"), "tail-median", +1),
    KeyMetric("validation score", _validation_metric, "last", +1),
)


def tail_median(values: np.ndarray, fraction: float = LAST_FRACTION) -> float | None:
    """Median of the finite values among the last `fraction` of the points (at least one)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return None
    k = max(1, math.ceil(fraction * v.size))
    tail = v[-k:]
    tail = tail[np.isfinite(tail)]
    return float(np.median(tail)) if tail.size else None


def last_finite(values: np.ndarray) -> float | None:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(v[-1]) if v.size else None


@dataclass
class MetricRow:
    """One key metric across runs: values, and deltas/% change against the first run."""

    label: str
    how: str
    better: int
    metrics: list[str | None]
    values: list[float | None]

    @property
    def deltas(self) -> list[float | None]:
        ref = self.values[0]
        return [None if ref is None or v is None else v - ref for v in self.values]

    @property
    def pct(self) -> list[float | None]:
        ref = self.values[0]
        return [
            None if ref is None or v is None or ref == 0 else (v - ref) / abs(ref) * 100.0
            for v in self.values
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "summary": self.how,
            "better": {1: "higher", -1: "lower", 0: None}[self.better],
            "metrics": self.metrics,
            "values": self.values,
            "deltas": self.deltas,
            "pct_change": self.pct,
        }


@dataclass
class ConfigDiffRow:
    key: str
    values: list[Any]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "values": self.values}


@dataclass
class Divergence:
    """Where `run_id` parts from the reference run on `metric` (step None: they agree)."""

    run_id: str
    metric: str | None
    step: int | None
    direction: str | None  # "higher" | "lower" than the reference after the step
    noise: float | None
    threshold: float | None
    window: int | None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fields, in order; `noise` is written as `noise_sigma`."""
        return {("noise_sigma" if k == "noise" else k): v for k, v in asdict(self).items()}

    def sentence(
        self, who: str, code: Callable[[Any], str] = str, text: Callable[[Any], str] = str
    ) -> str:
        """`who: <metric> is higher than the reference from step N on`, or why they do not part;
        `code` marks up the metric name and `text` escapes the reason, for a markup language."""
        if self.step is None:
            return f"{who}: no divergence ({text(self.reason)})"
        return (
            f"{who}: {code(self.metric)} is {self.direction} than the reference "
            f"from step {self.step} on"
        )


@dataclass
class Compare:
    """The comparison of runs[1:] against runs[0]."""

    run_ids: list[str]
    labels: list[str]
    config_diff: list[ConfigDiffRow] = field(default_factory=list)
    rows: list[MetricRow] = field(default_factory=list)
    divergence: list[Divergence] = field(default_factory=list)
    config_known: list[bool] = field(default_factory=list)

    @property
    def first_divergence(self) -> int | None:
        steps = [d.step for d in self.divergence if d.step is not None]
        return min(steps) if steps else None

    def to_dict(self) -> dict[str, Any]:
        return jsonable(
            {
                "schema": "logscope.compare/1",
                "runs": [
                    {"id": i, "label": lab, "config_known": k}
                    for i, lab, k in zip(self.run_ids, self.labels, self.config_known, strict=True)
                ],
                "config_diff": [r.to_dict() for r in self.config_diff],
                "key_metrics": [r.to_dict() for r in self.rows],
                "divergence": [d.to_dict() for d in self.divergence],
            }
        )

    def table_rows(self) -> list[dict[str, Any]]:
        """The key-metric table as plain rows (one per metric) for a dataframe widget."""
        out = []
        for row in self.rows:
            rec: dict[str, Any] = {"metric": row.label}
            for i, label in enumerate(self.labels):
                rec[label] = row.values[i]
                if i:
                    rec[f"Δ {label}"] = row.deltas[i]
                    rec[f"% {label}"] = row.pct[i]
            out.append(rec)
        return out

    def to_markdown(self) -> str:
        out = ["# logscope compare\n"]
        out.append("Runs (the first is the reference):\n")
        for i, (rid, label) in enumerate(zip(self.run_ids, self.labels, strict=True)):
            out.append(f"{i + 1}. {md_escape(label)} ({md_code(rid)})")
        out.append("\n## Key metrics\n")
        out.append(f"{TABLE_NOTE}\n")
        head = ["metric", *(md_escape(lab) for lab in self.labels)]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for row in self.rows:
            cells = [md_escape(row.label)]
            for i, v in enumerate(row.values):
                cells.append(_cell(v, row.deltas[i], row.pct[i], i))
            out.append("| " + " | ".join(cells) + " |")
        out.append("\n## Divergence\n")
        out += ["- " + d.sentence(md_escape(d.run_id), md_code, md_escape) for d in self.divergence]
        out.append("\n## Config diff\n")
        if not self.config_diff:
            out.append("No differences" + ("" if all(self.config_known) else " (config unknown)"))
        else:
            out.append("| key | " + " | ".join(md_escape(lab) for lab in self.labels) + " |")
            out.append("|" + "---|" * (len(self.labels) + 1))
            for r in self.config_diff:
                out.append(
                    f"| {md_code(r.key)} | " + " | ".join(md_code(_fmt(v)) for v in r.values) + " |"
                )
        return "\n".join(out).rstrip() + "\n"

    def to_html(self) -> str:
        """A standalone HTML page of the comparison (everything from a log escaped)."""
        parts = [
            "<!doctype html><html><head><meta charset='utf-8'><title>logscope compare</title>",
            f"<style>{HTML_STYLE}</style></head><body><h1>logscope compare</h1>",
            "<p>Runs (the first is the reference):</p><ol>",
        ]
        parts += [
            f"<li>{h(label)} ({_html_code(rid)})</li>"
            for rid, label in zip(self.run_ids, self.labels, strict=True)
        ]
        parts.append("</ol><h2>Key metrics</h2>")
        parts.append(
            f"<p>{TABLE_NOTE}</p><table><tr><th>metric</th>"
            + "".join(f"<th>{h(lab)}</th>" for lab in self.labels)
            + "</tr>"
        )
        for row in self.rows:
            cells = "".join(
                f"<td>{h(_cell(v, row.deltas[i], row.pct[i], i))}</td>"
                for i, v in enumerate(row.values)
            )
            parts.append(f"<tr><td>{h(row.label)}</td>{cells}</tr>")
        parts.append("</table><h2>Divergence</h2><ul>")
        parts += [f"<li>{d.sentence(h(d.run_id), _html_code, h)}</li>" for d in self.divergence]
        parts.append("</ul><h2>Config diff</h2>")
        if not self.config_diff:
            known = "" if all(self.config_known) else " (config unknown)"
            parts.append(f"<p>No differences{known}</p>")
        else:
            parts.append(
                "<table><tr><th>key</th>"
                + "".join(f"<th>{h(lab)}</th>" for lab in self.labels)
                + "</tr>"
            )
            for r in self.config_diff:
                cells = "".join(f"<td>{_html_code(_fmt(v))}</td>" for v in r.values)
                parts.append(f"<tr><td>{_html_code(r.key)}</td>{cells}</tr>")
            parts.append("</table>")
        parts.append("</body></html>")
        return "\n".join(parts)


def _fmt(value: Any) -> str:
    """A value in a comparison: 4 significant digits, `–` when missing."""
    return fmt_value(value, digits=4, missing=DASH)


def _html_code(text: Any) -> str:
    return f"<code>{h(text)}</code>"


def _cell(value: float | None, delta: float | None, pct: float | None, i: int) -> str:
    if value is None:
        return DASH
    text = _fmt(value)
    if i and delta is not None:
        text += f" ({delta:+.3g}" + (f", {pct:+.1f}%" if pct is not None else "") + ")"
    return text


# ---- config diff ------------------------------------------------------------------------
def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys → leaf values (lists stay values)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted))
        else:
            out[dotted] = value
    return out


def config_diff(configs: Sequence[dict[str, Any]]) -> list[ConfigDiffRow]:
    """Keys whose value is not the same in every config (`<unset>` where a config lacks it)."""
    flats = [flatten(c) for c in configs]
    keys = sorted(set().union(*flats)) if flats else []
    rows = []
    for key in keys:
        values = [f.get(key, UNSET) for f in flats]
        if any(_norm(v) != _norm(values[0]) for v in values[1:]):
            rows.append(ConfigDiffRow(key, values))
    return rows


def _norm(value: Any) -> Any:
    # 1 and 1.0 (or "1e-6" printed as 1e-06) are the same setting.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return repr(value)
    return float(value)


def segment_diffs(run: Run) -> list[tuple[int, int, list[ConfigDiffRow]]]:
    """For a restarted run: (from step, to step, diff) between consecutive config segments."""
    segs = run.config_segments
    return [
        (a.first_step, b.first_step, config_diff([a.config, b.config])) for a, b in pairwise(segs)
    ]


# ---- divergence -------------------------------------------------------------------------
def divergence_step(
    ref_steps: np.ndarray,
    ref_values: np.ndarray,
    steps: np.ndarray,
    values: np.ndarray,
    *,
    k: float = 3.0,
    persist: float = 0.9,
    min_persist: int = 5,
    window: int | None = None,
) -> tuple[int | None, str | None, float | None, float | None, int | None, str]:
    """(step, direction, sigma, threshold, window, reason); see the module docstring."""
    common, ia, ib = np.intersect1d(ref_steps, steps, return_indices=True)
    a, b = np.asarray(ref_values)[ia], np.asarray(values)[ib]
    ok = np.isfinite(a) & np.isfinite(b)
    common, d = common[ok], (b - a)[ok]
    n = d.size
    if n < 2 * min_persist:
        return None, None, None, None, None, f"only {n} shared steps"
    w = window or max(5, n // 50)
    w = min(w, max(1, n // 4))
    sigma = robust_sigma(d)  # MAD of step-to-step changes / √2
    if sigma == 0.0:
        # Identical jitter (e.g. quantised or constant curves): any change is beyond noise.
        sigma = float(np.finfo(np.float64).eps) * max(1.0, float(np.max(np.abs(d))))
    kernel = np.ones(w) / w
    mean = np.convolve(d, kernel, mode="same")
    # Edges average fewer points; rescale so the mean is a true mean there.
    counts = np.convolve(np.ones(n), kernel, mode="same")
    mean = mean / counts
    thr = k * sigma / np.sqrt(counts * w)
    pos = mean > thr
    neg = mean < -thr
    best: tuple[int, str] | None = None
    for exceed, direction in ((pos, "higher"), (neg, "lower")):
        suffix = np.cumsum(exceed[::-1])[::-1]
        remaining = n - np.arange(n)
        # Length of the unbroken streak of exceedances starting at each step.
        false_at = np.where(exceed, n, np.arange(n))
        streak = np.minimum.accumulate(false_at[::-1])[::-1] - np.arange(n)
        need = np.minimum(max(w, min_persist), remaining)
        hold = (streak >= need) & (suffix >= persist * remaining) & (remaining >= min_persist)
        if hold.any():
            i = int(np.argmax(hold))
            if best is None or i < best[0]:
                best = (i, direction)
    threshold = float(k * sigma / math.sqrt(w))
    if best is None:
        return None, None, sigma, threshold, w, "within noise on every shared step"
    return int(common[best[0]]), best[1], sigma, threshold, w, ""


def _reward_metric(runs: Sequence[Run]) -> str | None:
    for concept in ("score_mean", "reward_mean"):
        names = [resolve(r, concept) for r in runs]
        if names[0] is not None and all(n == names[0] for n in names):
            return names[0]
    return None


# ---- entry point ------------------------------------------------------------------------
def _label(run: Run, taken: set[str]) -> str:
    from pathlib import PurePath

    base = PurePath(run.source.path).stem if run.source.path and "<" not in run.source.path else ""
    label = base or run.meta.get("experiment") or run.id[:12]
    label = str(label)
    candidate, n = label, 2
    while candidate in taken:
        candidate, n = f"{label}#{n}", n + 1
    taken.add(candidate)
    return candidate


def compare_runs(items: Sequence[Run | Report], labels: Sequence[str] | None = None) -> Compare:
    """Compare runs (or the runs of reports) against the first one."""
    runs = [it.run if isinstance(it, Report) else it for it in items]
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    if labels is None:
        taken: set[str] = set()
        labels = [_label(r, taken) for r in runs]
    cmp = Compare(
        run_ids=[r.id for r in runs],
        labels=list(labels),
        config_known=[bool(r.config_segments) for r in runs],
    )
    known = [r.config() for r in runs]
    if all(cmp.config_known):
        cmp.config_diff = config_diff(known)
    for km in KEY_METRICS:
        names = [km.find(r) for r in runs]
        if all(n is None for n in names):
            continue
        values = []
        for run, name in zip(runs, names, strict=True):
            if name is None:
                values.append(None)
                continue
            _, v = run.series(name)
            values.append(tail_median(v) if km.how == "tail-median" else last_finite(v))
        cmp.rows.append(MetricRow(km.label, km.how, km.better, names, values))
    metric = _reward_metric(runs)
    ref = runs[0]
    for run in runs[1:]:
        if metric is None:
            cmp.divergence.append(
                Divergence(run.id, None, None, None, None, None, None, "no shared reward metric")
            )
            continue
        rs, rv = ref.series(metric)
        s, v = run.series(metric)
        step, direction, sigma, thr, w, reason = divergence_step(rs, rv, s, v)
        cmp.divergence.append(Divergence(run.id, metric, step, direction, sigma, thr, w, reason))
    return cmp
