"""Reference ranges: what a metric's value means, and whether a few steps of it look healthy.

Two small data tables, views of the metric registry (`logscope/data/metrics.toml`):

- `REFERENCES`: per metric concept, its healthy range (per algorithm where it differs), unit,
  the limits beyond which one step is already a finding (`alarm_low`/`alarm_high`), the verdict
  rule and its source;
- `TRAPS`: values that do not mean what they say (`perf/mfu/*` = 0 is "not measured",
  `num_preempted` = -1 is "not available", a `.3f` zero is |x| < 5e-4, step 0 is validation).

`recent_level` is the one mechanism point-in-time detectors use ("judge the recent level against
a reference range"); `health_table` is the per-run table the Report carries (`report.health`).
numpy is imported on use: a cached `analyze` rebuilds reports without it.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from logscope import metric_registry
from logscope.aliases import VALIDATION_PREFIXES, resolve
from logscope.model import HealthRow
from logscope.sources import cite
from logscope.verl_version import VerlVersion

if TYPE_CHECKING:
    from logscope.model import Run

# ---- verdicts --------------------------------------------------------------------------------
OK = "ok"
LOW = "low"
HIGH = "high"
CONSTANT = "constant"  # every sample got the same value (min == max)
ROUNDED = "rounded"  # printed as 0 at the log's resolution: too small to judge
NOT_MEASURED = "not measured"  # a sentinel value (MFU 0, num_preempted -1)
NOT_LOGGED = "not logged"
NOT_FINITE = "not finite"  # NaN or inf (LS001 reports it)
UNRELIABLE = "unreliable"  # the value is logged but cannot mean what it says here
NO_RANGE = "no range"  # shown, not judged (no healthy range applies)
VERDICTS: tuple[str, ...] = (
    OK,
    LOW,
    HIGH,
    CONSTANT,
    ROUNDED,
    NOT_MEASURED,
    NOT_LOGGED,
    NOT_FINITE,
    UNRELIABLE,
    NO_RANGE,
)

#: Point-in-time judgements use the median of this many last logged training steps.
RECENT_STEPS = 5
#: The health table reads the last this many training steps (a metric logged only earlier is
#: "not logged" there).
TABLE_STEPS = 50
#: Steps up to this number are warm-up (an untrained critic, optimizer state still empty).
WARMUP_STEPS = 5

Range = metric_registry.Range


@dataclass(frozen=True)
class Reference(metric_registry.ReferenceData):
    """One row of the reference table (`metric_registry.ReferenceData`), its source cited."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", cite(self.source))


#: the registry's [[reference]] rows (`logscope/data/metrics.toml`)
REFERENCES: dict[str, Reference] = {
    r.key: Reference(**asdict(r)) for r in metric_registry.load().references
}


