"""Reward-curve diagnoses: sawtooth oscillation, plateau, validation falling while training rises."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist
from typing import Any

import numpy as np

from logscope import verl_config
from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.aliases import VALIDATION_PREFIXES, name_of, validation_metrics
from logscope.detector import Detector, param
from logscope.health import values_by_step
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import ACT

from ._consequences import RootCause, constant_score, root_cause
from ._fits import hinge_fit, isotonic_prefix_fit, line_at, line_rss, poly_prefix_fit
from ._series import (
    Series,
    bin_width,
    binned,
    moving_average,
    moving_averages,
    noise_floor,
    regular_grid,
)
from ._stats import fmt, mad_sigma, mann_kendall, theil_sen

#: matrix cells the sawtooth period scores compute at once (rows of periods × grid points)
_SCORE_CELLS = 1 << 18
KL_COEF_KEYS = (f"{ACT}.kl_loss_coef", "algorithm.kl_ctrl.kl_coef")


def _first_step_at_or_after(steps: np.ndarray, x: float) -> int:
    """The first logged step at or after `x` (the last step when none)."""
    i = int(np.searchsorted(steps, x - 1e-9))
    return int(steps[min(i, len(steps) - 1)])


def _lag_corr(x: np.ndarray, lag: int) -> float:
    """Correlation of x[t] with x[t+lag] (0 when too short)."""
    if lag <= 0 or len(x) <= lag + 2:
        return 0.0
    a, b = x[:-lag], x[lag:]
    denom = math.sqrt(float(np.sum(a * a)) * float(np.sum(b * b)))
    return float(np.sum(a * b)) / denom if denom > 0 else 0.0


def kl_coef_changes(run: Run) -> list[dict[str, Any]]:
    """Mid-run changes of the KL coefficient between config segments (A16)."""
    changes = []
    segs = run.config_segments
    for prev, seg in itertools.pairwise(segs):
        for key in KL_COEF_KEYS:
            a = verl_config.get(prev.config, key)
            b = verl_config.get(seg.config, key)
            if a is not None and b is not None and a != b:
                changes.append({"parameter": key, "from": a, "to": b, "step": seg.first_step})
    return changes


def lr_advice(run: Run, why: str, factor: float = 0.75) -> Advice:
    """Lower the actor LR by `factor` (B4: 2e-6 oscillates on 0.5B, 1.5e-6 is the sweet spot)."""
    return advise(
        run,
        f"{ACT}.optim.lr",
        why,
        f"{SEED_PPO} §3.3",
        suggest=lambda cur: verl_config.round_sig(float(cur) * factor),
        rule=f"{factor:g}× the current learning rate (e.g. 2e-6 → 1.5e-6 on a 0.5B model; "
        "1e-6 for 1.5B)",
    )


class RewardSawtooth(Detector, code="LS201", name="reward-sawtooth"):
    """The training reward oscillates with a regular period (a sawtooth or wave on the curve).

    Reports the period in steps, the step where the oscillation starts, its amplitude and the
    autocorrelation of the detrended reward at that period.

    What it detects:
        A periodic component in `critic/score/mean` (or `critic/rewards/mean`): after removing
        the slow trend with a moving average exactly one candidate period wide (which cancels a
        component of that period from the trend), the residual correlates with itself one period
        later. For each candidate period the residual's lag-period correlation is computed over
        every tail of the run that holds at least `min_cycles` cycles; the shortest period whose
        correlation reaches `min_autocorr` (and clears `noise_z`/√points, what noise alone
        reaches) wins, and the cycle's half peak-to-peak amplitude must be at least
        `min_amplitude_sigma` noise sigmas and `template_noise_z` times the half range that
        noise alone gives a cycle shape read from that many cycles (per-phase medians: p
        values of spread 1.25σ/√cycles). Periods are searched on the run binned to
        `max_points` points and, for periods too short to survive binning, on finer grids (×8
        apart, up to `max_raw_steps` points); the period is then settled at full resolution.
        The start comes from a matched filter: the cycle's own shape (per-phase median of the
        residual) is slid back from the end, and the start is where "cycle + noise" stops
        explaining the residual better than "noise alone".

    Why it matters:
        A reward curve that climbs and falls back on a regular rhythm is not learning steadily:
        each cycle undoes part of the previous progress. The GRPO article traces the sawtooth to
        a KL coefficient changed mid-run (gradient consistency broken); the PPO article saw
        oscillation from epoch 8 with a learning rate too high for the model (2e-6 on 0.5B).

    Example:
        step:300 - critic/score/mean:0.612 ...  step:310 - critic/score/mean:0.701 ...
        step:319 - critic/score/mean:0.748 ...  step:320 - critic/score/mean:0.598 ...
        (the reward climbs for 20 steps, drops back, and repeats: period 20 steps from step 300)

    Advice:
        When the run's config segments show `actor_rollout_ref.actor.kl_loss_coef` or
        `algorithm.kl_ctrl.kl_coef` changing between restarts, keep the coefficient constant for
        the whole run (calibrate it once, then lock it). Otherwise lower
        `actor_rollout_ref.actor.optim.lr` to 0.75× its value (2e-6 → 1.5e-6 on a 0.5B model;
        1e-6 for 1.5B).

    Known false positives:
        A reward that genuinely depends on a periodic schedule (curriculum cycling through data
        sources, an LR schedule with restarts, a data loader that is not shuffled between
        epochs) oscillates by design. Unshuffled data is checked: with `data.shuffle=False` (or
        shuffle unknown and the epoch length known) a period equal to the epoch length (the
        dataloader size, or total steps / `trainer.total_epochs`; at least total / epochs when
        `trainer.total_training_steps` was set by hand) is reported as info. Very short runs (fewer than `min_cycles` periods) are
        never reported. A reward that wanders (autocorrelated noise, as real batch means do)
        can correlate with itself ~0.5-0.7 one "period" later over a few cycles: `min_autocorr`
        is 0.6, the two-period check must hold too, and the cycle must stand well above the
        shape noise draws in so few cycles (`template_noise_z`).

    References:
        seed:grpo-pitfalls §3.3 (changing kl_loss_coef mid-run makes the reward saw-toothed);
        seed:ppo-tuning §3.3 (lr 2e-6 oscillates on Qwen2.5-0.5B; 1.5e-6 best).
    """

    title = "Periodic (sawtooth) oscillation of the training reward"
    concepts = ("score_mean", "reward_mean")
    groups = ("reward",)

    min_cycles: int = param(3, ge=1)
    min_period: int = param(4, ge=1)
    max_period: int = param(500, ge=1)
    min_autocorr: float = param(0.6, gt=0, le=1)
    noise_z: float = param(4.5, gt=0)
    min_amplitude_sigma: float = param(0.75, gt=0)
    template_noise_z: float = param(2.5, gt=0)
    max_points: int = param(2000, ge=1)
    max_raw_steps: int = param(200000, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        s = Series.load(run, *self.concepts)
        if s is None or len(s) < 4 * self.min_cycles * 2:
            return []
        metric, steps, values = s.metric, s.steps, s.values
        # one grid per resolution: the binned one for long periods, finer ones (×8 apart) for
        # periods too short to survive binning; each searches periods of 4..32 of its points
        grid, vals, width = regular_grid(steps, values, self.max_points)
        levels = [
            (
                grid,
                vals,
                width,
                self._search(
                    vals, max(2, math.ceil(self.min_period / width)), self.max_period / width
                ),
            )
        ]
        raw_width = bin_width(steps, len(steps) + 1)
        w = raw_width
        while w < width:
            if (steps[-1] - steps[0]) / w <= self.max_raw_steps:
                g, v, gw = regular_grid(steps, values, int((steps[-1] - steps[0]) / w) + 2)
                lo = max(2, math.ceil(self.min_period / gw))
                levels.append((g, v, gw, self._search(v, lo, min(32, 4 * width / gw))))
            w *= 8
        found = [lv for lv in levels if lv[3] is not None and lv[3]["significant"]]
        if not found:
            return []
        grid, vals, width, chosen = max(found, key=lambda lv: lv[3]["corr"])
        if width > raw_width and steps[-1] - steps[0] <= self.max_raw_steps:
            # coarse periods are fractional: settle the period and start at full resolution
            approx = chosen["period"] * width / raw_width
            grid, vals, width = regular_grid(steps, values, len(steps) + 1)
            around = self._score_periods(vals, range(max(2, int(approx) - 2), int(approx) + 4))
            if not around:
                return []
            chosen = max(around, key=lambda c: c["corr"])
        if chosen is None or not chosen["significant"]:
            return []
        finding = self._finding(run, metric, steps, grid, vals, width, chosen)
        return [finding] if finding is not None else []

    def _search(self, vals: np.ndarray, p_lo: int, p_max: float) -> dict[str, Any] | None:
        """The best period in [p_lo, p_max] (in grid points), preferring the fundamental."""
        m = len(vals)
        p_hi = min(int(p_max), (m - 1) // (self.min_cycles + 1))
        scored = self._score_periods(vals, range(p_lo, p_hi + 1))
        if not scored:
            return None
        best = max(scored, key=lambda c: c["corr"])
        # prefer the fundamental over its multiples: the shortest period close to the best
        for cand in scored:
            if cand["period"] < best["period"] and cand["corr"] >= 0.85 * best["corr"]:
                return cand
        return best

    def _score_periods(self, vals: np.ndarray, periods: range) -> list[dict[str, Any]]:
        """For each period p long enough for `min_cycles` cycles: the best tail correlation of
        the trend-free residual with itself p points later. Periods are scored in batches, one
        row each; a row's products past its end are 0, so its suffix sums are those of its own
        length."""
        m = len(vals)
        p = np.array([q for q in periods if m - q - max(self.min_cycles * q, 12) >= 0], dtype=int)
        # rows are independent: a batch stays small enough to live in cache on a long grid
        per_batch = max(1, _SCORE_CELLS // max(m, 1))
        return [
            scored
            for at in range(0, len(p), per_batch)
            for scored in self._score_rows(vals, p[at : at + per_batch])
        ]

    def _score_rows(self, vals: np.ndarray, p: np.ndarray) -> list[dict[str, Any]]:
        """`_score_periods` for the periods `p`, one row each."""
        m = len(vals)
        rows = p[:, None]
        j = np.arange(m)
        inside = j < m - rows  # index j pairs with j + p
        resid = vals - moving_averages(vals, p)
        later = np.take_along_axis(resid, np.minimum(j + rows, m - 1), axis=1)

        def suffix_sums(terms: np.ndarray) -> np.ndarray:
            return np.cumsum(np.where(inside, terms, 0.0)[:, ::-1], axis=1)[:, ::-1]

        sa, sb, sc = suffix_sums(resid * later), suffix_sums(resid**2), suffix_sums(later**2)
        lengths = m - rows - j
        valid = lengths >= np.maximum(self.min_cycles * rows, 12)  # starts with a long tail
        denom = np.sqrt(sb * sc)
        corr = np.where(denom > 0, sa / np.where(denom > 0, denom, 1.0), 0.0)
        # a tail correlation must clear both the floor and what noise alone reaches there
        need = np.maximum(self.min_autocorr, self.noise_z / np.sqrt(np.maximum(lengths, 1)))
        margin = np.where(valid, corr - need, -np.inf)
        best = np.argmax(margin, axis=1)
        return [
            {
                "period": int(q),
                "corr": float(corr[r, k]),
                "tail_start": int(k),
                "significant": bool(margin[r, k] > 0),
                "resid": resid[r],
                "m": m,
            }
            for r, (q, k) in enumerate(zip(p, best, strict=True))
        ]

    def _onset(self, vals: np.ndarray, resid: np.ndarray, p: int, tail_start: int) -> int:
        """Where the oscillation starts: a matched filter with the cycle's own shape.

        The cycle template is the per-phase median of the residual over the oscillating part;
        the start is the index from which "template + noise" explains the residual better
        than "noise alone" by the largest margin. The trend is then re-estimated with the
        template removed (a moving average straddling the start would otherwise leak part of
        the first cycle into the residual before it) and the start searched again.
        """
        m = len(vals)
        phase = np.arange(m) % p
        last = max(1, m - self.min_cycles * p)
        start = tail_start
        for _ in range(3):
            tail, tail_phase = resid[start:], phase[start:]
            template = np.array(
                [
                    np.median(tail[tail_phase == k]) if (tail_phase == k).any() else 0.0
                    for k in range(p)
                ]
            )
            template -= template.mean()
            t = template[phase]
            gain = 2 * resid * t - t * t
            suffix = np.cumsum(gain[::-1])[::-1]
            new = int(np.argmax(suffix[:last]))
            if new == start:
                break
            start = new
            shaped = np.where(np.arange(m) >= start, t, 0.0)
            resid = vals - moving_average(vals - shaped, p)
        return start

    def _finding(
        self,
        run: Run,
        metric: str,
        steps: np.ndarray,
        grid: np.ndarray,
        vals: np.ndarray,
        width: float,
        cand: dict[str, Any],
    ) -> Finding | None:
        p = cand["period"]
        split = self._onset(vals, cand["resid"], p, cand["tail_start"])
        start_step = _first_step_at_or_after(steps, float(grid[split]))
        resid = cand["resid"][split:]
        cycles = len(resid) // p
        # a true period repeats: the residual also matches itself two periods later, which
        # slow random wander (that can fake one period over a few cycles) does not
        corr2 = _lag_corr(resid, 2 * p)
        if corr2 < 0.6 * cand["corr"]:
            return None
        folded = resid[: cycles * p].reshape(cycles, p) if cycles else resid[None, :]
        profile = np.median(folded, axis=0)
        amplitude = float(profile.max() - profile.min()) / 2
        noise = noise_floor(vals, run.value_resolution)
        if amplitude < self.min_amplitude_sigma * noise:
            return None
        # a cycle shape read from a few cycles of noise alone has a range too: the per-phase
        # medians of `cycles` values scatter by 1.25σ/√cycles, and p of them span about twice
        # Φ⁻¹((p − 3/8)/(p + 1/4)) of that. The cycle must stand `template_noise_z` times above
        # what noise alone draws (σ: the larger of the curve's noise floor and the scatter of
        # the residual around the cycle shape)
        if cycles >= 2:
            phase = np.arange(cycles * p) % p
            scatter = float(np.std(resid[: cycles * p] - profile[phase]))
            scatter *= math.sqrt(cycles / (cycles - 1))
            sigma = max(noise, scatter)
            z_range = NormalDist().inv_cdf((p - 0.375) / (p + 0.25)) if p > 1 else 0.0
            by_chance = z_range * 1.2533 * sigma / math.sqrt(cycles)
            if amplitude < self.template_noise_z * by_chance:
                return None
        else:
            by_chance = None
        # an "oscillation" a millionth of the curve's own scale is float rounding, not a cycle
        scale = max(float(np.ptp(vals)), float(np.abs(np.median(vals))))
        if amplitude <= 1e-6 * scale:
            return None
        period_steps = p * width
        # a KL coefficient change explains the sawtooth only if it came before it showed
        changes = [c for c in kl_coef_changes(run) if c["step"] <= start_step + 2 * p * width]
        msg = (
            f"{metric} oscillates with a period of about {fmt(period_steps)} steps from step "
            f"{start_step} ({cycles} cycles; amplitude ±{fmt(amplitude)}, autocorrelation "
            f"{cand['corr']:.2f} at one period)."
        )
        advice: list[Advice] = []
        # unshuffled data replays its batches every epoch: info, no advice (nothing to fix)
        epoch = None if changes else epoch_period(run, period_steps, start_step, steps)
        if epoch is not None:
            msg += " " + epoch.pop("why")
        elif changes:
            ch = changes[0]
            msg += (
                f" The config changes {ch['parameter']} from {ch['from']} to {ch['to']} at step "
                f"{ch['step']}."
            )
            advice.append(
                advise(
                    run,
                    ch["parameter"],
                    f"The KL coefficient changed mid-run ({ch['from']} → {ch['to']} at step "
                    f"{ch['step']}); a coefficient that changes during training breaks gradient "
                    "consistency and saw-tooths the reward. Calibrate it once, then keep it "
                    "constant for the whole run: relaunch with one value from the first step "
                    "(here the one it was changed to).",
                    f"{SEED_GRPO} §3.3",
                    suggest=ch["to"],
                    step=max(int(ch["step"]) - 1, 0),  # current: the value before the change
                    rule="keep the KL coefficient constant for the whole run",
                )
            )
        else:
            advice.append(
                lr_advice(
                    run,
                    "A regular oscillation of the reward with no change of the KL coefficient "
                    "points at a learning rate too high for the model: the PPO article saw 2e-6 "
                    "oscillate on Qwen2.5-0.5B while 1.5e-6 trained best (1e-6 for 1.5B).",
                )
            )
        evidence = {
            "period_steps": round(period_steps, 1),
            "start_step": start_step,
            "cycles": cycles,
            "autocorrelation_at_period": round(cand["corr"], 3),
            "autocorrelation_at_two_periods": round(corr2, 3),
            "amplitude": amplitude,
            "noise_sigma": noise,
            "amplitude_by_chance": by_chance,
            "kl_coef_changes": changes,
            "bin_width_steps": width,
            "epoch_length": epoch,
        }
        extra = {"severity": "info"} if epoch is not None else {}
        return self.finding(
            message=msg,
            metric=metric,
            step=start_step,
            end_step=int(steps[-1]),
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_GRPO} §3.3", f"{SEED_PPO} §3.3"]),
            **extra,
        )


def epoch_period(
    run: Run, period: float, start_step: int, steps: np.ndarray
) -> dict[str, Any] | None:
    """How a reward period of `period` steps is one epoch of unshuffled data, or None.

    With `data.shuffle=False` every epoch feeds the same batches in the same order, so the
    batch difficulty (and the batch-mean reward) repeats with a period of one epoch: a healthy
    run "oscillates" by construction. The epoch length is the train dataloader's size
    (`run.meta["train_dataloader_size"]`, verl's `Size of train dataloader: N` line, when the
    reader keeps it), else the run's total training steps over `trainer.total_epochs` when
    the total was not set by hand (`trainer.total_training_steps` unset: verl runs
    epochs × dataloader size). When the total was set by hand the epochs may not all run, so
    the epoch is only known to be at least total / epochs: a period that long, present from
    the start of the run, with shuffle off, counts too. Shuffle unknown (no config): only an
    epoch length known exactly counts.
    """
    shuffle = current_value(run, "data.shuffle")
    if isinstance(shuffle, str):
        shuffle = shuffle.strip().lower() not in ("false", "0", "no", "off")
    if shuffle is True:
        return None
    tol = max(1.5, 0.05 * period)
    size = run.meta.get("train_dataloader_size")
    epochs = current_value(run, "trainer.total_epochs")
    set_total = current_value(run, "trainer.total_training_steps")
    total = run.meta.get("total_training_steps") or set_total or int(steps[-1])
    exact: float | None = None
    at_least: float | None = None
    how = ""
    if isinstance(size, int | float) and size > 0:
        exact, how = float(size), f"the train dataloader's size ({int(size)} batches)"
    elif isinstance(epochs, int | float) and epochs > 0 and isinstance(total, int | float):
        ratio = float(total) / float(epochs)
        hand_set = isinstance(set_total, int | float) and set_total > 0
        if not hand_set:
            exact = ratio
            how = f"{int(total)} training steps / {epochs:g} epochs"
        else:
            at_least = ratio
            how = (
                f"at least trainer.total_training_steps / total_epochs = {int(total)} / "
                f"{epochs:g} = {fmt(ratio)} steps (the dataloader size is not in the log)"
            )
    matches = exact is not None and abs(period - exact) <= tol
    # a hand-set total only bounds the epoch from below: shuffle must be known off, and an
    # epoch-long pattern is there from the first epoch on
    can_be = (
        at_least is not None
        and shuffle is False
        and period >= at_least - tol
        and start_step <= int(steps[0]) + 1.5 * period
    )
    if not (matches or can_be):
        return None
    state = "data.shuffle=False" if shuffle is False else "data.shuffle unknown (no config)"
    fits = "matches the epoch length" if exact is not None else "can be the epoch length"
    why = (
        f"The period {fits} ({how}) and {state}: every epoch replays the "
        "same batches in the same order, so the batch reward repeats with the epoch. Expected "
        "for unshuffled data, not a training instability."
    )
    return {
        "data.shuffle": shuffle,
        "epoch_steps": exact,
        "epoch_steps_at_least": at_least,
        "why": why,
    }


def _largest_fall(values: np.ndarray, window: int) -> float:
    """The largest fall of the smoothed series within any `window` consecutive points."""
    from numpy.lib.stride_tricks import sliding_window_view

    window = min(window, len(values))
    if window < 2:
        return 0.0
    smooth = moving_average(values, max(3, window // 3))
    views = sliding_window_view(smooth, window)
    return float((np.maximum.accumulate(views, axis=1) - views).max())


class RewardPlateau(Detector, code="LS202", name="reward-plateau"):
    """The training reward has stopped moving for the last part of the run (converged or stuck).

    Info, not a failure: either the run converged (the remaining steps are GPU hours to save) or
    it is stuck (nothing more will come from these settings).

    What it detects:
        `critic/score/mean` (or `critic/rewards/mean`) flat from some step to the end: a
        continuous "rise, then flat" fit places the plateau start (refitted on the half of the
        rise nearest the break, so a saturating rise does not drag it early); a run that never
        rose is "stuck" from its first step. The plateau must cover at
        least `min_fraction` of the run, and over it the Theil–Sen slope must move the reward by
        less than `max_change_sigma` sigmas of the plateau's spread (and less than
        `max_change_fraction` of the run's overall reward range). The size of the change
        decides, not a trend test alone: on a long plateau Mann–Kendall finds trends of any
        size. But a curve whose last third still rises significantly (Mann–Kendall
        p < `rising_p`) by at least one noise sigma and twice the largest fall of the plateau's
        own wander is converging, not flat, and is not reported.
        Evidence: slope per 100 steps and Mann–Kendall p over the last third, the plateau level,
        and the change across the plateau. A run with fewer than `min_points` reward values (an
        excerpt of a few steps) has no curve to fit: there `critic/score/min` ==
        `critic/score/max` in every logged step (every sample got the same reward: 0 means the
        reward never fires) is a warning, unless the advantages are all ~0 too in a single step
        (LS211 reports that; over two or more steps at one score the reward is stuck as well).
        At any run length, `critic/score/max` at one partial score (above 0, at most
        `max_partial_score`) in every logged step (at least `min_stuck_steps`) while the
        scores below it vary is a warning too: no sample ever got more than that score, the
        reward is stuck at the format score (e.g. 0.1 for a well-formed answer, 1.0 for a
        right one). Either is info, without advice, when a loss, KL or entropy is non-finite
        at the same steps or the entropy is far above its range: garbage generations score
        alike, and that failure is the finding to read.

    Why it matters:
        Steps after the reward stops improving cost compute without buying reward. If
        validation also stopped improving the run can end early; if the reward is flat at a low
        level, the run is stuck and needs different settings, not more steps.

    Example:
        step:400 - critic/score/mean:0.731 ... step:700 - critic/score/mean:0.733 ...
        step:1000 - critic/score/mean:0.729  (flat at 0.73 since step ~400)

    Advice:
        Stop earlier: `trainer.total_epochs` scaled to the share of the run before the plateau
        (or `trainer.total_training_steps` at the plateau start), keeping the checkpoint from
        the plateau start. If the level is too low, change the setup (learning rate, data,
        `rollout.n`) rather than training longer.

    Known false positives:
        A reward that is flat while the policy still improves on something the reward does not
        measure, or a curriculum that keeps the reward level by design. A reward whose full
        score is at most `max_partial_score` (0.5) reads as stuck at a partial score. A flat
        reward with other findings (advantage collapse, entropy collapse) is a symptom of
        those: read them first.

    References:
        seed:ppo-tuning §6 (total_epochs and test/save frequency in the tuned command);
        verl:trainer/ppo/ray_trainer.py (total_training_steps = epochs × batches per epoch).
    """

    title = "Training reward flat for the last part of the run"
    concepts = ("score_mean", "reward_mean")
    default_severity = "info"
    groups = ("reward",)

    min_fraction: float = param(0.2, gt=0, le=1)
    min_points: int = param(20, ge=1)
    max_change_sigma: float = param(2.5, gt=0)
    max_change_fraction: float = param(0.2, gt=0, le=1)
    max_points: int = param(2000, ge=1)
    rising_p: float = param(0.01, gt=0, le=1)
    max_partial_score: float = param(0.5, gt=0, le=1)
    min_stuck_steps: int = param(3, ge=2)

    def detect(self, run: Run) -> list[Finding]:
        s = Series.load(run, *self.concepts)
        if s is None:
            return []
        stuck = self._stuck_at_partial(run)
        if stuck:
            return stuck
        metric, steps, values = s.metric, s.steps, s.values
        if len(steps) < self.min_points:
            return self._never_moves(run, [int(s) for s in steps])
        x, y = binned(steps, values, self.max_points)
        n = len(x)
        span = float(x[-1] - x[0])
        if span <= 0:
            return []
        sigma = noise_floor(y, run.value_resolution)
        smooth = moving_average(y, max(3, n // 20))
        overall_range = float(smooth.max() - smooth.min())
        latest = x[-1] - self.min_fraction * span
        cand = x[(x <= latest)]
        fit = hinge_fit(x, y, mode="flat_after", candidates=cand, min_side=3)
        if fit is None:
            return []
        start = fit.at
        # a curved (saturating) rise biases a straight-line "before": refit on the half of the
        # rise nearest the break, where the curve is closer to straight
        for _ in range(2):
            near = x >= start - 0.5 * (start - x[0])
            if near.sum() < 12:
                break
            local = hinge_fit(x[near], y[near], mode="flat_after", candidates=cand, min_side=3)
            if local is None or local.slope_before <= 0:
                break
            start = local.at
        # a flat run from the start is "stuck": the fit's slope before is then no better
        if fit.slope_before * (start - x[0]) < self.max_change_sigma * sigma:
            start = float(x[0])
        plateau = x >= start
        if plateau.sum() < max(self.min_points // 2, 6):
            return []
        px, py = x[plateau], y[plateau]
        slope, _ = theil_sen(px, py)
        change = slope * (px[-1] - px[0])
        # the plateau's own spread (slow wander included), not just step-to-step noise
        sigma = max(sigma, mad_sigma(py))
        bound = min(self.max_change_sigma * sigma, self.max_change_fraction * overall_range)
        if start == x[0]:
            bound = self.max_change_sigma * sigma
        _, p_plateau = mann_kendall(py)
        if abs(change) > bound:
            return []
        third = x >= x[-1] - span / 3
        slope3, _ = theil_sen(x[third], y[third])
        _, p3 = mann_kendall(y[third])
        wander = _largest_fall(py, int(third.sum()))
        if self._still_rising(slope3 * span / 3, p3, sigma, wander):
            return []
        start_step = _first_step_at_or_after(steps, start)
        level = float(np.median(py))
        before = y[x < start]
        rose = (
            float(np.median(py) - np.median(before[: max(3, len(before) // 5)]))
            if len(before)
            else 0.0
        )
        kind = "stuck: it never rose" if start == x[0] else "converged or stuck"
        gain3 = slope3 * span / 3
        if gain3 > 0 and p3 < self.rising_p:  # significant, but less than the noise
            kind = (
                f"converging: still creeping up, by {fmt(gain3)} over the last third (less than "
                f"the noise σ)"
            )
        msg = (
            f"{metric} has been flat at {fmt(level)} since step {start_step} "
            f"({fmt(100 * (1 - (start - x[0]) / span))}% of the run; change across the plateau "
            f"{fmt(change)}, noise σ {fmt(sigma)}; slope over the last third "
            f"{fmt(slope3 * 100)}/100 steps, Mann–Kendall p={fmt(p3)}) — {kind}."
        )
        last_step = int(steps[-1])
        frac = max(start_step - int(steps[0]), 1) / max(last_step - int(steps[0]), 1)
        advice = [
            advise(
                run,
                "trainer.total_epochs",
                f"The reward stopped improving at step {start_step} of {last_step}; the same "
                "number of epochs again would spend the last "
                f"{fmt(100 * (1 - frac))}% of the compute on a flat curve. Stop earlier (keep the "
                "checkpoint from the plateau start), or change the setup if the level is too low.",
                "verl:trainer/ppo/ray_trainer.py",
                suggest=lambda cur: max(1, math.ceil(float(cur) * frac * 1.1)),
                rule="scale total_epochs by the share of the run before the plateau (+10%)",
            ),
            advise(
                run,
                "trainer.total_training_steps",
                "verl stops after total_training_steps when it is set (it overrides "
                "total_epochs × batches per epoch).",
                "verl:trainer/ppo/ray_trainer.py",
                suggest=math.ceil(start_step * 1.1) if run.config_segments else None,
                rule="the plateau start step plus ~10%",
            ),
        ]
        evidence = {
            "plateau_start_step": start_step,
            "plateau_level": level,
            "change_across_plateau": change,
            "noise_sigma": sigma,
            "rise_before_plateau": rose,
            "slope_last_third_per_100_steps": slope3 * 100,
            "mann_kendall_p_last_third": p3,
            "mann_kendall_p_plateau": p_plateau,
        }
        return [
            self.finding(
                message=msg,
                metric=metric,
                step=start_step,
                end_step=last_step,
                evidence=evidence,
                advice=advice,
                references=cite_all(["verl:trainer/ppo/ray_trainer.py", f"{SEED_PPO} §6"]),
            )
        ]

    def _still_rising(self, gain: float, p: float, sigma: float, wander: float) -> bool:
        """The last third still gains at least one noise sigma, with a significant trend, and
        twice the largest fall of the plateau's own wander: the curve is converging, not flat,
        and cutting epochs would stop it early. (Mann–Kendall's p alone is not enough: slow
        wander makes any third look trending.)"""
        return gain > 0 and p < self.rising_p and gain >= max(sigma, 2 * wander)

    def _never_moves(self, run: Run, steps: list[int]) -> list[Finding]:
        """Too few steps for a plateau: every sample got the same score in every logged step.
        With all-~0 advantages one step is LS211's finding alone; over two or more steps at the
        same score the reward also does not move, which is this one. When a NaN update or
        near-random generation explains it at the same steps it is that failure's consequence
        (info, no advice of its own)."""
        score = constant_score(run, steps)
        if score is None:
            return []
        top = values_by_step(run, "score_max")
        stuck = len({top[s] for s in steps if s in top}) == 1 and len(steps) >= 2
        if _advantages_all_zero(run, steps) and not stuck:
            return []
        metric = name_of(run, "score_max")
        msg = (
            f"{name_of(run, 'score_min')} = {metric} = {fmt(score)} in every logged training step "
            f"({len(steps)}): " + score_story(score, len(steps))
        )
        evidence: dict[str, Any] = {
            "constant_score": score,
            "steps": steps,
            "judged_on": "every logged step (too few for the plateau fit)",
        }
        cause = root_cause(run, steps)
        if cause is not None:
            msg = (
                f"{name_of(run, 'score_min')} = {metric} = {fmt(score)} in every logged training "
                f"step ({len(steps)}). " + cause.note("One score for every sample")
            )
            evidence["consequence_of"] = cause.evidence()
        return self._every_step(msg, metric, steps, evidence, cause, reward_fires_advice(run))

    def _stuck_at_partial(self, run: Run) -> list[Finding]:
        """`critic/score/max` the same partial score (0 < max ≤ `max_partial_score`) at every
        logged step (at least `min_stuck_steps`) while the scores below it vary: no sample ever
        got more than that score (typically the format score)."""
        top = values_by_step(run, "score_max")
        bottom = values_by_step(run, "score_min")
        steps = sorted(top)
        if len(steps) < self.min_stuck_steps:
            return []
        tol = max(1e-9, 2 * (run.value_resolution or 0.0))
        highest = [top[s] for s in steps]
        level = float(np.median(highest))
        if not 0 < level <= self.max_partial_score:
            return []
        if any(abs(v - level) > tol for v in highest):
            return []
        if all(s in bottom and abs(bottom[s] - level) <= tol for s in steps):
            return []  # every sample at that score: `_never_moves` tells that story
        mean = values_by_step(run, "score_mean")
        means = [mean[s] for s in steps if s in mean]
        metric = name_of(run, "score_max")
        where = f"steps {steps[0]}–{steps[-1]}"
        msg = (
            f"{metric} is {fmt(level)} at every logged step ({len(steps)}, {where})"
            + (
                f" while {name_of(run, 'score_mean')} moves between {fmt(min(means))} and "
                f"{fmt(max(means))} below it"
                if means
                else ""
            )
            + f": no sample ever scored above {fmt(level)}. The reward is stuck at a partial "
            "score — typically the format score (answers well-formed, never right)."
        )
        evidence: dict[str, Any] = {
            "score_max": level,
            "steps": steps,
            "score_mean_range": [min(means), max(means)] if means else None,
            "max_partial_score": self.max_partial_score,
            "judged_on": "every logged step",
        }
        cause = root_cause(run, steps)
        if cause is not None:
            msg += " " + cause.note("A score that never rises")
            evidence["consequence_of"] = cause.evidence()
        advice = [
            advise(
                run,
                "custom_reward_function.path",
                f"No sample ever got more than {fmt(level)}: score a few rollouts by hand and "
                "check that a correct answer can get the full reward (answer extraction and "
                "the expected format, e.g. <answer> tags or \\boxed{}).",
                "verl:trainer/ppo/reward.py",
                suggest=None,
                rule="a reward function whose full score a correct answer reaches",
            ),
            advise(
                run,
                "data.train_files",
                "Prompts far too hard for the model are never solved, so only the partial "
                "score is ever earned: mix in problems it solves part of the time.",
                f"{SEED_GRPO} §2",
                suggest=None,
                rule="training data of a difficulty the model solves part of the time",
            ),
        ]
        return self._every_step(msg, metric, steps, evidence, cause, advice)

    def _every_step(
        self,
        message: str,
        metric: str,
        steps: list[int],
        evidence: dict[str, Any],
        cause: RootCause | None,
        advice: list[Advice],
    ) -> list[Finding]:
        """A finding judged on every logged step: info without advice when `cause` explains it."""
        return [
            self.finding(
                severity="info" if cause is not None else "warning",
                message=message,
                metric=metric,
                step=steps[0],
                end_step=steps[-1],
                evidence=evidence,
                advice=[] if cause is not None else advice,
                references=cite_all(["verl:trainer/ppo/metric_utils.py", f"{SEED_GRPO} §2"]),
            )
        ]


def _advantages_all_zero(run: Run, steps: list[int]) -> bool:
    top = values_by_step(run, "advantages_max")
    bottom = values_by_step(run, "advantages_min")
    both = [s for s in steps if s in top and s in bottom]
    eps = max(1e-3, 2 * (run.value_resolution or 0.0))
    return bool(both) and all(max(abs(top[s]), abs(bottom[s])) <= eps for s in both)


def score_story(score: float, n_steps: int) -> str:
    """What a score that is the same for every sample means."""
    where = "the logged step" if n_steps == 1 else f"all {n_steps} logged steps"
    if abs(score) < 1e-9:
        return (
            f"every sample scored 0 in {where} — the reward never fires (a reward function that "
            "does not parse this model's answer format, or prompts far too hard)."
        )
    return (
        f"every sample scored {fmt(score)} in {where} — the reward does not tell samples apart: "
        "stuck at one value (often the format score: answers well-formed but never right), or "
        "every prompt solved."
    )


def reward_fires_advice(run: Run) -> list[Advice]:
    """Check the reward function against the model's output, and the data's difficulty."""
    return [
        advise(
            run,
            "custom_reward_function.path",
            "Every sample got the same reward: score a few rollouts by hand with the reward "
            "function (answer extraction, e.g. \\boxed{} vs '####', and the expected format) "
            "before training longer.",
            "verl:trainer/ppo/reward.py",
            suggest=None,
            rule="a reward function that parses this model's answers",
        ),
        advise(
            run,
            "data.train_files",
            "Prompts the model never (or always) solves give every sample the same score: mix "
            "in problems it solves part of the time.",
            f"{SEED_GRPO} §2",
            suggest=None,
            rule="training data of a difficulty the model solves part of the time",
        ),
    ]


class ValidationDrop(Detector, code="LS203", name="validation-drop"):
    """Validation score falls while the training reward keeps rising (over-fitting or LR too high).

    Validation metrics are sparse (every `trainer.test_freq` steps); the finding's step is the
    first validation step after the turn.

    What it detects:
        A validation score (`val-core/<source>/<var>/mean@N`, or `val/test_score/<source>` in
        older verl) that rises (or holds) and then falls. The turn is the split of the
        validation points that best fits "non-decreasing before (any rising or saturating
        shape: isotonic regression), a quadratic after", among splits whose later points sit
        below the level reached before. The drop (level before the turn minus the level just
        after it or at the end, whichever is larger) must exceed `min_drop_sigma` noise sigmas
        (noise from the fit's residuals, never below the validation set's sampling noise; 3/4
        of that when 8+ validations after the turn trend down) and `min_drop` in absolute
        terms; the validation points
        after the turn must sit below the earlier level (binomial sign test p < `trend_p`, over
        at least `min_points_after` points, or a drop twice as large); and the training reward
        over the same steps must not be falling (its Theil–Sen change above
        −`train_fall_ratio` × the validation drop). The drop must last: the mean of the last
        third of the points after the turn sits at least `lasting_sigma` noise sigmas below the
        level (sampling noise read at that lower level); a one-point dip that the later
        validations climb back from is noise.

    Why it matters:
        Training reward up, validation down is the textbook sign of over-fitting the training
        prompts (or of a learning rate high enough to trade general ability for reward). Every
        step after the turn makes the model worse on what you care about.

    Example:
        step:200 - val-core/openai/gsm8k/reward/mean@1:0.631 ...
        step:300 - val-core/openai/gsm8k/reward/mean@1:0.598 ... critic/score/mean:0.81
        step:400 - val-core/openai/gsm8k/reward/mean@1:0.560 ... critic/score/mean:0.86

    Advice:
        Keep the checkpoint from before the turn (`trainer.total_training_steps` at the turning
        step for a rerun); lower `actor_rollout_ref.actor.optim.lr` to 0.75× (the PPO article's
        best validation accuracy came at 1.5e-6, not 2e-6, on a 0.5B model).

    Known false positives:
        Small validation sets: a score over N prompts moves by ±√(p(1−p)/N) between
        validations (±0.09 for 30 prompts). N is read from the values (every one is k/N; N/k
        problems for a `mean@k` score), capped for small benchmarks named in the metric
        (AIME/HMMT 30, AMC 40) and 50 for a score near 0 on a set of unknown size; that
        sampling noise is the floor of the noise estimate. The level before the turn is a
        Theil–Sen line capped at the second-highest value (one high point is no level), and
        when the validations after the turn climb back the drop is judged where their line
        ends. The turn still sits where the level is highest, so plateau noise alone reaches
        ~3.5σ: the drop must clear
        `min_drop_sigma` (4) σ, or 3σ with a significant downward trend (Kendall p < 0.01) over
        at least 8 validations after the turn. A validation metric that is not a score (a
        length, a loss) can still move against the reward for harmless reasons. With fewer
        than `min_points_after` validation points after the turn nothing is reported.

    References:
        seed:ppo-tuning §3.3 (lr 1.5e-6 gave the best validation accuracy, 2e-6 oscillated);
        verl:trainer/ppo/metric_utils.py (process_validation_metrics, val-core names).
    """

    title = "Validation score falling while training reward rises"
    concepts = ()
    groups = ("reward", "validation")

    min_val_points: int = param(6, ge=1)
    min_points_after: int = param(3, ge=1)
    min_drop_sigma: float = param(4.0, gt=0)
    min_drop: float = param(0.02, gt=0)
    trend_p: float = param(0.05, gt=0, le=1)
    train_fall_ratio: float = param(0.5, gt=0)
    lasting_sigma: float = param(2.5, gt=0)

    def skip_reason(self, run: Run) -> str | None:
        if not validation_metrics(run):
            return (
                "no validation metric in the run ("
                + ", ".join(f"{p}…" for p in VALIDATION_PREFIXES[:2])
                + ")"
            )
        return None

    def detect(self, run: Run) -> list[Finding]:
        found: list[Finding] = []
        for metric in validation_metrics(run)[:8]:
            f = self._one(run, metric)
            if f is not None:
                found.append(f)
        if not found:
            return []
        # one story: report the earliest turn; the others go in its evidence
        found.sort(key=lambda f: f.step or 0)
        first = found[0]
        if len(found) > 1:
            first.evidence["also_falling"] = {f.metric: f.step for f in found[1:]}
        return [first]

    def _one(self, run: Run, metric: str) -> Finding | None:
        s = Series.read(run, metric)
        steps, values = s.steps, s.values
        if len(steps) < self.min_val_points:
            return None
        x, y = binned(steps, values, 2000)
        k_turn = self._turn(x, y)
        if k_turn is None:
            return None
        xb, yb, xa, ya = x[:k_turn], y[:k_turn], x[k_turn:], y[k_turn:]
        # noise from the fit itself (a step-difference estimate is inflated by the curve's bend
        # on short runs); ×1.25 because an isotonic fit follows some of the noise
        iso_rss = isotonic_prefix_fit(y)[0][k_turn]
        quad_rss = poly_prefix_fit(-x[::-1], y[::-1], 2)[0][::-1][k_turn]
        if len(x) - k_turn < 6:
            quad_rss = line_rss(x, y)[1][k_turn]
        fit_sigma = 1.25 * math.sqrt((iso_rss + quad_rss) / max(len(x) - 4, 1))
        w = max(4, min(10, len(xb) // 2))
        # the level reached before the turn, robust to one high point (the turn is placed
        # right after the highest one, so a least-squares line through it, or the maximum,
        # reads noise as level): a Theil–Sen line at the last point, capped at the
        # second-highest value seen there
        ts_slope, ts_icpt = theil_sen(xb[-w:], yb[-w:])
        top = np.sort(yb[-w:])
        level = min(ts_slope * float(xb[-1]) + ts_icpt, float(top[-2] if len(top) > 1 else top[-1]))
        # a few points fit closely by chance: never below the sampling noise of a score that is
        # the mean of `prompts` 0/1 results (the validation set's size, read from the values;
        # for a small benchmark, the binomial noise of its problem count)
        prompts = score_count(y, run.value_resolution)
        problems = benchmark_size(metric, prompts, level)
        sampling = binomial_sigma(level, problems)
        sigma = max(
            fit_sigma,
            sampling,
            0.5 * noise_floor(y, run.value_resolution),
            1e-9,
        )
        _, slope_before = line_at(
            xb[-max(3, len(xb) // 3) :], yb[-max(3, len(xb) // 3) :], float(xb[-1])
        )
        _, after_start, _ = poly_prefix_fit(-xa[::-1], ya[::-1], 2)
        start_level = float(after_start[-1]) if np.isfinite(after_start[-1]) else float(ya[0])
        tail = max(3, len(xa) // 3)
        end_level, slope_after = line_at(xa[-tail:], ya[-tail:], float(xa[-1]))
        drop = max(level - start_level, level - end_level)
        if drop < self.min_drop or end_level >= level:  # still low at the end, or no drop
            return None
        # The level before the turn is picked where it is highest, so a drop must clear
        # `min_drop_sigma` noise sigmas; a long, steady decline after the turn (a significant
        # downward trend over many validations) is enough at 3/4 of that.
        trend_p = 1.0
        if len(ya) >= 8:
            from scipy.stats import kendalltau  # on use: rare, and scipy.stats costs ~1.5 s

            tau, trend_p = kendalltau(xa, ya)
            trend_p = float(trend_p) if tau < 0 else 1.0
        steady = trend_p < 0.01 and drop >= 0.75 * self.min_drop_sigma * sigma
        if drop < self.min_drop_sigma * sigma and not steady:
            return None
        # the points right after the turn sit below the level reached before it
        head = ya[: max(self.min_points_after, len(ya) // 4)]
        below = int(np.sum(head < level))
        p = min(_binom_tail(below, len(head)), _binom_tail(int(np.sum(ya < level)), len(ya)))
        if float(np.median(head)) >= level - sigma:
            return None
        if p >= self.trend_p and drop < 2 * self.min_drop_sigma * sigma:
            return None
        # and it lasts: a dip of one or two validations (a low point right after a high one
        # makes a deep "turn") that the later points climb back from is sampling noise, not
        # over-fitting. The last third of the points after the turn must hold `lasting_sigma`
        # noise sigmas below the level (the sampling noise read at that lower level: a score
        # nearer 0.5 moves more).
        # When the validations after the turn climb back (the line through the last third
        # rises), the drop is judged where that line ends: a dip the curve is leaving is no
        # lasting drop.
        held = float(np.mean(ya[-tail:]))
        if slope_after > 0:
            held = max(held, end_level)
        held_sampling = binomial_sigma(held, problems)
        if level - held < self.lasting_sigma * max(sigma, held_sampling):
            return None
        train = Series.load(run, "score_mean", "reward_mean")
        tmetric = train.metric if train is not None else None
        train_change = None
        if train is not None:
            mask = train.steps >= xb[-1]
            if mask.sum() >= 3:
                ts, _ = theil_sen(train.steps[mask], train.values[mask])
                train_change = ts * float(train.steps[mask][-1] - train.steps[mask][0])
                if train_change < -self.train_fall_ratio * drop:
                    return None
        turn = int(xa[0])
        peak_i = int(np.argmax(yb))
        msg = (
            f"{metric} turns down at step {turn}: from {fmt(level)} (fitted level at step "
            f"{int(xb[-1])}) to {fmt(ya[-1])} at step {int(xa[-1])} (drop {fmt(drop)}, "
            f"{fmt(drop / sigma)}σ of validation noise; {below} of the next {len(head)} "
            "validation points below the earlier level)"
        )
        if train_change is not None:
            msg += f", while {tmetric} changed by {fmt(train_change)} over the same steps."
        else:
            msg += "; the training reward is not in the run to compare."
        if train_change is not None and train_change > 0:
            msg += " Training up, validation down: over-fitting."
        advice = [
            lr_advice(
                run,
                "Validation falling while training reward rises is over-fitting, often from a "
                "learning rate too high for the model (the PPO article's best validation accuracy "
                "came at 1.5e-6, with 2e-6 oscillating, on Qwen2.5-0.5B).",
            ),
            advise(
                run,
                "trainer.total_training_steps",
                f"Validation peaked around step {int(xb[peak_i])}; keep that checkpoint, and for "
                "a rerun with the same settings stop before the turn.",
                "verl:trainer/ppo/ray_trainer.py",
                suggest=int(xb[-1]) if run.config_segments else None,
                rule="the last validation step before the turn",
            ),
        ]
        evidence = {
            "turn_step": turn,
            "last_step_before_turn": int(xb[-1]),
            "level_before_turn": level,
            "last_value": float(ya[-1]),
            "peak_value": float(yb[peak_i]),
            "peak_step": int(xb[peak_i]),
            "drop": drop,
            "val_noise_sigma": sigma,
            "p_downward_trend_after_turn": trend_p if trend_p < 1 else None,
            "val_set_size_from_values": prompts,
            "val_problems_for_noise": problems,
            "slope_before_per_100_steps": slope_before * 100,
            "slope_after_per_100_steps": slope_after * 100,
            "p_points_below_by_chance": p,
            "val_points_after": len(ya),
            "val_points_below_level": below,
            "train_metric": tmetric,
            "train_change_after_turn": train_change,
            "test_freq": current_value(run, "trainer.test_freq"),
        }
        return self.finding(
            message=msg,
            metric=metric,
            step=turn,
            end_step=int(xa[-1]),
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_PPO} §3.3", "verl:trainer/ppo/metric_utils.py"]),
        )

    def _turn(self, x: np.ndarray, y: np.ndarray) -> int | None:
        """Index of the first validation point after the turn.

        Least squares over splits of "non-decreasing before (any rising or saturating
        shape), a straight line after", among splits whose later points sit below the level
        reached before.
        """
        n = len(x)
        lo, hi = 4, n - self.min_points_after
        if hi < lo:
            return None
        before, level = isotonic_prefix_fit(y)
        after = poly_prefix_fit(-x[::-1], y[::-1], 2)[0][::-1]
        ks = np.arange(lo, hi + 1)
        c = np.concatenate([[0.0], np.cumsum(y)])
        mean_after = (c[n] - c[ks]) / (n - ks)
        ok = mean_after < level[ks]
        if not ok.any():
            return None
        cost = np.where(ok, before[ks] + after[ks], np.inf)
        return int(ks[int(np.argmin(cost))])

    @staticmethod
    def _level_before(xb: np.ndarray, yb: np.ndarray) -> float:
        """The fitted value at the last point before the turn (quadratic when it can)."""
        if len(xb) >= 4 and float(np.ptp(xb)) > 0:
            coef = np.polyfit(xb - xb[-1], yb, 2)
            return float(coef[-1])
        return float(np.median(yb[-3:]))


def score_count(values: np.ndarray, resolution: float | None) -> int | None:
    """N when every value is k/N: a mean of N 0/1 scores (a validation set of N prompts).

    The smallest N that fits all distinct values (at least 6 of them, all in [0, 1]); on a
    rounded print (`.3f`) only N up to 1/(20·resolution), where a chance fit is unlikely.
    """
    v = np.unique(values[np.isfinite(values)])
    if len(v) < 6 or v[0] < 0 or v[-1] > 1:
        return None
    tol = (resolution or 0.0) + 1e-9
    limit = 2000 if not resolution else int(1 / (20 * resolution))
    counts = np.arange(2, max(2, limit) + 1, dtype=np.float64)[:, None]
    scaled = v[None, :] * counts
    fits = np.all(np.abs(scaled - np.round(scaled)) <= tol * counts, axis=1)
    return int(counts[np.argmax(fits), 0]) if fits.any() else None


#: problems in small math benchmarks, by a name fragment of the validation metric
SMALL_BENCHMARKS = (("aime", 30), ("hmmt", 30), ("brumo", 30), ("amc", 40))
#: problems assumed for a score near 0 on a benchmark of unknown size (a hard, small set)
NEAR_ZERO_PROBLEMS = 50


def benchmark_size(metric: str, prompts: int | None, level: float) -> int | None:
    """How many problems the validation score averages (for its binomial noise), or None.

    `prompts` is read from the values (every value is k/N); a `mean@k` score over N problems
    is k/(N·k), so N is `prompts`/k. A small benchmark named in the metric (AIME, HMMT: 30
    problems; AMC: 40) caps it; a score near 0 (below 0.1) on a set of unknown size is taken
    as a small hard set (`NEAR_ZERO_PROBLEMS`).
    """
    import re

    n = prompts
    at = re.search(r"@(\d+)", metric)
    k = int(at.group(1)) if at else 1
    if n and k > 1 and n % k == 0:
        n //= k
    low = metric.lower()
    for frag, size in SMALL_BENCHMARKS:
        if frag in low:
            n = min(n, size) if n else size
            break
    if n is None and level < 0.1:
        n = NEAR_ZERO_PROBLEMS
    return n


def binomial_sigma(rate: float, problems: int | None) -> float:
    """√(p(1−p)/n): how much a success rate over n problems moves between validations."""
    if not problems:
        return 0.0
    p = min(max(rate, 0.0), 1.0)
    return math.sqrt(p * (1 - p) / problems)


def _binom_tail(k: int, n: int) -> float:
    """P(X ≥ k) for X ~ Binomial(n, 1/2): how unlikely this many points below by chance."""
    if n <= 0:
        return 1.0
    return float(sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n)
