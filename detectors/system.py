"""System diagnoses: GPU/CPU memory climbing, generation dominating the step, throughput dropping."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.aliases import name_of, resolve
from logscope.detector import Detector, param
from logscope.frameworks import profile_of
from logscope.health import values_by_step
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import RO, model_size_b, n_gpus
from logscope.words import plural

from ._common import gpu_memory_advice, gpu_memory_bound
from ._fits import minimize_bounded
from ._series import Series, bin_width, binned, noise_floor, regular_grid, running_median
from ._stats import (
    autocorrelation,
    best_split,
    changepoints,
    fmt,
    mad_sigma,
    mann_kendall,
    robust_sigma,
    theil_sen,
)
from .async_training import split_advice

#: Usual GPU memory sizes (GB); capacity is guessed as the smallest ≥ 1.05 × the max seen.
GPU_SIZES_GB = (24.0, 40.0, 48.0, 80.0, 94.0, 141.0)

#: timing_s/* entries that are part of a step but are not its compute phases.
_NOT_PHASES = {"step", "testing", "save_checkpoint", "start_profile", "stop_profile"}
#: sub-timings of generation that the rollout adds on top of `gen`.
_GEN_PARTS = ("generate_sequences", "generation_timing", "agent_loop", "gen_max")


def _timing_prefix(run: Run) -> str:
    """The prefix of the run's per-phase seconds: the one its step time is logged under."""
    prefixes = profile_of(run).timing_prefixes
    step = resolve(run, "time_step") or ""
    return next((p for p in prefixes if step.startswith(p)), prefixes[0] if prefixes else "")