@dataclass(frozen=True)
class Trap(metric_registry.TrapData):
    """A value that does not mean what it says (`metric_registry.TrapData`), its source cited."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", cite(self.source))


#: the registry's [[trap]] rows; `when` is a key of _CONDITIONS
TRAPS: tuple[Trap, ...] = tuple(Trap(**asdict(t)) for t in metric_registry.load().traps)

_CONDITIONS: dict[str, Callable[[float, float | None], bool]] = {
    "== 0": lambda v, res: v == 0,
    "> 1": lambda v, res: v > 1,
    "== -1": lambda v, res: v == -1,
    "rounded zero": lambda v, res: bool(res) and abs(v) < res,
    "step 0": lambda v, res: False,  # a property of steps (see `training_steps`), not values
}


def trap_for(metric: str, value: float, resolution: float | None = None) -> Trap | None:
    """The first trap that applies to `value` of `metric` (None when the value means itself)."""
    for trap in TRAPS:
        if fnmatch.fnmatchcase(metric, trap.pattern) and _CONDITIONS[trap.when](value, resolution):
            return trap
    return None


def sentinel(metric: str, value: float) -> bool:
    """True when the value is a "not measured"/"impossible" marker rather than a measurement."""
    trap = trap_for(metric, value)
    return trap is not None and trap.verdict in (NOT_MEASURED, UNRELIABLE)


# ---- what the run is -------------------------------------------------------------------------
def is_training_metric(name: str) -> bool:
    return not name.startswith((*VALIDATION_PREFIXES, "val/"))


def training_steps(run: Run, last: int | None = None) -> list[int]:
    """Steps with at least one training metric (a step:0 line of validation only is left out);
    only the `last` ones when given (long runs need only their tail)."""
    import numpy as np

    parts = [
        run.series(name)[0][-last:] if last else run.series(name)[0]
        for name in run.metric_names
        if is_training_metric(name)
    ]
    if not parts:
        return []
    steps = np.unique(np.concatenate(parts))
    return [int(x) for x in (steps[-last:] if last else steps)]


def clip_ratio_reliable(run: Run) -> bool:
    """False on verl 0.9.x V1, where `response_length/clip_ratio` compares each response with
    the padded batch max (verl#7817): never 0, and wrong exactly when nothing is truncated."""
    version = VerlVersion.parse(run.meta.get("verl_version"))
    if version is None or not version.in_series("0.9"):
        return True
    use_v1 = run.config_value("trainer.use_v1")
    if isinstance(use_v1, bool):
        return not use_v1
    actors = set(run.meta.get("ray_actors") or ())
    return "TaskRunnerV1" not in actors and "TaskRunner" in actors


#: the largest per-token entropy there is: ln of a 256k-token vocabulary (nats)
MAX_TOKEN_ENTROPY = 12.5


def entropy_summed(run: Run, value: float | None = None) -> str | None:
    """Why `actor/entropy` is not a per-token value: the `actor.loss_agg_mode` when it sums over
    tokens (a per-sequence sum), or `value` above any vocabulary's ln size; None otherwise."""
    from logscope.advice import current_value

    mode = current_value(run, "actor_rollout_ref.actor.loss_agg_mode")
    if isinstance(mode, str) and "token-sum" in mode:
        return f"summed over tokens (loss_agg_mode={mode})"
    if value is not None and value > MAX_TOKEN_ENTROPY:
        return f"above ln(vocabulary) = {MAX_TOKEN_ENTROPY:g}: a sum over tokens, not per token"
    return None


def response_cap(run: Run) -> tuple[float | None, str]:
    """(`data.max_response_length`, where it came from): the config dump or the overrides a
    failed run printed, else None (verl's default is not assumed for a run whose config is not
    in the log)."""
    from logscope.advice import current_value

    cap = current_value(run, "data.max_response_length")
    if isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 0:
        return float(cap), "config" if run.config_segments else "overrides"
    return None, ""


def grad_clip(run: Run, role: str = "actor") -> tuple[float, str]:
    """(clip value, where it came from): the config's key for `role`, else verl's default 1.0."""
    base = "actor_rollout_ref.actor" if role == "actor" else "critic"
    for key in (f"{base}.optim.clip_grad", f"{base}.grad_clip"):
        value = run.config_value(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value), key
    return 1.0, "verl's default"


# ---- the shared mechanism: the recent level of a metric --------------------------------------
@dataclass(frozen=True)
class Level:
    """The recent level of one metric: the median of its last few logged training steps."""

    metric: str
    steps: tuple[int, ...]
    values: tuple[float, ...]
    value: float
    resolution: float | None = None

    @property
    def step(self) -> int:
        return self.steps[-1]

    @property
    def rounded(self) -> bool:
        """Printed as 0 at the log's resolution (`.3f`: |x| < 5e-4)."""
        return bool(self.resolution) and abs(self.value) < (self.resolution or 0.0)

    def where(self) -> str:
        """`at step 4` or `over steps 2–3 (median of 2)`."""
        if len(self.steps) == 1:
            return f"at step {self.steps[0]}"
        return f"over steps {self.steps[0]}–{self.steps[-1]} (median of {len(self.steps)})"


def recent_level(
    run: Run,
    concept: str,
    last: int = RECENT_STEPS,
    keep: Callable[[int], bool] | None = None,
) -> Level | None:
    """The median of `concept`'s last `last` finite, measured values (sentinels such as MFU 0
    left out) on steps that pass `keep`; None when the run has none."""
    metric = resolve(run, concept)
    if metric is None:
        return None
    steps, values = run.series(metric)
    points: list[tuple[int, float]] = []
    for i in range(len(steps) - 1, -1, -1):  # from the end: long runs need only their tail
        step, value = int(steps[i]), float(values[i])
        if math.isfinite(value) and not sentinel(metric, value) and (keep is None or keep(step)):
            points.append((step, value))
            if len(points) >= last:
                break
    if not points:
        return None
    points.reverse()
    return Level(
        metric,
        tuple(s for s, _ in points),
        tuple(v for _, v in points),
        _median([v for _, v in points]),
        run.value_resolution,
    )


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class Jump:
    """A rise between two consecutive logged values of a metric."""

    metric: str
    step_before: int
    before: float
    step: int
    after: float

    @property
    def ratio(self) -> float:
        return self.after / max(self.before, 1e-12)


def consecutive_jump(
    run: Run,
    concept: str,
    min_ratio: float,
    min_after: float,
    last: int = RECENT_STEPS,
    after_step: int = WARMUP_STEPS,
) -> Jump | None:
    """The largest rise among the last `last` values of `concept` to at least `min_ratio` × the
    value before and at least `min_after`, after step `after_step` (warm-up); None if none.
    Every earlier logged value is the baseline too: a rise is no jump when any earlier value
    (within `last` or before it) was as high, or when it is less than `min_ratio` × the median
    of all earlier values (a sparse excerpt's dip is not the level)."""
    metric = resolve(run, concept)
    if metric is None:
        return None
    steps, values = run.series(metric)
    finite = [math.isfinite(float(v)) for v in values]
    first = max(0, len(values) - last)
    best: Jump | None = None
    for i in range(max(first, 1), len(values)):
        s0, v0, s1, v1 = int(steps[i - 1]), float(values[i - 1]), int(steps[i]), float(values[i])
        if not (finite[i - 1] and finite[i]) or v0 < 0 or s1 <= after_step:
            continue
        earlier = [float(v) for v, ok in zip(values[:i], finite[:i], strict=True) if ok]
        big = v1 >= min_after and v1 >= min_ratio * max(v0, 1e-12)
        if big and (max(earlier) >= v1 or v1 < min_ratio * max(_median(earlier), 1e-12)):
            continue  # an earlier step was as high: the step before was a dip, not the level
        jump = Jump(metric, s0, v0, s1, v1)
        if big and (best is None or jump.ratio > best.ratio):
            best = jump
    return best


def values_by_step(run: Run, concept: str, since: int | None = None) -> dict[int, float]:
    """{step: value} of `concept` (finite values only; {} when the run does not log it), from
    step `since` on when given."""
    import numpy as np

    metric = resolve(run, concept)
    if metric is None:
        return {}
    s, v = run.series(metric)
    if since is not None:
        start = int(np.searchsorted(s, since))
        s, v = s[start:], v[start:]
    keep = np.isfinite(v)
    return dict(zip(s[keep].tolist(), v[keep].tolist(), strict=True))


def judge(
    ref: Reference, value: float | None, run: Run, metric: str = "", scale: float = 1.0
) -> str:
    """The verdict on `value` against `ref`'s healthy range (× `scale`), after the traps."""
    if value is None:
        return NOT_LOGGED
    if not math.isfinite(value):
        return NOT_FINITE
    trap = trap_for(metric, value, run.value_resolution)
    low, high = ref.healthy_range(run.meta.get("algorithm"))
    low = None if low is None else low * scale
    high = None if high is None else high * scale
    if trap is not None and trap.verdict == ROUNDED:
        # too small to judge, unless even the rounding bound is below the healthy range
        return LOW if low is not None and low >= (run.value_resolution or 0.0) else ROUNDED
    if trap is not None:
        return trap.verdict
    if low is None and high is None:
        return NO_RANGE
    if low is not None and value < low:
        return LOW
    if high is not None and value > high:
        return HIGH
    return OK


# ---- the health table ------------------------------------------------------------------------
def num(x: float | None) -> str:
    """A value for the table: 3 significant digits, scientific for tiny or huge ones."""
    if x is None or not math.isfinite(x):
        return str(x)
    x = x + 0.0  # -0.0 → 0.0
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e9):
        return f"{x:.2e}"
    if abs(x) >= 1000:
        return f"{x:.0f}"
    return f"{x:.3g}"


