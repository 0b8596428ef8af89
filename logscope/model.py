"""Core objects: Run (what was read), Finding/Advice (what was found), Incident, HealthRow.

Readers build `Run`s; detectors turn a `Run` into `Finding`s; `logscope.report.Report` is what
every renderer shows. See DESIGN.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

Severity = Literal["info", "warning", "error", "critical"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "error", "critical")
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}
#: the code prefix of the config-lint diagnoses (detectors/config_*.py)
CONFIG_CODE_PREFIX = "LS5"


def severity_at_least(severity: str, threshold: str) -> bool:
    """True when `severity` ranks at or above `threshold`."""
    return SEVERITY_RANK[severity] >= SEVERITY_RANK[threshold]


@dataclass(frozen=True)
class Source:
    """Where a run came from: `kind` (verl-console, verl-jsonl, wandb-offline, …) and path/URI."""

    kind: str
    path: str


@dataclass
class Event:
    """A log line that matters (traceback, OOM, warning, checkpoint load, …)."""

    line_no: int
    step_hint: int | None
    kind: str
    text: str


@dataclass
class ConfigSegment:
    """A resolved verl config in force from `first_step` on (a restart starts a new segment)."""

    first_step: int
    config: dict[str, Any]
    line_no: int | None = None


@dataclass
class ParseStats:
    """What the reader saw: lines read, step lines, skipped lines (with a few examples)."""

    lines_read: int = 0
    step_lines: int = 0
    skipped_lines: int = 0
    skipped_examples: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skip_reasons: dict[str, int] = field(default_factory=dict)  # why lines were skipped

    MAX_EXAMPLES = 5

    def skip(self, line_no: int, text: str, reason: str | None = None) -> None:
        """Count a skipped line (and why) and keep the first few as examples."""
        self.skipped_lines += 1
        if reason is not None:
            self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1
        if len(self.skipped_examples) < self.MAX_EXAMPLES:
            self.skipped_examples.append((line_no, text[:200]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines_read": self.lines_read,
            "step_lines": self.step_lines,
            "skipped_lines": self.skipped_lines,
            "skipped_examples": [{"line": n, "text": t} for n, t in self.skipped_examples],
            "skip_reasons": dict(self.skip_reasons),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParseStats:
        """The inverse of `to_dict` (`skip_reasons` may be absent: older entries lack it)."""
        return cls(
            lines_read=data["lines_read"],
            step_lines=data["step_lines"],
            skipped_lines=data["skipped_lines"],
            skipped_examples=[(e["line"], e["text"]) for e in data["skipped_examples"]],
            notes=list(data["notes"]),
            skip_reasons=dict(data.get("skip_reasons", {})),
        )


def _empty_metrics() -> pl.DataFrame:
    from logscope.schemas import empty_metrics  # on use: a cached report needs no polars

    return empty_metrics()


@dataclass
class Run:
    """One training run as read from one source.

    `metrics` is a long frame `step, metric, value, wall_time` with one row per (step, metric):
    when a step was logged twice (a restart), the latest value wins.
    `meta` holds project, experiment, `verl_version` (a guess), `algorithm`, and
    `value_resolution` (0.0005 when values were printed with `.3f`, so 0.000 means |x| < 5e-4).
    """

    id: str
    source: Source
    meta: dict[str, Any] = field(default_factory=dict)
    config_segments: list[ConfigSegment] = field(default_factory=list)
    metrics: pl.DataFrame = field(default_factory=_empty_metrics)
    events: list[Event] = field(default_factory=list)
    parse_stats: ParseStats = field(default_factory=ParseStats)

    # ---- metrics -------------------------------------------------------------------------
    @property
    def metric_names(self) -> list[str]:
        """Sorted names of every metric in the run."""
        return sorted(self._series_index())

    def has_metric(self, name: str) -> bool:
        return name in self._series_index()

    def _series_index(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """{metric: (steps, values)} sorted by step, built once per metrics frame.

        One stable sort of the names' category codes (a radix sort while they fit 16 bits) puts
        the rows in metric order, each metric's rows in their own order; a metric whose rows a
        reader appended out of step order is reordered in that permutation. Each series is then
        a slice of two arrays gathered once: about a third of the memory a group-by into lists
        touches, which on a long run is most of the cost.
        """
        import numpy as np  # imported on use: a cached `analyze` never needs it
        import polars as pl

        cached = self.__dict__.get("_series_cache")
        if cached is not None and cached[0] is self.metrics:
            return cached[1]
        index: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        frame = self.metrics
        if frame.get_column("metric").null_count():
            frame = frame.drop_nulls("metric")
        if frame.height:
            names = frame.get_column("metric")
            codes = names.cast(pl.Categorical).to_physical()
            if codes.max() < 1 << 16:
                codes = codes.cast(pl.UInt16)
            code_array = codes.to_numpy()
            order = np.argsort(code_array, kind="stable")
            counts = np.bincount(code_array)
            counts = counts[counts > 0]
            ends = np.cumsum(counts)
            starts = ends - counts
            first_names = names.gather(order[starts]).to_list()
            steps_all = frame.get_column("step").to_numpy()[order]
            bounds = list(zip(starts.tolist(), ends.tolist(), strict=True))
            for a, b in bounds:  # rows a reader appended out of step order: reorder in place
                steps = steps_all[a:b]
                if b - a > 1 and bool(np.any(steps[1:] < steps[:-1])):
                    by_step = np.argsort(steps, kind="stable")
                    steps[:] = steps[by_step]
                    order[a:b] = order[a:b][by_step]
            values_all = frame.get_column("value").to_numpy()[order]
            del order
            steps_all.flags.writeable = False  # shared by every caller: no in-place edits
            values_all.flags.writeable = False
            for name, (a, b) in zip(first_names, bounds, strict=True):
                index[name] = (steps_all[a:b], values_all[a:b])
        self.__dict__["_series_cache"] = (self.metrics, index)
        return index

    @property
    def steps(self) -> np.ndarray:
        """Sorted unique steps that have at least one metric (read-only, built once per frame)."""

        cached = self.__dict__.get("_steps_cache")
        if cached is not None and cached[0] is self.metrics:
            return cached[1]
        steps = _unique_sorted(self.metrics.get_column("step").to_numpy())
        steps.flags.writeable = False
        self.__dict__["_steps_cache"] = (self.metrics, steps)
        return steps

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def series(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one metric, sorted by step; empty arrays when absent."""
        import numpy as np  # imported on use: a cached `analyze` never needs it

        found = self._series_index().get(metric)
        if found is None:
            return np.array([], dtype=np.int64), np.array([], dtype=np.float64)
        return found

    def wall_times(self) -> tuple[np.ndarray, np.ndarray]:
        """(steps, wall_time) for steps that carry a wall time (empty when none)."""
        import numpy as np  # imported on use: a cached `analyze` never needs it
        import polars as pl

        if self.metrics.height == 0:
            return np.array([], dtype=np.int64), np.array([], dtype=np.float64)
        frame = (
            self.metrics.drop_nulls("wall_time")
            .group_by("step")
            .agg(pl.col("wall_time").max())
            .sort("step")
        )
        return frame.get_column("step").to_numpy(), frame.get_column("wall_time").to_numpy()

    def wide(self) -> pl.DataFrame:
        """One row per step, one column per metric (for display and export)."""
        import polars as pl

        if self.metrics.height == 0:
            return pl.DataFrame({"step": pl.Series([], dtype=pl.Int64)})
        return self.metrics.pivot(on="metric", index="step", values="value").sort("step")

    @property
    def value_resolution(self) -> float | None:
        """Half a unit of the last printed decimal when values were rounded, else None."""
        res = self.meta.get("value_resolution")
        return float(res) if res else None

    # ---- config --------------------------------------------------------------------------
    def config(self, step: int | None = None) -> dict[str, Any]:
        """The config in force at `step` (the latest segment by default); {} when unknown."""
        if not self.config_segments:
            return {}
        if step is None:
            return self.config_segments[-1].config
        chosen = self.config_segments[0].config
        for seg in self.config_segments:
            if seg.first_step <= step:
                chosen = seg.config
        return chosen

    def config_value(self, key: str, step: int | None = None, default: Any = None) -> Any:
        """A dotted key (e.g. `actor_rollout_ref.actor.kl_loss_coef`) from the run's config."""
        node: Any = self.config(step)
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def summary(self) -> dict[str, Any]:
        """Numbers for the report header."""
        steps = self.steps
        _, walls = self.wall_times()
        wall = float(walls.max() - walls.min()) if len(walls) > 1 else None
        return {
            "id": self.id,
            "source": {"kind": self.source.kind, "path": self.source.path},
            "meta": _jsonable(self.meta),
            "steps": {
                "count": len(steps),
                "first": int(steps[0]) if len(steps) else None,
                "last": int(steps[-1]) if len(steps) else None,
            },
            "metrics_count": len(self.metric_names),
            "wall_time_s": wall,
            "config_segments": [
                {"first_step": s.first_step, "line": s.line_no, "keys": len(s.config)}
                for s in self.config_segments
            ],
            "events_count": len(self.events),
            "parse_stats": self.parse_stats.to_dict(),
        }

    @classmethod
    def from_dict(cls, summary: dict[str, Any]) -> Run:
        """The run of a report read back from its JSON (`summary()`): id, source, meta and parse
        stats; a summary holds no metrics, config or events, so the run shows the summary."""
        return SummarizedRun(
            summary=summary,
            id=summary["id"],
            source=Source(**summary["source"]),
            meta=dict(summary["meta"]),
            parse_stats=ParseStats.from_dict(summary["parse_stats"]),
        )