def _phase_metrics(run: Run) -> dict[str, str]:
    """{phase: metric} of the step's compute phases (gen, update_actor, old_log_prob, …)."""
    out = {}
    step = resolve(run, "time_step")
    for name in run.metric_names:
        if name == step:
            continue
        for prefix in profile_of(run).timing_prefixes:
            if name.startswith(prefix):
                phase = name[len(prefix) :]
                if phase in _NOT_PHASES or phase.startswith(_GEN_PARTS) or "/" in phase:
                    continue
                out.setdefault(phase, name)
    return out


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b, NaN where b is not a positive number."""
    ok = np.isfinite(a) & np.isfinite(b) & (b > 0)
    return np.where(ok, a / np.where(ok, b, 1.0), np.nan)


def _extra_seconds(run: Run, steps: np.ndarray) -> np.ndarray:
    """Seconds of validation and checkpoint saving inside each step's time (0 where none).

    Whether `timing_s/step` holds them depends on the verl version (its trainer runs
    `testing` and `save_checkpoint` inside the step timer in some releases, after it in
    others), so each step's own accounting decides: they are inside when the step time is
    closer to the other phases' sum plus them than to that sum alone. A step that logs no
    other phase cannot tell, and counts them as inside (verl#3116)."""
    out = np.zeros(len(steps))
    prefix = _timing_prefix(run)
    for phase in ("testing", "save_checkpoint"):
        extra = Series.read(run, prefix + phase).at(steps)
        out += np.where(np.isfinite(extra) & (extra > 0), extra, 0.0)
    if not out.any():
        return out
    phases = np.zeros(len(steps))
    for name in _phase_metrics(run).values():
        v = Series.read(run, name).at(steps)
        phases += np.where(np.isfinite(v) & (v > 0), v, 0.0)
    total = Series.read(run, resolve(run, "time_step")).at(steps)
    known = (phases > 0) & np.isfinite(total)
    outside = known & (np.abs(phases + out - total) > np.abs(total - phases))
    return np.where(outside, 0.0, out)


def _actor_start(run: Run, steps: np.ndarray) -> float | None:
    """First step of the actor's updates when the critic warmed up alone before it (PPO
    `trainer.critic_warmup`): earlier steps have no update_actor phase and are shorter."""
    if len(steps) == 0:
        return None
    s = Series.read(run, _timing_prefix(run) + "update_actor").steps
    if len(s):
        return float(s[0]) if s[0] > steps[0] else None
    try:
        warm = int(run.config_value("trainer.critic_warmup", default=0) or 0)
    except (TypeError, ValueError):
        warm = 0
    return float(warm) if warm > steps[0] else None  # verl updates once critic_warmup <= step


def _gen_rounds(run: Run, steps: np.ndarray) -> np.ndarray | None:
    """Generation rounds per step where the run logs them (DAPO's `train/num_gen_batches`)."""
    logged = Series.read(run, resolve(run, "gen_batches"))
    if len(logged) == 0:
        return None
    rounds = logged.at(steps)
    return np.where(np.isfinite(rounds) & (rounds >= 1), rounds, 1.0)


def _repeated_generation(run: Run, gen: np.ndarray, rest: np.ndarray) -> bool:
    """Whether generation runs a varying number of sampling rounds per step (DAPO's dynamic
    sampling): said by the config, or seen as generation alone jumping ≥ 1.5× between
    consecutive steps in at least a tenth of them while the other phases do not."""
    if run.config_value("algorithm.filter_groups.enable", default=False) is True:
        return True
    ok = (gen > 0) & (rest > 0)
    if ok.sum() < 10:
        return False
    jumps = np.abs(np.diff(np.log(gen[ok] / rest[ok]))) > math.log(1.5)
    return int(jumps.sum()) >= 3 and float(jumps.mean()) >= 0.1


def _leading_min(values: np.ndarray, window: int) -> np.ndarray:
    """Minimum over each point and the `window - 1` after it (fewer at the end)."""
    v = np.asarray(values, dtype=np.float64)
    padded = np.concatenate([v, np.full(window - 1, np.inf)])
    return np.lib.stride_tricks.sliding_window_view(padded, window).min(axis=1)


#: Time constants (steps) tried for memory's warm-up rise to its plateau (allocator, vLLM): up to
#: 60 steps, or a quarter of the run's span (a rise that is 98 % done by the end still settles:
#: host memory creeping up over 600 steps to a plateau is no leak).
_WARMUP_TAUS = np.geomspace(1.0, 60.0, 48)
_WARMUP_SETTLED_SPANS = 4.0


def _warmup_taus(span: float) -> np.ndarray:
    """`_WARMUP_TAUS`, stretched (same count) to a quarter of `span` when that is longer."""
    top = max(float(_WARMUP_TAUS[-1]), span / _WARMUP_SETTLED_SPANS)
    return _WARMUP_TAUS if top <= _WARMUP_TAUS[-1] else np.geomspace(1.0, top, len(_WARMUP_TAUS))


def _period(steps: np.ndarray, values: np.ndarray, max_period: int = 60) -> tuple[int, float]:
    """(period, its autocorrelation) of a repeating pattern such as the allocator's sawtooth,
    in points of the series' regular grid (`bin_width`); (1, 0) when there is none.

    Judged on the first differences with their local level removed (a warm-up or a leak only
    shifts that level), where a sawtooth is a train of drops one period apart.
    """
    _, grid, _ = regular_grid(steps, values, len(values))
    d = np.diff(grid)
    if len(d) < 9:
        return 1, 0.0
    d = d - running_median(d, 9)
    acf = autocorrelation(d, min(max_period, len(d) // 2))
    if len(acf) < 3:
        return 1, 0.0
    lags = np.arange(2, len(acf))
    best = float(acf[lags].max())
    if not best > 0:  # none, or NaN from overflowing values
        return 1, 0.0
    period = int(lags[np.flatnonzero(acf[lags] >= 0.8 * best)[0]])
    return period, best


class _Phases:
    """Rows in `groups` phase groups (`phase`: each row's group), for the mean of each group."""

    def __init__(self, phase: np.ndarray, groups: int) -> None:
        self.phase = phase
        self.onehot = np.zeros((len(phase), groups))
        self.onehot[np.arange(len(phase)), phase] = 1.0
        self.counts = np.maximum(self.onehot.sum(axis=0), 1.0)

    def mean(self, m: np.ndarray) -> np.ndarray:
        """Mean of the rows of `m` in each phase group, back at every row."""
        means = (self.onehot.T @ m) / self.counts.reshape((-1,) + (1,) * (m.ndim - 1))
        return means[self.phase]


@dataclass
class _LeakFit:
    """Memory = repeating pattern + warm-up rise `warm`·(1 − e^(−t/tau)) + `rate`·max(0, x − at)."""

    at: float
    rate: float
    tau: float
    warm: float
    rss: float  # with the ramp
    rss_no_ramp: float  # best warm-up-only fit
    resid: np.ndarray
    adjusted: np.ndarray  # the values with the pattern and the warm-up taken out


@np.errstate(all="ignore")  # absurd magnitudes (1e300) must not warn, only fail to fit
def _leak_fit(
    x: np.ndarray, y: np.ndarray, phase: np.ndarray, groups: int, candidates: np.ndarray
) -> _LeakFit | None:
    """Least squares over warm-up time constants and ramp starts (the pattern as phase means):
    a grid over both, then the time constant refined for the best start and for no ramp."""
    if len(candidates) == 0:
        return None
    t = x - x[0]
    taus = _warmup_taus(float(t[-1]) if len(t) else 0.0)
    phases = _Phases(phase, groups)

    def demeaned(m: np.ndarray) -> np.ndarray:
        return m - phases.mean(m)

    yd = demeaned(y)
    yy = float(yd @ yd)

    @cache
    def ramp_column(at: float) -> np.ndarray:
        return demeaned(np.maximum(0.0, x - at))

    @cache
    def solve(tau: float, at: float | None) -> tuple[float, float, float]:
        """(rss, warm-up size, ramp rate) for one time constant (0: none) and start (None)."""
        cols = [demeaned(1.0 - np.exp(-t / tau))] if tau > 0 else []
        if at is not None:
            cols.append(ramp_column(at))
        if not cols:
            return yy, 0.0, 0.0
        design = np.column_stack(cols)
        coef = np.linalg.lstsq(design, yd, rcond=None)[0]
        warm = float(coef[0]) if tau > 0 else 0.0
        rate = float(coef[-1]) if at is not None else 0.0
        if warm < 0:  # a warm-up only rises
            return solve(0.0, at)
        if at is not None and rate <= 0:
            return math.inf, warm, rate
        fitted = design @ coef
        return float(((yd - fitted) ** 2).sum()), warm, rate

    def refined(tau: float, at: float | None) -> tuple[float, float]:
        """(best time constant near `tau`, its rss)."""
        if tau <= 0:
            return 0.0, solve(0.0, at)[0]
        step = math.log(taus[1] / taus[0])
        cap = 10 * yy + 1.0  # in place of inf (no rising ramp) for the line search
        x, fx = minimize_bounded(
            lambda lt: min(solve(math.exp(lt), at)[0], cap),
            math.log(tau) - step,
            math.log(tau) + step,
            xatol=1e-3,
        )
        best = (math.exp(float(x)), float(fx))
        return best if best[1] < solve(tau, at)[0] else (tau, solve(tau, at)[0])

    warm = demeaned(1.0 - np.exp(-t[:, None] / taus[None, :]))
    ramp = demeaned(np.maximum(0.0, x[:, None] - candidates[None, :]))
    ww, wy = (warm * warm).sum(axis=0), warm.T @ yd
    hh, hy = (ramp * ramp).sum(axis=0), ramp.T @ yd
    wh = warm.T @ ramp  # (taus, candidates)
    # no ramp: the best warm-up alone (rising only)
    b0 = np.where(ww > 1e-12, wy / ww, 0.0)
    rss0 = np.where(b0 > 0, yy - b0 * wy, yy)
    # warm-up and ramp together (2×2 normal equations per time constant and start)
    det = ww[:, None] * hh[None, :] - wh**2
    bw = (hh[None, :] * wy[:, None] - wh * hy[None, :]) / det
    br = (ww[:, None] * hy[None, :] - wh * wy[:, None]) / det
    rss = yy - bw * wy[:, None] - br * hy[None, :]
    rss = np.where((det > 1e-9) & (bw >= 0) & (br > 0), rss, np.inf)
    # the ramp alone (no warm-up)
    r1 = np.where(hh > 1e-12, hy / hh, 0.0)
    rss1 = np.where(r1 > 0, yy - r1 * hy, np.inf)
    i, j = np.unravel_index(int(np.argmin(rss)), rss.shape)
    tau = float(taus[i])
    if rss1.min() <= rss[i, j]:
        j, tau = int(np.argmin(rss1)), 0.0
    if not math.isfinite(min(float(rss1.min()), float(rss[i, j]))):
        return None
    at = float(candidates[j])
    tau, _ = refined(tau, at)
    best, warm_size, rate = solve(tau, at)
    tau0 = float(taus[int(np.argmin(rss0))]) if rss0.min() < yy else 0.0
    rss_no_ramp = min(yy, refined(tau0, None)[1])
    warm_part = warm_size * (1.0 - np.exp(-t / tau)) if tau > 0 else np.zeros(len(x))
    trend = warm_part + rate * np.maximum(0.0, x - at)
    pattern = phases.mean(y - trend)
    resid = y - trend - pattern
    pattern = pattern - pattern.mean()
    return _LeakFit(
        at=at,
        rate=rate,
        tau=tau,
        warm=warm_size,
        rss=best,
        rss_no_ramp=rss_no_ramp,
        resid=resid,
        adjusted=y - pattern - warm_part,
    )


def _ar1(resid: np.ndarray) -> float:
    """Lag-1 autocorrelation of the noise around a fit, in [0, 0.95]: the mean of the residual's
    own (low: the fitted trend soaks up slow wander) and the one its first differences imply
    (1 + 2·their lag-1 autocorrelation for AR(1) noise; high when slow misfit remains)."""
    if len(resid) < 5:
        return 0.0
    own = float(autocorrelation(resid, 1)[-1])
    from_diff = 1 + 2 * float(autocorrelation(np.diff(resid), 1)[-1])
    return float(np.clip(0.5 * (own + from_diff), 0.0, 0.95))


MAX_PINNED_SHARE = 0.25


def _before_ceiling(steps: np.ndarray, values: np.ndarray, sigma: float):
    """The series up to where it got pinned at its ceiling (the allocator's limit), if it did:
    its last 10 points or more, but at most `MAX_PINNED_SHARE` of them, within 3 sigma of the
    highest value. Pinned for longer, the run kept going at that level without running out:
    the memory settled (a peak counter such as `max_memory_reserved` stops setting records),
    and the flat end is judged with the rest."""
    at_top = values >= float(values.max()) - 3 * sigma
    if len(values) < 20 or not at_top[-10:].all() or at_top.all():
        return steps, values
    first = len(values) - int(np.argmin(at_top[::-1]))
    if len(values) - first > MAX_PINNED_SHARE * len(values):
        return steps, values
    cut = first + 1
    return (steps[:cut], values[:cut]) if cut >= 10 else (steps, values)


def _fit_memory(x: np.ndarray, y: np.ndarray, candidates: np.ndarray):
    """(_LeakFit, period) with a repeating pattern taken out when it shows at least twice."""
    period, acf = _period(x, y)
    # a pattern seen at least twice, its autocorrelation beyond what noise gives at that length
    groups = period if acf >= max(0.3, 3 / math.sqrt(len(x))) and len(x) >= 2 * period else 1
    width = bin_width(x, len(x))  # the grid `_period` counted points on
    phase = np.floor((x - x[0]) / width + 0.5).astype(np.int64) % groups
    if len(candidates) > 400:  # coarse starts, then every point around the best
        coarse = candidates[np.linspace(0, len(candidates) - 1, 400).astype(int)]
        fit = _leak_fit(x, y, phase, groups, coarse)
        if fit is None:
            return None
        gap = float(coarse[1] - coarse[0])
        candidates = candidates[np.abs(candidates - fit.at) <= 2 * gap]
    fit = _leak_fit(x, y, phase, groups, candidates)
    return None if fit is None else (fit, groups)


class MemoryLeak(Detector, code="LS301", name="memory-leak"):
    """GPU (or host) memory climbs steadily step after step: a leak heading for an OOM.

    Reports the step where the climb starts, its rate per step (Theil–Sen), the Mann–Kendall
    trend test, and an estimated step at which the GPU runs out of memory.

    What it detects:
        `perf/max_memory_reserved_gb` (or `actor/perf/…` in verl ≥ 0.8; allocated memory when
        reserved is absent; host memory `perf/cpu_memory_used_gb` separately) fitted, by least
        squares, as a repeating pattern (the allocator's sawtooth, when its period shows at least
        twice in the autocorrelation of the steps' differences) plus a warm-up rise to a plateau
        (`size·(1 − e^(−t/τ))`, τ from 1 to 60 steps or a quarter of the run, whichever is
        longer) plus a ramp `rate·max(0, step − start)`. A leak is a ramp that keeps rising to the end: it must explain more than the warm-up alone
        (χ² with 2 degrees of freedom at p < `trend_p`, against the residual's noise widened
        for its autocorrelation), add at least `min_rise_gb` (host: `min_rise_host_gb`) and
        `min_rise_sigma` noise sigmas, last at least `min_ramp_steps` steps and `min_fraction`
        of the run, show a Mann–Kendall upward trend (p < `trend_p`) once the pattern and the
        warm-up are taken out, fit better than a single jump (a one-off rise to a new level,
        e.g. when vLLM's cache warms up, is not a leak), and still set new highs (by more than
        the noise) in the last third of the climb (a peak counter whose records stopped has
        settled). A climb not yet seen past the warm-up
        (before what is left of it is under `min_rise_gb`) is reported at info level. A series
        pinned at a ceiling at the end (its last 10 points or more) is fitted up to where it
        reaches it. The projected OOM step extrapolates the Theil–Sen rate to a capacity
        guessed as the smallest usual GPU size (24/40/48/80/94/141 GB) at least 5% above the
        highest value seen: an estimate, since the log does not say which GPU it ran on.

    Why it matters:
        A slow climb (the PPO article: 45 → 48 GB → OOM) ends in a CUDA out-of-memory crash hours
        into the run, usually the vLLM KV cache not being freed between rollouts. The rate
        tells how long the run has left.

    Example:
        step:100 - perf/max_memory_reserved_gb:45.12 ...
        step:300 - perf/max_memory_reserved_gb:46.60 ...
        step:500 - perf/max_memory_reserved_gb:48.07 ...  (+0.0074 GB/step since ~step 100)

    Advice:
        Set `actor_rollout_ref.rollout.free_cache_engine=True` (verl's default, but some images
        do not honour it) and `actor_rollout_ref.rollout.enforce_eager=True` (CUDA graphs keep
        memory), and lower `actor_rollout_ref.rollout.gpu_memory_utilization` into the advised
        range.

    Known false positives:
        Allocator warm-up: memory rising over the first steps to a plateau is fitted as a
        warm-up, not a leak; a climb entangled with a long warm-up (a short run whose memory is
        still settling) is info. Allocator sawtooth: a repeating rise-and-drop is taken out when
        its period shows twice; one seen less than twice (a period longer than half the run)
        is a steady climb in the log and can be reported. PPO critic warm-up: memory metrics start with the actor's
        first update; the fit starts there. `max_memory_*` are peaks: a run whose batches keep
        getting longer (response length growing) raises its peak memory legitimately; check
        `response_length/mean` over the same steps. Host memory grows with Ray object store use
        and dataset caching, hence its larger minimum rise.

    References:
        seed:ppo-tuning §7.3 (reserved memory creeping 45 → 48 GB → OOM; free_cache_engine,
        enforce_eager); seed:grpo-pitfalls §4 (gpu_memory_utilization).
    """

    title = "Memory climbing steadily (leak)"
    concepts = ("gpu_mem_reserved", "gpu_mem_allocated", "cpu_mem_used")
    groups = ("system", "memory")

    min_rise_gb: float = param(0.5, gt=0)
    min_rise_host_gb: float = param(2.0, gt=0)
    min_rise_sigma: float = param(5.0, gt=0)
    trend_p: float = param(0.001, gt=0, le=1)
    min_fraction: float = param(0.1, gt=0, le=1)
    min_ramp_steps: int = param(10, ge=1)
    min_points: int = param(10, ge=1)
    max_points: int = param(2000, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        findings = []
        gpu = self._one(run, ("gpu_mem_reserved", "gpu_mem_allocated"), gpu=True)
        if gpu is not None:
            findings.append(gpu)
        cpu = self._one(run, ("cpu_mem_used",), gpu=False)
        if cpu is not None:
            findings.append(cpu)
        return findings

    def _one(self, run: Run, concepts: tuple[str, ...], gpu: bool) -> Finding | None:
        s = Series.load(run, *concepts, min_points=self.min_points)
        if s is None:
            return None
        metric, steps, values = s.metric, s.steps, s.values
        steps, values = _before_ceiling(steps, values, noise_floor(values, run.value_resolution))
        x, y = binned(steps, values, self.max_points)
        n = len(x)
        span = float(x[-1] - x[0]) if n else 0.0
        if span <= 0 or n < self.min_points:
            return None
        latest = x[-1] - max(self.min_ramp_steps, self.min_fraction * span)
        fitted = _fit_memory(x, y, x[(x > x[0]) & (x <= latest)])
        if fitted is None:
            return None
        fit, period = fitted
        rise = fit.rate * (x[-1] - fit.at)
        sigma = max(mad_sigma(fit.resid), noise_floor(values, run.value_resolution))
        least = self.min_rise_gb if gpu else self.min_rise_host_gb
        if rise < max(least, self.min_rise_sigma * sigma):
            return None
        # the ramp (start and rate) must explain more than the warm-up alone: its drop in the
        # residual sum of squares against χ²(2), in units of the noise variance widened for
        # autocorrelation (autocorrelated noise wanders further than its spread suggests)
        rho = _ar1(fit.resid)
        var = float(fit.rss) / max(1, n - 4 - period) * (1 + rho) / (1 - rho)
        gain = (fit.rss_no_ramp - fit.rss) / max(var, 1e-12)
        from scipy.special import chdtrc  # scipy.stats.chi2.sf's function, ~1.5 s lighter

        if chdtrc(2, max(gain, 0.0)) >= self.trend_p:  # χ²(2) tail
            return None
        adj = fit.adjusted
        # a ramp, not one jump: the ramp must beat the best single level shift
        k, _ = best_split(adj, min_side=3)
        if k > 0:
            rss_step = float(
                ((adj[:k] - adj[:k].mean()) ** 2).sum() + ((adj[k:] - adj[k:].mean()) ** 2).sum()
            )
            if rss_step <= fit.rss:
                return None
        after = x >= fit.at
        z, p = mann_kendall(adj[after])
        if z <= 0 or p >= self.trend_p:
            return None
        rate, _ = theil_sen(x[after], adj[after])
        if rate <= 0:
            return None
        # a leak is still climbing at the end: its last third sets new highs. A series whose
        # highs stopped before it (a peak counter that settled in steps) is not heading for OOM
        xs, ys = x[after], adj[after]
        last = xs >= xs[0] + 2 * (xs[-1] - xs[0]) / 3
        if 3 <= last.sum() < len(xs) and ys[last].max() <= ys[~last].max() + sigma:
            return None
        # a climb seen only while memory still warms up (until what is left of the warm-up is
        # below the smallest rise that counts) is entangled with it: reported at info level
        settled = float(x[0] + fit.tau * math.log(max(fit.warm / least, 1.0)))
        tail = float(x[-1] - max(fit.at, settled))
        entangled = tail < self.min_ramp_steps or rate * tail < max(
            least, self.min_rise_sigma * sigma
        )
        start = self._refine(steps, values, fit.at, span)
        peak = float(values.max())
        last_step = int(steps[-1])
        level_now = float(np.median(values[-max(3, min(20, len(values) // 20)) :]))
        capacity = None
        oom_step = None
        if gpu:
            capacity = next((c for c in GPU_SIZES_GB if c >= peak * 1.05), None)
            if capacity is not None:
                oom_step = int(last_step + max(0.0, capacity - level_now) / rate)
        kind = "GPU" if gpu else "host"
        msg = (
            f"{metric} climbs steadily from step {start}: +{fmt(rate)} GB/step "
            f"(Theil–Sen; +{fmt(rise)} GB since, Mann–Kendall p={p:.1e}), now {fmt(level_now)} GB."
        )
        if oom_step is not None:
            msg += (
                f" At this rate a {capacity:g} GB GPU fills around step {oom_step} "
                f"(estimate: capacity guessed from the highest value seen, {fmt(peak)} GB)."
            )
        elif gpu:
            msg += " No usual GPU size fits the highest value seen, so no OOM step is projected."
        if fit.tau > 0:
            msg += (
                f" Taken out first: a warm-up rise of {fmt(fit.warm)} GB (time constant "
                f"{fmt(fit.tau)} steps)"
                + (" and a repeating pattern (allocator sawtooth)" if period > 1 else "")
                + "."
            )
        elif period > 1:
            msg += " Taken out first: a repeating pattern (allocator sawtooth)."
        if entangled:
            msg += (
                f" The climb is not yet seen past the warm-up (settled about step {settled:.0f}):"
                " it may still be the warm-up's tail."
            )
        advice: list[Advice] = []
        if gpu:
            advice.append(
                advise(
                    run,
                    f"{RO}.free_cache_engine",
                    "A GPU memory peak creeping up every step is the vLLM KV cache not being "
                    "released between rollouts; free_cache_engine frees it (verl's default is "
                    "True, but some images do not honour it — set it explicitly).",
                    f"{SEED_PPO} §7.3",
                    suggest=True,
                )
            )
            advice.append(
                advise(
                    run,
                    f"{RO}.enforce_eager",
                    "CUDA graphs captured by vLLM pin memory across rollouts; eager mode "
                    "avoids them.",
                    f"{SEED_PPO} §7.3",
                    suggest=True,
                )
            )
            mem = gpu_memory_advice(
                run, "Until the leak is fixed, a smaller vLLM share delays the OOM.", always=True
            )
            if mem is not None:
                advice.append(mem)
        else:
            advice.append(
                advise(
                    run,
                    f"{RO}.free_cache_engine",
                    "Host memory climbing each step points at objects kept alive across steps "
                    "(rollout outputs in the Ray object store, offloaded cache); make sure the "
                    "rollout cache is freed after each generation.",
                    f"{SEED_PPO} §7.3",
                    suggest=True,
                )
            )
        evidence: dict[str, Any] = {
            "start_step": start,
            "rate_gb_per_step": rate,
            "rise_gb": rise,
            "level_at_start_gb": float(np.median(values[steps <= start][-5:])),
            "level_now_gb": level_now,
            "max_seen_gb": peak,
            "noise_sigma_gb": sigma,
            "warmup_gb": fit.warm,
            "warmup_time_constant_steps": fit.tau,
            "sawtooth_period_points": period if period > 1 else None,
            "ramp_vs_warmup_chi2": gain,
            "mann_kendall_z": z,
            "mann_kendall_p": p,
            "memory": kind,
            "capacity_guess_gb": capacity,
            "projected_oom_step": oom_step,
            "projection_is_estimate": True,
        }
        return self.finding(
            severity="info" if entangled else self.default_severity,
            message=msg,
            metric=metric,
            step=start,
            end_step=last_step,
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_PPO} §7.3", f"{SEED_GRPO} §4"]),
        )

    def _refine(self, steps: np.ndarray, values: np.ndarray, approx: float, span: float) -> int:
        """The fit again on raw points near the coarse break (long runs are binned)."""
        width = span / max(self.max_points - 1, 1)
        at = approx
        if width > 1.5:
            half = max(40 * width, 50.0)
            win = (steps >= approx - half) & (steps <= approx + half)
            xs = steps[win]
            near = xs[np.abs(xs - approx) <= 15 * width]
            fitted = _fit_memory(xs, values[win], near)
            at = fitted[0].at if fitted is not None else approx
        # the ramp is 0 at the kink: the first step that shows it is the next one
        return int(steps[min(int(np.searchsorted(steps, at + 1e-9)), len(steps) - 1)])


#: what a short excerpt compares generation with when no other phase's time is logged
REST_OF_STEP = "rest-of-step"
#: the agent loop's slowest rollout this many times its mean: a long tail holds the step
LONG_TAIL_RATIO = 1.5
#: the longest response this many times the mean: the tail sets the step's length
LENGTH_TAIL_RATIO = 8


def _top_and_mean(run: Run, top: str, mean: str, start: int, end: int) -> tuple[float, float]:
    """Medians over steps `start`–`end` of concept `top` and of concept `mean` (a positive
    mean), where both are logged; (0, 0) where they never are together."""
    highs = values_by_step(run, top, since=start)
    means = values_by_step(run, mean, since=start)
    both = [s for s in highs if s in means and s <= end and means[s] > 0]
    if not both:
        return 0.0, 0.0
    return float(np.median([highs[s] for s in both])), float(np.median([means[s] for s in both]))


def _long_tail(run: Run, start: int, end: int, gen_s: float) -> str:
    """A sentence on the agent loop's long tail over steps `start`–`end` (the slowest rollout
    ≥ `LONG_TAIL_RATIO` × the mean one and most of `gen_s`), or "" when not logged or none."""
    top, avg = _top_and_mean(run, "agent_gen_slowest", "agent_gen_mean", start, end)
    if not avg or top < LONG_TAIL_RATIO * avg or top < 0.8 * gen_s:
        return ""
    return (
        f" The agent loop's slowest rollout takes {fmt(top)} s against a mean of {fmt(avg)} s "
        f"({top / avg:.1f}×): the step waits about {fmt(top - avg)} s for its long tail."
    )


def _length_tail(run: Run, start: int, end: int) -> str:
    """A sentence when the longest response of a step is `LENGTH_TAIL_RATIO` × its mean or
    more (median over steps `start`–`end`): generation then waits for a few long sequences,
    and the share says more about the responses than about the rollout's settings."""
    longest, avg = _top_and_mean(run, "response_length_max", "response_length_mean", start, end)
    if not avg or longest < LENGTH_TAIL_RATIO * avg:
        return ""
    return (
        f" The longest response of a step ({longest:,.0f} tokens, median) is "
        f"{longest / avg:.0f}× the mean ({avg:,.0f}): each step waits for its few longest "
        "sequences, which rollout memory and batching do not shorten. This is the cost of "
        "long responses, not a slow engine; a tighter `data.max_response_length` or an "
        "overlong filter shortens the tail."
    )


class RolloutBottleneck(Detector, code="LS302", name="rollout-bottleneck"):
    """Generation (rollout) takes most of every step and dwarfs the other phases.

    Judged by generation's share of the step time and by how it compares with the next slowest
    phase, not by an absolute number of seconds (any 7B run spends more than 5 s generating).

    What it detects:
        `timing_s/gen` ÷ `timing_s/step` (median over a lasting stretch, with the seconds of
        validation and checkpoint saving taken out of the step time where they are in it, and
        the PPO critic's warm-up steps before the actor's first update left out) at or above
        `min_share`, with generation at least `min_ratio` × the slowest
        other phase (`update_actor`, `old_log_prob`, `ref`, `update_critic`, …). When the share
        rose mid-run the start is the best upward shift of the share; otherwise the first step.
        Dynamic sampling (DAPO: `algorithm.filter_groups.enable`, or generation alone jumping
        ≥ 1.5× between steps in a tenth of them) repeats generation a varying number of rounds
        per step; the share is then also judged as if each step had sampled once (gen ÷
        `train/num_gen_batches` when logged, else the lowest gen ÷ other-phases ratio over the
        next `round_window` steps), and is a warning only when that one-round share is at least
        `min_share` and, rounds not logged, they stopped showing over at least `round_window`
        steps (generation no longer jumps ≥ 1.3× between steps in a tenth of them): otherwise
        it is info, a cost of the recipe. Evidence: the
        share and gen seconds before and after, the slowest other phase, the one-round share. A
        run with fewer than `min_duration` timed steps (an excerpt) is judged on the same two
        rules over all its steps, the same seconds taken out; when it logs no other phase's
        time, the rest of the step (step − gen) bounds the slowest other phase. There a pass
        of either rule by less than `short_margin` (5%: a step's split wanders by about ±3%
        from one step to the next) is info, and when the agent loop logs its slowest and mean
        rollout the message names the long tail the step waits for. Whether
        `timing_s/step` holds `timing_s/testing` and `timing_s/save_checkpoint` depends on the
        verl release (inside the step timer in some, after it in others): a step's own
        accounting decides — they are inside when the step time is closer to the other
        phases' sum plus them than to that sum alone (a step without other phases counts them
        as inside, verl#3116).

    Why it matters:
        Rollout is the largest phase of PPO/GRPO; when it dominates, the trainer GPUs idle while
        vLLM generates. The PPO article's settings took `timing_s/gen` from 5.72 s to 3.21 s
        (2.45 s with TP=2) and throughput from 842 to 1176 tokens/s, without touching the
        actor's learning rate.

    Example:
        step:50 - timing_s/gen:41.8 - timing_s/update_actor:9.7 - timing_s/step:58.3 ...
        (generation is 72% of the step and 4.3× the actor update)

    Advice:
        Raise `actor_rollout_ref.rollout.gpu_memory_utilization` within the range for this
        run's GPUs and model (0.4–0.5 on one GPU, 0.3–0.4 with 8-GPU FSDP, up to 0.65 for small
        models; above 0.7 risks OOM); raise `rollout.max_num_seqs` and
        `rollout.max_num_batched_tokens` together (8192/1024 → 16384/1896 gave +22%); use
        tensor parallelism for generation (`rollout.tensor_model_parallel_size=2` on two GPUs
        cut gen time 3.21 → 2.45 s) when the model supports it. In verl's one-step-off recipe
        (its own `rollout.n_gpus_per_node` pool) generation overlaps the previous update, so the
        share is the trainer's wait: move GPUs from the trainer to the rollout when response
        lengths are uniform, fix the stopping criteria when a long tail holds the step
        (docs/advance/one_step_off.md, Dynamic Resource Tuning).

    Known false positives:
        A share below `warn_share` (three quarters) is info: rollout is the largest phase of
        most LLM RL runs, and 60–75% of the step is their usual split, a lever for speed rather
        than a fault. Dynamic sampling: a share high because of repeated sampling rounds is info,
        not a warning (see above); rounds that stay at their maximum on every step look like a slow
        rollout. PPO critic warm-up: its steps (no actor update) are left out. Runs with very
        long responses (long reasoning chains) are generation-bound by nature, and the share
        grows as responses lengthen; the advice still applies but gains are smaller.
        Async/agent-loop rollouts overlap generation with other work, so their share overstates
        the cost.

    References:
        seed:ppo-tuning §2, §2.1, §2.2, §5.3 (gpu_memory_utilization 0.4 → 0.65,
        max_num_seqs/max_num_batched_tokens, TP=2); seed:grpo-pitfalls §4.2 (ranges by GPU
        count).
    """

    title = "Generation dominates the step time"
    concepts = ("time_gen",)
    requires = ("time_gen", "time_step")
    groups = ("system", "throughput")

    min_share: float = param(0.6, gt=0, le=1)
    warn_share: float = param(0.75, gt=0, le=1)
    min_ratio: float = param(2.0, gt=0)
    min_duration: int = param(10, ge=1)
    min_fraction: float = param(0.1, gt=0, le=1)
    round_window: int = param(20, ge=1)
    max_points: int = param(2000, ge=1)
    short_margin: float = param(0.05, ge=0, lt=1)

    def detect(self, run: Run) -> list[Finding]:
        pair = Series.pair(run, "time_gen", "time_step")
        if pair is None:
            return []
        gen_series, step_series, steps = pair
        gen_name, step_name = gen_series.metric, step_series.metric
        if len(steps) < max(self.min_duration, 6):
            return self._short(run, gen_series, step_series, steps)
        gen = gen_series.at(steps)
        # a step's time includes validation and checkpoint saving when they ran: take them out
        total = step_series.at(steps) - _extra_seconds(run, steps)
        ok = np.isfinite(gen) & np.isfinite(total) & (total > 0) & (gen <= 1.05 * total)
        steps, gen, total = steps[ok], gen[ok], total[ok]
        if len(steps) < max(self.min_duration, 6):
            return []
        # the critic's warm-up steps (no actor update yet) are shorter: judge the steps after it
        actor = _actor_start(run, steps)
        if actor is not None and (steps >= actor).sum() >= max(self.min_duration, 6):
            keep = steps >= actor
            steps, gen, total = steps[keep], gen[keep], total[keep]
        share = np.clip(gen / total, 0.0, 1.5)
        basis, rounds = self._one_round_share(run, steps, gen, total)
        others = {}
        for phase, name in _phase_metrics(run).items():
            if name == gen_name or phase == "gen":
                continue
            s = Series.read(run, name)
            if len(s):
                others[phase] = s.at(steps)
        x, bs = binned(steps, basis, self.max_points)
        start_i = 0
        k, score = best_split(bs, min_side=max(3, len(bs) // 20), direction=+1)
        if k > 0 and score > 6:
            before, after = np.median(bs[:k]), np.median(bs[k:])
            if before < self.min_share <= after:
                start_i = k
        start_x = float(x[start_i])
        sel = steps >= start_x
        if (steps[sel][-1] - start_x) < max(
            self.min_duration, self.min_fraction * (steps[-1] - steps[0])
        ):
            return []
        share_after = float(np.median(share[sel]))
        basis_after = float(np.median(basis[sel]))
        if share_after < self.min_share:
            return []
        gen_after = float(np.median(gen[sel]))
        slowest, slowest_s = None, 0.0
        for phase, vals in others.items():
            v = vals[sel]
            v = v[np.isfinite(v)]
            if len(v) and float(np.median(v)) > slowest_s:
                slowest, slowest_s = phase, float(np.median(v))
        if slowest is not None and gen_after < self.min_ratio * slowest_s:
            return []
        start = int(steps[sel][0])
        if start_i > 0:
            # refine on raw points near the coarse split
            half = max(10.0, 3 * float(np.median(np.diff(x))))
            win = (steps >= start_x - half) & (steps <= start_x + half)
            if rounds == "inferred":  # the first step from which every step's share stays up
                # (the floor looks `round_window` steps ahead, so it may rise that much early)
                win = (steps >= start_x - half) & (steps <= start_x + self.round_window + half)
                floor = share_after - max(3 * mad_sigma(share[sel]), 0.02)
                low = np.flatnonzero(share[win] < floor)
                kk = int(low[-1]) + 1 if len(low) else 0
                kk = kk if kk < int(win.sum()) else -1
            else:
                kk, _ = best_split(basis[win], min_side=3, direction=+1)
            if kk > 0:
                start = int(steps[win][kk])
        # rounds still varying after the start (generation alone jumping ≥ 1.3× between steps
        # in a tenth of them) explain a high share; a share high on every step does not
        after = steps >= start
        rest = np.maximum(total[after] - gen[after], 1e-9)
        jumps = np.abs(np.diff(np.log(np.maximum(gen[after], 1e-9) / rest)))
        # (judged over `round_window` steps at least: fewer cannot tell the rounds apart)
        varying = None
        if rounds == "inferred" and len(jumps) + 1 < self.round_window:
            varying = (
                f" Only {plural(len(jumps) + 1, 'step')} after it: too few to tell a slow rollout from "
                "repeated rounds."
            )
        elif rounds == "inferred" and float(np.mean(jumps > math.log(1.3))) >= 0.1:
            varying = (
                " The rounds keep varying after it (generation alone jumps ≥ 1.3× between steps)."
            )
        share_before = float(np.median(share[steps < start])) if start_i > 0 else None
        finding = self._finding(
            run,
            gen_name,
            step_name,
            start,
            int(steps[-1]),
            share_after,
            share_before,
            gen_after,
            float(np.median(total[sel])),
            slowest,
            slowest_s,
            one_round=None if rounds == "once" else basis_after,
            varying=varying,
        )
        return [finding]

    def _one_round_share(
        self, run: Run, steps: np.ndarray, gen: np.ndarray, total: np.ndarray
    ) -> tuple[np.ndarray, str]:
        """Generation's share as if each step had sampled once, and how rounds are known:
        "once" (no repeated rounds), "logged" or "inferred".

        With `train/num_gen_batches` logged: gen ÷ rounds. Otherwise, when rounds repeat, the
        lowest gen ÷ other-phases ratio over the next `round_window` steps (a step with one
        round is usually among them).
        """
        rest = total - gen
        rounds = _gen_rounds(run, steps)
        if rounds is not None and (rounds > 1).any():
            g1 = gen / rounds
            return np.clip(g1 / (g1 + rest), 0.0, 1.5), "logged"
        if not _repeated_generation(run, gen, rest):
            return np.clip(gen / total, 0.0, 1.5), "once"
        ratio = _leading_min(gen / np.maximum(rest, 1e-9), self.round_window)
        return ratio / (1 + ratio), "inferred"

    def _short(
        self, run: Run, gen_series: Series, step_series: Series, steps: np.ndarray
    ) -> list[Finding]:
        """Too few steps for a lasting stretch: the median over the steps that did not also run
        validation or save a checkpoint (their step time is not the rollout's story)."""
        if len(steps) == 0:
            return []
        gen, total = gen_series.at(steps), step_series.at(steps)
        extra = _extra_seconds(run, steps)
        total = total - extra  # validation and checkpoint saving are not the step's own work
        ok = np.isfinite(gen) & np.isfinite(total) & (total > 0) & (gen <= 1.05 * total)
        if not ok.any():
            return []
        steps, gen, total, extra = steps[ok], gen[ok], total[ok], extra[ok]
        share = float(np.median(gen / total))
        if share < self.min_share:
            return []
        gen_s = float(np.median(gen))
        slowest, slowest_s = None, 0.0
        for phase, name in _phase_metrics(run).items():
            if name == gen_series.metric or phase == "gen":
                continue
            v = Series.read(run, name).at(steps)
            v = v[np.isfinite(v)]
            if len(v) and float(np.median(v)) > slowest_s:
                slowest, slowest_s = phase, float(np.median(v))
        if slowest is None:  # no other phase logged: the rest of the step bounds them all
            slowest, slowest_s = REST_OF_STEP, float(np.median(total - gen))
            if slowest_s <= 0.02 * float(np.median(total)):
                return []  # no time left for the other phases: not a split of the step
        if gen_s < self.min_ratio * slowest_s:
            return []  # one step needs both rules
        finding = self._finding(
            run,
            gen_series.metric,
            step_series.metric,
            int(steps[0]),
            int(steps[-1]),
            share,
            None,
            gen_s,
            float(np.median(total)),
            slowest,
            slowest_s,
            short=len(steps),
            extra_s=float(np.median(extra)),
            near=share < self.min_share * (1 + self.short_margin)
            or gen_s < self.min_ratio * (1 + self.short_margin) * slowest_s,
        )
        return [finding]

    def _finding(
        self,
        run: Run,
        gen_name: str,
        step_name: str,
        start: int,
        end: int,
        share: float,
        share_before: float | None,
        gen_s: float,
        step_s: float,
        slowest: str | None,
        slowest_s: float,
        short: int | None = None,
        one_round: float | None = None,
        varying: str | None = None,
        extra_s: float = 0.0,
        near: bool = False,
    ) -> Finding:
        if short is None:
            msg = f"Generation ({gen_name}) takes {share:.0%} of each step from step {start} "
            msg += f"(median {fmt(gen_s)} s of {fmt(step_s)} s)"
        else:
            where = f"step {start}" if short == 1 else f"steps {start}–{end}"
            msg = (
                f"Generation ({gen_name}) takes {share:.0%} of the step time in {where} "
                f"(median {fmt(gen_s)} s of {fmt(step_s)} s"
                + (
                    f", once the {fmt(extra_s)} s of validation and checkpoint saving in "
                    f"{step_name} are taken out)"
                    if extra_s > 0
                    else ")"
                )
            )
        if share_before is not None:
            msg += f", up from {share_before:.0%} before"
        if slowest == REST_OF_STEP:
            msg += f"; all other phases together take {fmt(slowest_s)} s "
            msg += f"({fmt(gen_s / max(slowest_s, 1e-9))}× less; no other phase's time is logged)."
        elif slowest is not None:
            msg += f"; the slowest other phase, {slowest}, takes {fmt(slowest_s)} s "
            msg += f"({fmt(gen_s / max(slowest_s, 1e-9))}× less)."
        else:
            msg += "."
        severity = self.default_severity
        if one_round is not None:
            msg += (
                f" Generation repeats a varying number of sampling rounds per step (dynamic "
                f"sampling); on the steps with the fewest rounds it takes {one_round:.0%}."
            )
            if varying:
                msg += varying
            if one_round < self.min_share or varying:
                severity = "info"
            if one_round < self.min_share or (varying and "keep varying" in varying):
                msg += (
                    " Repeated rounds explain the share: a cost of the recipe, not a slow rollout."
                )
        if near:
            msg += (
                f" It passes the rules ({self.min_share:.0%} of the step, {self.min_ratio:g}× "
                f"the next phase) by less than {self.short_margin:.0%}, about the wander of a "
                "step's split from one step to the next: watch more steps before acting."
            )
            severity = "info"
        if share < self.warn_share and severity != "info":
            msg += (
                f" Below {self.warn_share:.0%} this is the usual split of LLM RL, where rollout is "
                "the largest phase: a lever for speed, not a fault."
            )
            severity = "info"
        tail = _long_tail(run, start, end, gen_s)
        if tail:
            msg += tail
        lengths = _length_tail(run, start, end)
        if lengths:
            msg += lengths
            severity = "info"
        config = run.config()
        size = model_size_b(config) if config else None
        gpus = n_gpus(config) if config else None
        evidence: dict[str, Any] = {
            "start_step": start,
            "gen_share_of_step": share,
            "gen_share_before": share_before,
            "gen_seconds": gen_s,
            "step_seconds": step_s,
            "slowest_other_phase": slowest,
            "slowest_other_phase_seconds": slowest_s,
            "n_gpus": gpus,
            "model_size_b": size,
        }
        if short is not None:
            evidence["judged_on"] = (
                f"{plural(short, 'step')}, validation and checkpoint seconds taken out"
            )
            evidence["validation_checkpoint_seconds"] = extra_s
        if one_round is not None:
            evidence["gen_share_fewest_rounds"] = one_round
        advice = _rollout_speed_advice(run)
        references = [f"{SEED_PPO} §2", f"{SEED_GRPO} §4.2"]
        if one_step_off(run):
            msg += (
                " This is one-step-off training: generation overlaps the previous step's update, "
                f"so {gen_name} is the trainer waiting for it. verl's tuning rule: with uniform "
                "response lengths give the rollout more GPUs; with a long tail, fix the stopping "
                "criteria (a few long responses hold the step)."
            )
            evidence["one_step_off"] = True
            advice = [*split_advice(run, "trainer", "rollout", min(share, 0.9)), *advice]
            references.insert(0, SRC_ONE_STEP_OFF)
        return self.finding(
            severity=severity,
            message=msg,
            metric=gen_name,
            step=start,
            end_step=end,
            evidence=evidence,
            advice=advice,
            references=cite_all(references),
        )


SRC_ONE_STEP_OFF = "verl:docs/advance/one_step_off (Dynamic Resource Tuning)"


def one_step_off(run: Run) -> bool:
    """verl's one-step-off recipe: its own rollout GPU pool (a top-level `rollout` block with
    `n_gpus_per_node`) without the fully-async recipe's `async_training` block."""
    pool = run.config_value("rollout.n_gpus_per_node")
    return isinstance(pool, int) and not isinstance(run.config_value("async_training"), dict)


def _rollout_speed_advice(run: Run) -> list[Advice]:
    """A larger vLLM memory share, larger vLLM batches, and tensor parallelism."""
    bound, range_text = gpu_memory_bound(run)
    advice: list[Advice] = [
        advise(
            run,
            f"{RO}.gpu_memory_utilization",
            "A larger vLLM share holds more sequences in the KV cache at once, so each "
            f"rollout needs fewer passes; advised range here: {range_text} (above 0.7 risks "
            "OOM). The PPO article took it 0.4 → 0.65 on Qwen2.5-0.5B: generation time 5.72 → "
            "3.21 s.",
            f"{SEED_PPO} §2.1; {SEED_GRPO} §4.2",
            suggest=lambda cur: bound if float(cur) < bound else None,
            rule="0.4–0.5 on one GPU, 0.3–0.4 with 8-GPU FSDP, up to 0.65 for small models; ≤ 0.7",
        ),
    ]
    for key, factor_text in (
        (f"{RO}.max_num_batched_tokens", "8192 → 16384"),
        (f"{RO}.max_num_seqs", "1024 → 1896"),
    ):
        advice.append(
            advise(
                run,
                key,
                "Change max_num_seqs and max_num_batched_tokens together, so tokens ÷ seqs "
                "stays near the mean prompt+response length; the PPO article doubled both "
                f"({factor_text}) for +22% throughput.",
                f"{SEED_PPO} §2.2",
                suggest=lambda cur: int(cur) * 2,
                rule="double together with its partner",
            )
        )
    tp_key = f"{RO}.tensor_model_parallel_size"
    tp = current_value(run, tp_key)
    per_node = current_value(run, "trainer.n_gpus_per_node")
    suggest_tp = None
    try:
        if tp is not None and per_node is not None and int(per_node) >= 2 * int(tp):
            suggest_tp = 2 * int(tp)
    except (TypeError, ValueError):
        suggest_tp = None
    advice.append(
        advise(
            run,
            tp_key,
            "Tensor parallelism splits generation over GPUs (the PPO article: TP=2 on two GPUs "
            "cut gen time 3.21 → 2.45 s), if the model supports it.",
            f"{SEED_PPO} §5.3",
            suggest=suggest_tp,
            rule="2 on a 2-GPU node (a divisor of trainer.n_gpus_per_node)",
        )
    )
    return advice


#: how much the mean response length must vary (90th / 10th percentile) before throughput is
#: judged per length
LENGTH_SPREAD = 1.3


def _per_length(
    run: Run, steps: np.ndarray, values: np.ndarray, note: str
) -> tuple[np.ndarray, str]:
    """Throughput with its trend on the mean response length taken out, when responses grow or
    shrink a lot: generation slows per token as sequences lengthen (throughput ∝ length^b,
    b from −1 to 0 by Theil–Sen on the logs), which is no drop."""
    length = Series.load(run, "response_length_mean")
    if length is None:
        return values, note
    x = length.at(steps)
    ok = np.isfinite(x) & (x > 0)
    if ok.mean() < 0.9:
        return values, note
    lo, hi = np.percentile(x[ok], [10, 90])
    if hi < LENGTH_SPREAD * lo:
        return values, note
    lx, ly = np.log(x[ok]), np.log(values[ok])
    b, _ = theil_sen(lx, ly)
    b = min(0.0, max(-1.0, b))
    if b > -0.05:
        return values, note
    out = values.copy()
    out[ok] = np.exp(ly - b * (lx - np.median(lx)))
    return out, note + f" (per response length: throughput ∝ length^{b:.2f} taken out)"


class ThroughputDrop(Detector, code="LS303", name="throughput-drop"):
    """Throughput drops (or step time rises) to a new level and stays there.

    A lasting level shift, not a single slow step: validation and checkpoint seconds are taken
    out and isolated spikes are filtered before changepoints are searched.

    What it detects:
        Changepoints (ruptures KernelCPD, penalty from the series' own noise) in the log of
        throughput: `perf/throughput`, else tokens per second (`perf/total_num_tokens`,
        `global_seqlen/mean` or prompt + response length, ÷ `timing_s/step`), else the step time
        itself. When the mean response length varies (its 90th percentile ≥ 1.3× its 10th),
        throughput's trend on it is taken out first (throughput ∝ length^b, b between −1 and 0
        by Theil–Sen on the logs): generation slows per token as sequences lengthen.
        Validation and checkpoint seconds (`timing_s/testing`,
        `timing_s/save_checkpoint`, logged only on those steps) are taken out of the step time;
        isolated spikes are clipped to a 5-step rolling median. Under dynamic sampling (DAPO:
        `algorithm.filter_groups.enable`, or generation alone jumping ≥ 1.5× between steps in a
        tenth of them) generation is counted once per step (`train/num_gen_batches`) or, when
        the rounds are not logged, left out of the step time. The PPO critic's warm-up steps
        (before the first `timing_s/update_actor`, or `trainer.critic_warmup`) are a segment of
        their own, not compared with the steps after. A change counts when the level right
        after it is at least `min_change` worse (relative) than right before and than the
        previous segment (at least `min_duration` steps of it), and the worse level lasts
        (through later segments, until a recovery) at least `min_duration` steps and
        `min_fraction` of the run. Evidence: levels before and after, and which timing phase
        grew the most.

    Why it matters:
        A run that suddenly takes longer per step burns GPU hours: a 30% drop over the rest of
        a long run costs as much as a third more hardware. The phase that grew points at the
        cause (generation: vLLM memory pressure or preemption; update: offload; everything: a
        slow node or storage).

    Example:
        step:399 - perf/throughput:1182 - timing_s/gen:31.0 - timing_s/step:60.1 ...
        step:401 - perf/throughput:846 - timing_s/gen:52.2 - timing_s/step:83.9 ...

    Advice:
        When generation grew: keep the KV cache from thrashing — `rollout.free_cache_engine=True`
        and `rollout.gpu_memory_utilization` in the advised range. Otherwise check what changed
        at that step (a restart with a different config, another job on the node).

    Known false positives:
        Response length: step time grows with tokens, so throughput (tokens/s) is judged when
        tokens are logged, per response length when that varies; a drop that comes exactly
        with a jump in length is partly taken for the length's. PPO critic warm-up: the actor's first update lengthens every later step; the
        warm-up is not compared with them. Dynamic sampling: more rounds as the score rises
        lengthen the step; generation is counted once or left out. Checkpoint and validation
        steps: their seconds are taken out. A planned change (a curriculum stage with longer
        prompts) shows the same shape.

    References:
        seed:ppo-tuning §2 (rollout is the largest phase; gen time and throughput figures);
        verl:trainer/ppo/metric_utils.py (compute_throughout_metrics: tokens / (time × GPUs)).
    """

    title = "Lasting drop in throughput"
    concepts = ("throughput", "time_per_step")
    groups = ("system", "throughput")

    min_change: float = param(0.15, gt=0)
    min_duration: int = param(10, ge=1)
    min_fraction: float = param(0.05, gt=0, le=1)
    penalty_scale: float = param(3.0, gt=0)
    max_drift_ratio: float = param(0.8, gt=0)
    max_points: int = param(2000, ge=1)
    max_findings: int = param(3, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        series = self._series(run)
        if series is None:
            return []
        metric, sign, steps, values, note = series
        pos = np.isfinite(values) & (values > 0)
        steps, values = steps[pos], values[pos]
        if sign < 0:
            values, note = _per_length(run, steps, values, note)
        # the critic's warm-up steps (no actor update yet) are shorter: a segment of their own
        actor = _actor_start(run, steps)
        bounds = [steps < actor, steps >= actor] if actor is not None else [steps == steps]
        findings: list[Finding] = []
        for part in bounds:
            for f in self._drops(run, metric, sign, steps[part], values[part], note):
                if len(findings) < self.max_findings:
                    findings.append(f)
        return findings

    def _series(self, run: Run) -> tuple[str, int, np.ndarray, np.ndarray, str] | None:
        """(label, sign, steps, values, note): throughput (sign −1) or step time (+1), with
        validation and checkpoint seconds taken out, per token when tokens are logged, and
        without generation when its sampling rounds vary step to step."""
        step_time = Series.read(run, resolve(run, "time_step"))
        t_name, ts, tv = step_time.metric, step_time.steps, step_time.values
        if len(ts) < 2 * self.min_duration:
            thr = Series.read(run, resolve(run, "throughput"))
            return (thr.metric, -1, thr.steps, thr.values, "") if len(thr) else None
        total = tv - _extra_seconds(run, ts)
        gen = Series.read(run, resolve(run, "time_gen")).at(ts)
        rounds = _gen_rounds(run, ts)
        note = ""
        label = t_name
        if np.isfinite(gen).sum() >= 10 and rounds is not None and (rounds > 1).any():
            total = total - gen + gen / rounds
            label = f"{t_name} with generation counted once"
            note = f" (generation counted once per step: {name_of(run, 'gen_batches')} rounds vary)"
        elif np.isfinite(gen).sum() >= 10 and _repeated_generation(
            run, np.nan_to_num(gen), np.nan_to_num(total - gen)
        ):
            total = total - gen
            label = f"{t_name} − {name_of(run, 'time_gen')}"
            note = (
                " (generation left out: it repeats a varying number of sampling rounds per "
                "step, jumping ≥ 1.5× between steps)"
            )
        thr_name = resolve(run, "throughput")
        if label == t_name and thr_name is not None:  # tokens / step time, as verl logs it
            thr = Series.read(run, thr_name).at(ts)
            if np.isfinite(thr).mean() > 0.9:
                return thr_name, -1, ts, _ratio(thr * tv, total), note
        tokens, tok_name = self._tokens(run, ts, tv)
        if tokens is not None:
            return f"{tok_name} ÷ ({label})", -1, ts, _ratio(tokens, total), note
        return label, +1, ts, total, note

    @staticmethod
    def _tokens(run: Run, ts: np.ndarray, tv: np.ndarray) -> tuple[np.ndarray | None, str]:
        """Tokens of each step (any unit proportional to them) and what they come from."""
        for name in profile_of(run).names("step_tokens"):
            tok = Series.read(run, name).at(ts)
            if np.isfinite(tok).mean() > 0.9:
                return tok, name
        thr_name = resolve(run, "throughput")
        thr = Series.read(run, thr_name).at(ts)
        if np.isfinite(thr).mean() > 0.9:
            return thr * tv, f"{thr_name} × step time"
        parts = [
            Series.read(run, resolve(run, c)).at(ts)
            for c in ("prompt_length_mean", "response_length_mean")
        ]
        tok = parts[0] + parts[1]
        if np.isfinite(tok).mean() > 0.9:
            return tok, "(prompt + response length)"
        return None, ""

    def _drops(
        self,
        run: Run,
        metric: str,
        sign: int,
        steps: np.ndarray,
        values: np.ndarray,
        note: str,
    ) -> list[Finding]:
        """Lasting level shifts of one stretch of the series."""
        if len(steps) < 2 * self.min_duration:
            return []
        logv = np.log(values)
        # isolated slow steps are clipped to the local level, so only lasting shifts remain
        base = running_median(logv, 5)
        noise = robust_sigma(logv)
        filt = np.clip(logv, base - 3 * noise, base + 3 * noise)
        x, y = binned(steps, filt, self.max_points)
        n = len(x)
        span = float(x[-1] - x[0])
        cps = changepoints(y, penalty_scale=self.penalty_scale, min_size=max(3, n // 200))
        bounds = [0, *cps, n]
        need = max(self.min_duration, self.min_fraction * span)
        findings: list[Finding] = []
        for i, cp in enumerate(cps):
            seg_prev = (bounds[i], cp)
            seg_next = (cp, bounds[i + 2])
            w = max(3, min(cp - seg_prev[0], seg_next[1] - cp, max(3, n // 40)))
            before = float(np.median(y[max(seg_prev[0], cp - w) : cp]))
            after = float(np.median(y[cp : min(seg_next[1], cp + w)]))
            delta = sign * (after - before)
            if delta < math.log1p(self.min_change) or delta < 4 * noise / math.sqrt(w):
                continue
            # lasting: the following segments stay at the worse level (until a recovery)
            end = seg_next[1]
            j = i + 2
            while j < len(bounds) - 1:
                nxt = float(np.median(y[bounds[j] : bounds[j + 1]]))
                if sign * (nxt - before) < 0.5 * math.log1p(self.min_change):
                    break
                end = bounds[j + 1]
                j += 1
            # and the lasting level is worse than the whole previous segment's, not only than
            # the few points before the change (an autocorrelated series wanders)
            seg_level = float(np.median(y[cp:end]))
            lo = int(np.searchsorted(x, x[cp] - self.min_duration))  # a short excursion is
            prev_level = float(np.median(y[min(seg_prev[0], lo) : cp]))  # not the level before
            if sign * (seg_level - prev_level) < math.log1p(self.min_change):
                continue
            last = x[end - 1]
            if last - x[cp] + 1 < need:
                continue
            if self._drift(x, y, cp, end):
                continue
            step = self._refine(steps, logv, float(x[cp]), x, sign)
            findings.append(
                self._finding(run, metric, sign, step, int(last), before, after, seg_level, note)
            )
            if len(findings) >= self.max_findings:
                break
        return findings

    def _drift(self, x: np.ndarray, y: np.ndarray, cp: int, end: int) -> bool:
        """Whether a straight line fits the `2 × min_duration` steps on each side of the change
        nearly as well as a step does (RSS ratio ≥ `max_drift_ratio`): a drift, not a drop."""
        half = 2 * self.min_duration
        win = np.arange(len(x))
        win = win[(x >= x[cp] - half) & (x <= x[cp] + half) & (win < end)]
        before, after = win[win < cp], win[win >= cp]
        if len(before) < 3 or len(after) < 3:
            return False
        rss_step = float(((y[before] - np.median(y[before])) ** 2).sum())
        rss_step += float(((y[after] - np.median(y[after])) ** 2).sum())
        xw, yw = x[win] - x[win].mean(), y[win]
        slope = float((xw * (yw - yw.mean())).sum() / max(float((xw * xw).sum()), 1e-12))
        rss_line = float(((yw - yw.mean() - slope * xw) ** 2).sum())
        return rss_step >= self.max_drift_ratio * rss_line

    def _refine(
        self, steps: np.ndarray, logv: np.ndarray, approx: float, x: np.ndarray, sign: int
    ) -> int:
        width = float(np.median(np.diff(x))) if len(x) > 1 else 1.0
        half = max(8.0, 3 * width)
        win = (steps >= approx - half) & (steps <= approx + half)
        ws = steps[win]
        if len(ws) < 8:
            return int(steps[min(int(np.searchsorted(steps, approx - 1e-9)), len(steps) - 1)])
        wv = running_median(logv[win], 3)
        k, _ = best_split(wv, min_side=3, direction=sign)
        if k < 0:
            return int(ws[min(int(np.searchsorted(ws, approx - 1e-9)), len(ws) - 1)])
        return int(ws[k])

    def _finding(
        self,
        run: Run,
        metric: str,
        sign: int,
        step: int,
        end: int,
        before_log: float,
        after_log: float,
        seg_log: float,
        note: str = "",
    ) -> Finding:
        before, after, seg = math.exp(before_log), math.exp(after_log), math.exp(seg_log)
        rel = after / before - 1
        what = "drops" if sign < 0 else "rises"
        msg = (
            f"{metric}{note} {what} from {fmt(before)} to {fmt(after)} at step {step} "
            f"({rel:+.0%}) and stays there (median {fmt(seg)} through step {end})."
        )
        grew = self._phase_growth(run, step)
        uniform = None
        if grew:
            total = sum(g["before_s"] for g in grew) or 1.0
            ratios = [
                g["after_s"] / g["before_s"]
                for g in grew
                if g["before_s"] >= 0.05 * total and g["before_s"] > 0
            ]
            if len(ratios) >= 2 and max(ratios) > 1.1 and min(ratios) >= 0.75 * max(ratios):
                uniform = float(np.median(ratios))
        if uniform is not None:
            msg += (
                f" Every phase slowed by about ×{uniform:.2f} (generation, log-probs and updates "
                "alike): the cause is outside any one phase — the node, storage, network or "
                "another job."
            )
        elif grew:
            top = grew[0]
            msg += (
                f" The phase that grew most: {top['phase']} ({fmt(top['before_s'])} → "
                f"{fmt(top['after_s'])} s)."
            )
        advice: list[Advice] = []
        if uniform is None and grew and grew[0]["phase"] == "gen":
            advice.append(
                advise(
                    run,
                    f"{RO}.free_cache_engine",
                    "Generation got slower and stayed slow: vLLM preempting sequences or "
                    "recomputing its cache under memory pressure looks like this; make sure the "
                    "cache is freed between rollouts.",
                    f"{SEED_PPO} §7.3",
                    suggest=True,
                )
            )
            mem = gpu_memory_advice(
                run,
                "Keep the vLLM share in the advised range so the trainer side is not pushed "
                "into CPU offload (3–5× slower).",
                always=False,
            )
            if mem is not None:
                advice.append(mem)
        changed = [s for s in run.config_segments[1:] if abs(s.first_step - step) <= 5]
        note = (
            f" A new config segment starts at step {changed[0].first_step} (a restart): compare "
            "its settings with the previous one."
            if changed
            else ""
        )
        advice.append(
            advise(
                run,
                "trainer.n_gpus_per_node",
                "A lasting slowdown with no config change usually comes from outside the run "
                "(another job on the node, a slow disk or network, a GPU throttling); check the "
                f"node at that step.{note}",
                "verl:trainer/ppo/metric_utils.py",
                suggest=None,
                rule="unchanged; look for what changed on the hardware at that step",
            )
        )
        evidence = {
            "change_step": step,
            "level_before": before,
            "level_after": after,
            "level_rest_of_segment": seg,
            "relative_change": rel,
            "segment_end_step": end,
            "phase_growth": grew[:3],
        }
        return self.finding(
            message=msg,
            metric=metric,
            step=step,
            end_step=end,
            evidence=evidence,
            advice=advice,
            references=cite_all(["verl:trainer/ppo/metric_utils.py", f"{SEED_PPO} §2"]),
        )

    def _phase_growth(self, run: Run, step: int, window: int = 20) -> list[dict[str, Any]]:
        """Timing phases ranked by how many seconds they grew across `step`."""
        out = []
        for phase, name in _phase_metrics(run).items():
            logged = Series.read(run, name)
            s, v = logged.steps, logged.values
            b = v[(s < step) & (s >= step - window)]
            a = v[(s >= step) & (s < step + window)]
            if len(b) >= 2 and len(a) >= 2:
                out.append(
                    {
                        "phase": phase,
                        "before_s": float(np.median(b)),
                        "after_s": float(np.median(a)),
                    }
                )
        out.sort(key=lambda d: d["before_s"] - d["after_s"])
        return out