def range_text(ref: Reference, run: Run, scale: float = 1.0) -> str:
    """The healthy range for the table (`≤ 0.1`, `0.1–2`, `–` when none)."""
    low, high = ref.healthy_range(run.meta.get("algorithm"))
    if low is None and high is None:
        return "–"
    if low is None:
        return f"≤ {num(high * scale)}"  # type: ignore[operator]
    if high is None:
        return f"≥ {num(low * scale)}"
    return f"{num(low * scale)}–{num(high * scale)}"


def _latest(
    run: Run, concept: str, steps: Collection[int]
) -> tuple[str | None, int | None, float | None]:
    """(metric, step, value) of `concept` at the latest of `steps` where it is logged."""
    metric = resolve(run, concept)
    if metric is None:
        return None, None, None
    return _latest_metric(run, metric, steps)


def _latest_metric(
    run: Run, metric: str, steps: Collection[int]
) -> tuple[str, int | None, float | None]:
    s, v = run.series(metric)
    for i in range(len(s) - 1, -1, -1):
        if int(s[i]) in steps:
            return metric, int(s[i]), float(v[i])
    return metric, None, None


def _row(
    run: Run, key: str, steps: Collection[int], scale: float = 1.0, note: str = ""
) -> HealthRow:
    ref = REFERENCES[key]
    metric, step, value = _latest(run, ref.concept, steps)
    trap = None if value is None else trap_for(metric or "", value, run.value_resolution)
    if trap is not None and trap.note:
        note = "; ".join(x for x in (note, trap.note) if x)
    return HealthRow(
        key,
        ref.label,
        metric,
        step,
        value,
        "–" if value is None else num(value),
        range_text(ref, run, scale),
        judge(ref, value, run, metric or "", scale),
        note,
    )