class SummarizedRun(Run):
    """A Run known by the summary it had when it was analysed (`summary`; None: not kept): its
    `summary()` is that one, under the current source, until its metrics are read."""

    def __init__(self, *, summary: dict[str, Any] | None, **fields: Any) -> None:
        self.__dict__["_summary"] = summary
        super().__init__(**fields)

    def metrics_read(self) -> bool:
        """Whether `metrics` holds the run's own metrics (never here: a summary has none)."""
        return False

    def summary(self) -> dict[str, Any]:
        kept = self.__dict__["_summary"]
        if kept is None or self.metrics_read():
            return super().summary()
        return {**kept, "source": {"kind": self.source.kind, "path": self.source.path}}


@dataclass(frozen=True)
class Advice:
    """One parameter change: the verl key, its value in this run, what to set, and why."""

    parameter: str
    current: Any
    suggested: Any
    override: str | None
    rationale: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Advice:
        return cls(**data)

    @property
    def changes(self) -> bool:
        """False when the suggested value is the current one (`True → True` is not advice)."""
        return not _same_setting(self.current, self.suggested)


def _same_setting(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    numeric = (int, float)
    if isinstance(a, numeric) and isinstance(b, numeric) and not isinstance(a, bool | str):
        if isinstance(b, bool) != isinstance(a, bool):
            return False
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    if isinstance(a, bool | str) and isinstance(b, bool | str):  # True == "true" (YAML dumps)
        return str(a).strip().lower() == str(b).strip().lower()
    return a == b


@dataclass
class Finding:
    """One diagnosis on one run: what was seen (with numbers), where, and what to change."""

    code: str
    name: str
    severity: Severity
    title: str
    message: str
    metric: str | None = None
    step: int | None = None
    end_step: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: list[Advice] = field(default_factory=list)
    references: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.advice = [a for a in self.advice if a.changes]

    @property
    def is_config(self) -> bool:
        """A config-lint finding (LS5xx): about the run's settings, not a moment of training."""
        return self.code.startswith(CONFIG_CODE_PREFIX)

    @property
    def key(self) -> tuple[str, str | None, int | None]:
        """Identity used to compare findings across runs of the pipeline (tail vs analyze)."""
        return (self.name, self.metric, self.step)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "title": self.title,
            "message": self.message,
            "metric": self.metric,
            "step": self.step,
            "end_step": self.end_step,
            "evidence": _jsonable(self.evidence),
            "advice": [a.to_dict() for a in self.advice],
            "references": list(self.references),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(**{**data, "advice": [Advice.from_dict(a) for a in data["advice"]]})


@dataclass
class Incident:
    """Findings that belong together in time; `first_mover` is the finding that showed first."""

    id: str
    title: str
    severity: Severity
    step: int | None
    end_step: int | None
    first_mover: str
    findings: list[int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Incident:
        return cls(**data)


@dataclass(frozen=True)
class HealthRow:
    """One line of the health table: a key metric at the last training step, and its verdict."""

    key: str
    label: str
    metric: str | None
    step: int | None
    value: float | None
    display: str
    healthy: str
    verdict: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


def _jsonable(value: Any) -> Any:
    """Plain-JSON copy: numpy scalars → Python, NaN/inf → None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if type(value).__module__ == "numpy":  # a numpy scalar (numpy itself is not imported here)
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


jsonable = _jsonable


def _unique_sorted(values: np.ndarray) -> np.ndarray:
    """Sorted distinct integers; a bitmap over their range when it is dense (steps are)."""
    import numpy as np  # imported on use: a cached `analyze` never needs it

    if len(values) == 0:
        return np.array([], dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if high - low > 4 * len(values) + 1024:
        return np.unique(values)
    if 0 <= low and high <= 4 * len(values) + 1024:  # indexed by the steps: no shifted copy
        seen = np.zeros(high + 1, dtype=bool)
        seen[values] = True
        return np.flatnonzero(seen[low:]).astype(np.int64) + low
    seen = np.zeros(high - low + 1, dtype=bool)
    seen[values - low] = True
    return np.flatnonzero(seen).astype(np.int64) + low