def _entropy_row(run: Run, steps: Collection[int]) -> HealthRow:
    row = _row(run, "entropy", steps)
    why = entropy_summed(run, row.value) if row.value is not None else None
    if why:
        return replace(row, verdict=NO_RANGE, note=why)
    if row.value is None:
        return replace(row, note="no entropy key in the log (not 0)")
    return row


def _grad_row(run: Run, key: str, role: str, steps: Collection[int]) -> HealthRow:
    clip, source = grad_clip(run, role)
    return _row(run, key, steps, scale=clip, note=f"clip {num(clip)} ({source})")


def _clip_row(run: Run, steps: Collection[int]) -> HealthRow:
    ref = REFERENCES["response_clip_ratio"]
    metric, step, ratio = _latest(run, ref.concept, steps)
    _, _, top = _latest(run, "response_length_max", {step} if step is not None else steps)
    cap, _ = response_cap(run)
    parts = []
    if top is not None and cap:
        parts.append(f"max {num(top)} / cap {num(cap)}")
    elif top is not None:
        cut = ratio is not None and ratio > 0
        parts.append(f"max {num(top)}" + (" (the cap, as responses were cut)" if cut else ""))
    reliable = clip_ratio_reliable(run)
    if not reliable and ratio is not None:
        if cap is None or top is None:
            verdict = UNRELIABLE
        else:  # on V1 the ratio is right exactly when the batch max is the cap
            ratio = ratio if top >= cap - 0.5 else 0.0
            verdict = judge(ref, ratio, run, metric or "")
        parts.append("verl 0.9 V1: clip_ratio is against the padded batch max")
    else:
        verdict = judge(ref, ratio, run, metric or "")
    display = "–" if ratio is None else num(ratio)
    return HealthRow(
        ref.key,
        ref.label,
        metric,
        step,
        ratio,
        display,
        range_text(ref, run),
        verdict,
        "; ".join(parts),
    )


def _spread_row(
    run: Run, key: str, concepts: tuple[str, str, str], steps: Collection[int], flat: bool
) -> HealthRow:
    """Mean (min–max) at the last step with both bounds; `constant` when they are equal (score)
    or both ~0 (advantages, `flat` False)."""
    ref = REFERENCES[key]
    mean_c, max_c, min_c = concepts
    since = min(steps)
    top, bottom = values_by_step(run, max_c, since), values_by_step(run, min_c, since)
    both = sorted(set(top) & set(bottom) & set(steps))
    if not both:
        return HealthRow(key, ref.label, resolve(run, mean_c), None, None, "–", "–", NOT_LOGGED)
    step = both[-1]
    hi, lo = top[step], bottom[step]
    mean = values_by_step(run, mean_c, step).get(step)
    display = (num(mean) + " " if mean is not None else "") + f"({num(lo)}–{num(hi)})"
    tol = _tol(run) if flat else _eps(run)
    same = abs(hi - lo) <= tol if flat else max(abs(hi), abs(lo)) <= tol
    healthy = "min < max" if flat else "not all ~0"
    metric = resolve(run, mean_c) or resolve(run, max_c)
    return HealthRow(key, ref.label, metric, step, mean, display, healthy, CONSTANT if same else OK)


def _gen_row(run: Run, steps: Collection[int]) -> HealthRow:
    """Generation's share of the latest step that did not also run validation/checkpointing."""
    ref = REFERENCES["gen_share"]
    healthy = f"< {ref.healthy[1]:.0%}"
    shares = gen_shares(run, steps)
    if not shares:
        metric = resolve(run, "time_gen")
        return HealthRow(ref.key, ref.label, metric, None, None, "–", healthy, NOT_LOGGED)
    plain = [s for s in shares if not s[2]]
    step, share, extra = (plain or shares)[-1]
    verdict = judge(ref, share, run) if not extra else UNRELIABLE
    note = f"the step also ran validation/checkpointing ({num(extra)} s)" if extra else ""
    metric = resolve(run, "time_gen")
    return HealthRow(
        ref.key, ref.label, metric, step, share, f"{share:.0%}", healthy, verdict, note
    )


def gen_shares(run: Run, steps: Collection[int] | None = None) -> list[tuple[int, float, float]]:
    """(step, timing_s/gen ÷ step time, seconds of validation/checkpointing in it) per step."""
    since = min(steps) if steps else None
    gen = values_by_step(run, "time_gen", since)
    total = values_by_step(run, "time_step", since)
    extra = extra_seconds(run, since)
    wanted = set(gen) & set(total)
    if steps is not None:
        wanted &= set(steps)
    out = []
    for step in sorted(wanted):
        if total[step] > 0 and 0 <= gen[step] <= 1.05 * total[step]:
            out.append((step, gen[step] / total[step], extra.get(step, 0.0)))
    return out


def extra_seconds(run: Run, since: int | None = None) -> dict[int, float]:
    """{step: seconds of validation and checkpoint saving inside the step} (> 0 only)."""
    prefix = "timing/" if resolve(run, "time_step") == "timing/step" else "timing_s/"
    out: dict[int, float] = {}
    for phase in ("testing", "save_checkpoint"):
        s, v = run.series(prefix + phase)
        for a, b in zip(s, v, strict=True):
            if math.isfinite(b) and b > 0 and (since is None or a >= since):
                out[int(a)] = out.get(int(a), 0.0) + float(b)
    return out


def _mfu_rows(run: Run, steps: Collection[int]) -> list[HealthRow]:
    ref = REFERENCES["mfu"]
    rows = []
    for metric in run.metric_names:
        if not fnmatch.fnmatchcase(metric, "*mfu/*"):
            continue
        _, step, value = _latest_metric(run, metric, steps)
        if step is None or value is None:
            continue
        trap = trap_for(metric, value)
        rows.append(
            HealthRow(
                ref.key,
                f"{ref.label} ({metric.split('mfu/')[-1]})",
                metric,
                step,
                value,
                num(value),
                range_text(ref, run),
                judge(ref, value, run, metric),
                trap.note if trap else "",
            )
        )
    return rows


def _memory_row(run: Run, steps: Collection[int]) -> HealthRow | None:
    metric, step, reserved = _latest(run, "gpu_mem_reserved", steps)
    if reserved is None:
        return None
    _, _, allocated = _latest(run, "gpu_mem_allocated", {step} if step is not None else steps)
    display = f"{num(reserved)} GB" + (f" ({num(allocated)} allocated)" if allocated else "")
    ref = REFERENCES["gpu_memory"]
    return HealthRow(
        ref.key,
        ref.label,
        metric,
        step,
        reserved,
        display,
        "below the GPU's size",
        NO_RANGE,
        "capacity not in the log",
    )


def health_table(run: Run) -> list[HealthRow]:
    """The key metrics of the last training step, each with its healthy range and verdict.

    Rows for metrics the run does not log are left out, except entropy, the score, the actor
    grad norm, the response clip ratio and the generation share (shown as "not logged").
    """
    steps = set(training_steps(run, last=TABLE_STEPS))
    if not steps:
        return []
    rows = [
        _entropy_row(run, steps),
        _row(run, "kl_ref", steps),
        _row(run, "ppo_kl", steps),
        _row(run, "pg_clipfrac", steps),
        _grad_row(run, "actor_grad_norm", "actor", steps),
        _clip_row(run, steps),
        _row(run, "response_length", steps),
        _spread_row(run, "score", ("score_mean", "score_max", "score_min"), steps, flat=True),
        _spread_row(
            run,
            "advantages",
            ("advantages_mean", "advantages_max", "advantages_min"),
            steps,
            flat=False,
        ),
        _gen_row(run, steps),
        _row(run, "vf_explained_var", steps),
        _grad_row(run, "critic_grad_norm", "critic", steps),
        *_mfu_rows(run, steps),
    ]
    memory = _memory_row(run, steps)
    if memory is not None:
        rows.append(memory)
    rows += [_row(run, "lr", steps), _row(run, "num_preempted", steps)]
    shown_when_absent = {"entropy", "score", "actor_grad_norm", "response_clip_ratio", "gen_share"}
    return [r for r in rows if r.verdict != NOT_LOGGED or r.key in shown_when_absent]


def _tol(run: Run) -> float:
    """Two values count as equal within this (the print resolution, when rounded)."""
    return max(1e-9, 2 * (run.value_resolution or 0.0))


def _eps(run: Run) -> float:
    """An advantage counts as ~0 within this (LS211's absolute epsilon, or the resolution)."""
    return max(1e-3, 2 * (run.value_resolution or 0.0))


def _replace(row: HealthRow, **changes: Any) -> HealthRow:
    from dataclasses import replace

    return replace(row, **changes)
