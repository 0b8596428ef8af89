"""Critic and advantage diagnoses: a PPO critic that does not learn, advantages collapsed to 0."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from logscope.advice import SEED_GRPO, SEED_PPO, advise
from logscope.aliases import name_of, pair_name, resolve
from logscope.detector import Detector, param
from logscope.health import REFERENCES, WARMUP_STEPS, grad_clip, recent_level, values_by_step
from logscope.model import Advice, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import RO
from logscope.words import plural

from ._common import grad_clip_advice
from ._consequences import constant_score, root_cause
from ._series import Series, binned, moving_average, stretches
from ._stats import best_split, fmt, mad_sigma
from .reward import reward_fires_advice, score_story


def _close_gaps(mask: np.ndarray, gap: int) -> np.ndarray:
    """`mask` with runs of at most `gap` False between two True filled in."""
    out = mask.copy()
    for a, b in stretches(~mask):
        if a > 0 and b < len(mask) and b - a <= gap:
            out[a:b] = True
    return out


def _refine_up(steps: np.ndarray, values: np.ndarray, approx: float, half: float, sign: int) -> int:
    """The step of the best mean shift (direction `sign`) of raw values within ±half of approx."""
    win = (steps >= approx - half) & (steps <= approx + half)
    if win.sum() < 8:
        return int(steps[min(int(np.searchsorted(steps, approx)), len(steps) - 1)])
    ws, wv = steps[win], values[win]
    k, _ = best_split(wv, min_side=3, direction=sign)
    if k < 0:
        return int(ws[min(int(np.searchsorted(ws, approx)), len(ws) - 1)])
    # a ramp's first steps sit below the new mean but already off the old level: include them
    pre = wv[:k]
    level = float(np.median(pre))
    spread = max(mad_sigma(pre), 1e-12)
    while k > 1 and sign * (wv[k - 1] - level) > 3 * spread:
        k -= 1
    return int(ws[k])


def _values_off_returns(run: Run) -> tuple[float, float, float, int] | None:
    """(values mean, returns min, returns max, step) at the last step after warm-up where the
    critic's mean value lies outside the returns' range by more than that range (≥ 0.05)."""
    values = values_by_step(run, "values_mean")
    low = values_by_step(run, "returns_min")
    high = values_by_step(run, "returns_max")
    common = sorted(s for s in set(values) & set(low) & set(high) if s > WARMUP_STEPS)
    if not common:
        return None
    step = common[-1]
    v, lo, hi = values[step], low[step], high[step]
    off = max(lo - v, v - hi, 0.0)
    return (v, lo, hi, step) if off > max(hi - lo, 0.05) else None


class CriticValueError(Detector, code="LS210", name="critic-value-error"):
    """The PPO critic is not learning: value loss stays high, explained variance far below 0.

    PPO/GAE only (GRPO has no critic and this detector is skipped). Reports when it starts, the
    value loss and explained variance before and after, and the advantage mean.

    What it detects:
        A lasting stretch (at least `min_duration` logged steps and `min_fraction` of the run)
        where the smoothed `critic/vf_loss` is above `vf_loss_threshold` and the critic is
        broken by a second sign: `critic/vf_explained_var` below `explained_var_threshold`, or
        `critic/advantages/mean` off 0 by more than `adv_mean_threshold`, or the value loss
        risen to at least `rise_factor` × its best level earlier in the run. A high value loss
        that is still falling (the critic's warm-up) is not reported; gaps of a few points in
        the stretch are closed. The start is refined to the best upward shift of the raw (log)
        value loss near the stretch's first step.

    Why it matters:
        PPO's advantages are returns minus the critic's values. A critic that does not fit the
        returns (explained variance ≤ 0: worse than predicting the mean) hands the actor
        advantages that are mostly noise, so the policy update direction is partly wrong and
        reward stalls or degrades while the compute is still spent.

    Example:
        step:120 - critic/vf_loss:0.048 - critic/vf_explained_var:0.61 ...
        step:121 - critic/vf_loss:0.352 - critic/vf_explained_var:-1.42 ...
        step:180 - critic/vf_loss:0.331 - critic/vf_explained_var:-1.10 - critic/advantages/mean:0.09

    Advice:
        Raise `critic.ppo_micro_batch_size_per_gpu` and `critic.forward_micro_batch_size_per_gpu`
        (the PPO article: 4 → 8 took vf_loss 0.081 → 0.052 and kept the advantage mean within
        −0.012..0.008), within memory limits; check `critic.optim.lr` (verl's default 1e-5;
        a critic LR far above it diverges, far below it never catches up).

    Known false positives:
        A reward scale change (a new reward function, reward normalisation switched on) raises
        the value loss for a while even with a healthy critic; so does a restart that reloads
        the actor but not the critic.

    References:
        seed:ppo-tuning §4, §4.1 (vf_loss > 0.1 for long or advantages mean off 0 → larger critic
        micro batches); verl:trainer/ppo/core_algos.py (GAE, value loss);
        verl:trainer/ppo/metric_utils.py (vf_explained_var).
    """

    title = "PPO critic not learning (value loss high, explained variance ≪ 0)"
    concepts = ("vf_loss", "vf_explained_var")
    groups = ("critic",)

    vf_loss_threshold: float = param(0.1, gt=0)
    explained_var_threshold: float = param(-0.2, le=1)
    adv_mean_threshold: float = param(0.05, gt=0)
    rise_factor: float = param(2.0, gt=0)
    min_duration: int = param(10, ge=1)
    min_fraction: float = param(0.05, gt=0, le=1)
    max_points: int = param(2000, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        vf_s = Series.read(run, resolve(run, "vf_loss"))
        ev_s = Series.read(run, resolve(run, "vf_explained_var"))
        base_steps = vf_s.steps if len(vf_s) >= len(ev_s) else ev_s.steps
        if len(base_steps) < max(self.min_duration, 6):
            return self._point_in_time(run)
        x, _ = binned(base_steps, base_steps.astype(float), self.max_points)
        width = float(np.median(np.diff(x))) if len(x) > 1 else 1.0
        vf = self._smooth_on(x, vf_s)
        evs = self._smooth_on(x, ev_s)
        adv = self._smooth_on(x, Series.read(run, resolve(run, "advantages_mean")))
        n = len(x)
        win = max(3, min(15, n // 10))
        thr = self.vf_loss_threshold
        have_vf = np.isfinite(vf).any()
        best_before = np.fmin.accumulate(np.where(np.isfinite(vf), vf, np.inf))
        risen = vf >= self.rise_factor * np.maximum(best_before, 1e-9)
        ev_bad = np.isfinite(evs) & (evs < self.explained_var_threshold)
        adv_off = np.isfinite(adv) & (np.abs(adv) > self.adv_mean_threshold)
        if have_vf:
            high = np.isfinite(vf) & (vf > thr)
            # still falling (warm-up): the level a window later is clearly lower
            slow = moving_average(np.nan_to_num(vf, nan=float(np.nanmedian(vf))), win)
            later = np.concatenate([slow[win:], np.full(win, np.nan)])
            falling = np.isfinite(later) & (later < slow * 0.8)
            bad = high & ~falling & (ev_bad | adv_off | risen)
        else:
            later = np.concatenate([evs[win:], np.full(win, np.nan)])
            rising = np.isfinite(later) & (later > evs + 0.2)
            bad = ev_bad & ~rising
        need = max(self.min_duration, self.min_fraction * (x[-1] - x[0]))
        bad = _close_gaps(bad, max(2, int(need / width / 10)))
        for a, b in stretches(bad):
            if x[b - 1] - x[a] + width < need:
                continue
            return [self._finding(run, x, a, b, vf, evs, adv, vf_s, ev_s)]
        return []

    def _point_in_time(self, run: Run) -> list[Finding]:
        """Too few steps for a stretch: signs in the recent level, reported as info only."""
        signs: list[str] = []
        metrics: list[str] = []
        steps: list[int] = []
        evidence: dict[str, Any] = {"judged_on": "recent level (too few steps for a stretch)"}
        ev_ref = REFERENCES["vf_explained_var"]
        ev = recent_level(run, "vf_explained_var", keep=lambda step: step > WARMUP_STEPS)
        if ev is not None and ev_ref.alarm_low is not None and ev.value <= ev_ref.alarm_low:
            signs.append(f"{ev.metric} {fmt(ev.value)} (worse than predicting the mean return)")
            metrics.append(ev.metric)
            steps += ev.steps
            evidence["explained_var"] = ev.value
        gn_ref = REFERENCES["critic_grad_norm"]
        gn = recent_level(run, "critic_grad_norm", keep=lambda step: step > WARMUP_STEPS)
        clip, clip_source = grad_clip(run, "critic")
        if gn is not None and gn_ref.alarm_high and gn.value >= gn_ref.alarm_high * clip:
            signs.append(
                f"{gn.metric} {fmt(gn.value)}, {gn.value / clip:.0f}× the clip {clip:g} "
                f"({clip_source})"
            )
            metrics.append(gn.metric)
            steps += gn.steps
            evidence.update(critic_grad_norm=gn.value, critic_grad_clip=clip)
        gap = _values_off_returns(run)
        if gap is not None:
            value, low, high, step = gap
            signs.append(
                f"{name_of(run, 'values_mean')} {fmt(value)} at step {step}, outside the "
                "returns' range "
                f"{fmt(low)}–{fmt(high)}"
            )
            metrics.append(name_of(run, "values_mean"))
            steps.append(step)
            evidence.update(values_mean=value, returns_min=low, returns_max=high)
        if not signs:
            return []
        msg = (
            "The critic looks off: "
            + "; ".join(signs)
            + ". One or two steps say little about a critic (early steps are its warm-up): "
            f"watch {name_of(run, 'vf_explained_var')} and {name_of(run, 'vf_loss')} over the next "
            "steps."
        )
        advice: list[Advice] = [
            advise(
                run,
                "critic.optim.lr",
                "A critic far from its targets with a huge gradient is often a critic LR far "
                "from verl's default 1e-5 (too high diverges, too low never catches up).",
                f"{SEED_PPO} §4",
                suggest=None,
                rule="about 1e-5 (verl's default); halve it if the value loss is rising",
            )
        ]
        clip_advice = grad_clip_advice(
            run, "critic", "The critic's gradient is far above its clip."
        )
        if clip_advice is not None and "critic_grad_norm" in evidence:
            advice.append(clip_advice)
        return [
            self.finding(
                severity="info",
                message=msg,
                metric=metrics[0],
                step=min(steps),
                end_step=max(steps),
                evidence=evidence,
                advice=advice,
                references=cite_all([f"{SEED_PPO} §4.1", "verl:trainer/ppo/metric_utils.py"]),
            )
        ]

    def _smooth_on(self, x: np.ndarray, s: Series) -> np.ndarray:
        if len(s) == 0:
            return np.full(len(x), np.nan)
        bs, bv = binned(s.steps, s.values, self.max_points)
        med = moving_average(bv, 5) if len(bv) >= 5 else bv
        # robust to single outliers: median of raw and smoothed
        med = np.where(np.abs(bv - med) > 3 * (np.nanstd(bv) + 1e-12), med, (med + bv) / 2)
        out = np.interp(x, bs, med, left=np.nan, right=np.nan)
        return out

    def _finding(
        self,
        run: Run,
        x: np.ndarray,
        a: int,
        b: int,
        vf: np.ndarray,
        evs: np.ndarray,
        adv: np.ndarray,
        vf_s: Series,
        ev_s: Series,
    ) -> Finding:
        approx = float(x[a])
        width = float(np.median(np.diff(x))) if len(x) > 1 else 1.0
        half = max(30.0, 5 * width, 0.05 * float(x[-1] - x[0]))
        vf_name, ev_name = vf_s.metric, ev_s.metric
        if len(vf_s) and (vf_s.values > 0).all():
            step = _refine_up(vf_s.steps, np.log(vf_s.values), approx, half, +1)
        elif len(vf_s):
            step = _refine_up(vf_s.steps, vf_s.values, approx, half, +1)
        else:
            step = _refine_up(ev_s.steps, -ev_s.values, approx, half, +1)
        end = int(x[b - 1])

        def med(arr: np.ndarray, lo: int, hi: int) -> float | None:
            seg = arr[lo:hi]
            seg = seg[np.isfinite(seg)]
            return float(np.median(seg)) if len(seg) else None

        pre = (max(0, a - (b - a)), a)
        ev_after = med(evs, a, b)
        vf_after = med(vf, a, b)
        adv_after = med(adv, a, b)
        parts = []
        if vf_after is not None:
            parts.append(f"{vf_name} ≈ {fmt(vf_after)} (threshold {fmt(self.vf_loss_threshold)})")
        if ev_after is not None:
            parts.append(f"{ev_name} ≈ {fmt(ev_after)}")
        if adv_after is not None:
            parts.append(f"{name_of(run, 'advantages_mean')} ≈ {fmt(adv_after)}")
        vf_before = med(vf, *pre)
        before = f"; before: {vf_name} ≈ {fmt(vf_before)}" if vf_before is not None and a else ""
        msg = (
            f"The critic is not fitting the returns from step {step} to {end} "
            f"({plural(end - step + 1, 'step')}): " + ", ".join(parts) + before + "."
        )
        evidence: dict[str, Any] = {
            "start_step": step,
            "end_step": end,
            "vf_loss_after": vf_after,
            "vf_loss_before": vf_before,
            "vf_loss_threshold": self.vf_loss_threshold,
            "explained_var_after": ev_after,
            "explained_var_before": med(evs, *pre),
            "advantages_mean_after": adv_after,
        }
        return self.finding(
            message=msg,
            metric=vf_name or ev_name,
            step=step,
            end_step=end,
            evidence=evidence,
            advice=_critic_fit_advice(run),
            references=cite_all([f"{SEED_PPO} §4.1", "verl:trainer/ppo/core_algos.py"]),
        )


def _critic_fit_advice(run: Run) -> list[Advice]:
    """Larger critic micro batches, and a look at the critic's learning rate."""
    advice: list[Advice] = []
    for key in (
        "critic.ppo_micro_batch_size_per_gpu",
        "critic.forward_micro_batch_size_per_gpu",
    ):
        advice.append(
            advise(
                run,
                key,
                "Larger critic micro batches give the value function steadier gradients; the "
                "PPO article raised both critic micro batches 4 → 8 and vf_loss fell "
                "0.081 → 0.052 with the advantage mean back within −0.012..0.008. Stay within "
                "memory (the critic forward is lighter than the actor's).",
                f"{SEED_PPO} §4.1",
                suggest=lambda cur: int(cur) * 2,
                rule="double the current value (4 → 8 in the PPO article)",
            )
        )
    advice.append(
        advise(
            run,
            "critic.optim.lr",
            "Check the critic's learning rate: far above verl's default 1e-5 the value "
            "function diverges, far below it never catches up with the returns.",
            f"{SEED_PPO} §4",
            suggest=None,
            rule="about 1e-5 (verl's default); halve it if the value loss rose suddenly",
        )
    )
    return advice


class AdvantageCollapse(Detector, code="LS211", name="advantage-collapse"):
    """Advantages are all ~0 while scores still vary: no learning signal (every group identical).

    Reports the first step of a lasting stretch where `critic/advantages/max` and `/min` are
    both within `eps` of 0, and whether the scores in that stretch vary across samples.

    What it detects:
        At least `min_steps` consecutive logged steps (and `min_fraction` of the run) where
        max(|advantages/max|, |advantages/min|) ≤ eps, with eps the larger of `abs_eps`, twice
        the log's print resolution (`.3f` logs print 0.000 for anything below 5e-4) and
        `rel_eps` × the typical advantage range of the run. The start is walked back over the
        steps already decaying toward 0 (below the earlier level by more than 3 robust sigmas).
        Evidence: the advantage range before
        and during the stretch, and the score spread (max − min, and the variation of the mean).

    Why it matters:
        GRPO's advantage is each sample's score minus its group's mean (divided by the group's
        std). When every sample of every group gets the same score — all right, all wrong, or a
        reward function that returns a constant — every advantage is 0 and the policy gradient
        is 0: the run spends compute and learns nothing. With `rollout.n=1` the group is a
        single sample and the advantage is 0 by construction (verl does not check this).

    Example:
        step:80 - critic/score/mean:0.41 - critic/score/max:1.0 - critic/score/min:0.0 -
        critic/advantages/mean:0.000 - critic/advantages/max:0.000 - critic/advantages/min:0.000

    Advice:
        Raise `actor_rollout_ref.rollout.n` (GRPO needs n ≥ 4 and even; 8 for reasoning tasks)
        so each group has a chance to disagree; keep `actor_rollout_ref.rollout.temperature`
        at 1.0 (lower temperatures make the samples of a group identical); check the data:
        prompts the model always solves or never solves give no signal.

    Known false positives:
        Runs whose reward is intentionally constant for a phase (e.g. a warm-up with a dummy
        reward). PPO/GAE advantages are whitened and never all 0, so for PPO this only fires
        when the logged values really are 0. Accounted for: on an excerpt of a few steps,
        advantages that vanish while a loss, KL or entropy is non-finite at the same steps, or
        the entropy is far above its range, are that failure's consequence (garbage
        generations score alike): info, without advice.

    References:
        seed:grpo-pitfalls §2 (rollout.n: n=1 degenerates, ≥ 4 and even);
        verl:trainer/ppo/core_algos.py (compute_grpo_outcome_advantage).
    """

    title = "Advantages all ~0: no learning signal"
    concepts = ("advantages_max", "advantages_min")
    requires = ("advantages_max", "advantages_min")
    default_severity = "error"
    groups = ("critic", "grpo")

    abs_eps: float = param(1e-3, gt=0)
    rel_eps: float = param(0.02, gt=0)
    min_steps: int = param(5, ge=1)
    min_fraction: float = param(0.03, gt=0, le=1)

    def detect(self, run: Run) -> list[Finding]:
        pair = Series.pair(run, "advantages_max", "advantages_min")
        if pair is None or len(pair[2]) == 0:
            return []
        top, bottom, steps = pair
        mx_name = top.metric
        mx, mn = top.at(steps), bottom.at(steps)
        size = np.maximum(np.abs(mx), np.abs(mn))
        typical = float(np.median(size))
        eps = max(self.abs_eps, 2 * (run.value_resolution or 0.0))
        if len(steps) < self.min_steps:
            return self._short(run, steps, size, eps, mx_name)
        flat = size <= eps
        if typical > eps:
            flat = size <= max(eps, self.rel_eps * typical)
        need = max(self.min_steps, math.ceil(self.min_fraction * len(steps)))
        for a, b in stretches(flat):
            if b - a < need:
                continue
            return [
                self._finding(run, steps, self._decay_start(size, a), b, size, typical, mx_name)
            ]
        return []

    def _short(
        self, run: Run, steps: np.ndarray, size: np.ndarray, eps: float, metric: str
    ) -> list[Finding]:
        """Fewer than `min_steps` steps: every one of them has advantages and pg_loss ~0."""
        if not (size <= eps).all():
            return []
        wanted = [int(x) for x in steps]
        pg = values_by_step(run, "pg_loss")
        pg_at = [pg[s] for s in wanted if s in pg]
        if any(abs(v) > eps for v in pg_at):
            return []
        first, last = wanted[0], wanted[-1]
        where = f"step {first}" if len(wanted) == 1 else f"steps {first}–{last}"
        msg = (
            f"{pair_name(run, 'advantages_max', 'advantages_min')} are ~0 in every logged "
            f"training step ({where}; largest |advantage| {fmt(float(size.max()))})"
            + (f", and {name_of(run, 'pg_loss')} is ~0" if pg_at else "")
            + ": there is no learning signal."
        )
        score = constant_score(run, wanted)
        cause = root_cause(run, wanted)
        if cause is not None:
            msg += " " + cause.note("The lack of signal")
        elif score is not None:
            story = score_story(score, len(wanted))
            msg += " " + story[0].upper() + story[1:]
        advice = reward_fires_advice(run) if score is not None else self._advice(run)
        evidence: dict[str, Any] = {
            "steps": wanted,
            "max_abs_advantage": float(size.max()),
            "max_abs_pg_loss": max((abs(v) for v in pg_at), default=None),
            "epsilon": eps,
            "constant_score": score,
            "judged_on": "every logged step (too few for the stretch test)",
        }
        if cause is not None:
            evidence["consequence_of"] = cause.evidence()
        return [
            self.finding(
                severity="info" if cause is not None else "warning",
                message=msg,
                metric=metric,
                step=first,
                end_step=last,
                evidence=evidence,
                advice=[] if cause is not None else advice,
                references=cite_all([f"{SEED_GRPO} §2", "verl:trainer/ppo/core_algos.py"]),
            )
        ]

    def _advice(self, run: Run) -> list[Advice]:
        """rollout.n (so groups can disagree), temperature 1.0, data of the right difficulty."""
        n_now = advise(
            run,
            f"{RO}.n",
            "GRPO's advantage is a sample's score relative to its group: a group needs enough "
            "samples to disagree. n=1 makes every advantage 0 (verl does not check it), n=2 is "
            "too noisy; 4 on a tight budget, 8 for reasoning tasks (n ≥ 16 costs ~+47% step "
            "time).",
            f"{SEED_GRPO} §2",
            suggest=lambda cur: 4 if int(cur) < 4 else min(16, 2 * int(cur)),
            rule="n ≥ 4 and even (4 tight budget, 8 reasoning)",
        )
        return [
            n_now,
            advise(
                run,
                f"{RO}.temperature",
                "Sampling temperature below 1.0 makes a group's samples near-identical, so they "
                "score alike.",
                "verl:workers/rollout/vllm_rollout",
                suggest=lambda cur: 1.0 if float(cur) < 1.0 else None,
                rule="1.0 for GRPO rollouts",
            ),
            advise(
                run,
                "data.train_files",
                "Prompts the model always solves (or never solves) give every sample the same "
                "score: mix in problems it solves sometimes.",
                f"{SEED_GRPO} §2",
                suggest=None,
                rule="training data of a difficulty the model solves part of the time",
            ),
        ]

    @staticmethod
    def _decay_start(size: np.ndarray, a: int) -> int:
        """Walk back from the first ~0 step over the steps already decaying toward 0."""
        before = size[:a]
        if len(before) < 3:
            return a
        level = float(np.median(before[-50:]))
        spread = max(mad_sigma(before[-50:]), 0.02 * level)
        j = a
        while j > 0 and size[j - 1] < level - 3 * spread and size[j - 1] > 0:
            j -= 1
        return j

    def _finding(
        self,
        run: Run,
        steps: np.ndarray,
        a: int,
        b: int,
        size: np.ndarray,
        typical: float,
        metric: str,
    ) -> Finding:
        start, end = int(steps[a]), int(steps[b - 1])
        lo, hi = steps[a], steps[b - 1]
        spread = None
        smx_name, smn_name = resolve(run, "score_max"), resolve(run, "score_min")
        if smx_name and smn_name:
            top, bottom = Series.read(run, smx_name), Series.read(run, smn_name)
            within = top.steps[(top.steps >= lo) & (top.steps <= hi)]
            common = np.intersect1d(within, bottom.steps, assume_unique=True)
            if len(common):
                spread = float(np.median(top.at(common) - bottom.at(common)))
        score = Series.load(run, "score_mean", "reward_mean")
        mean_name = score.metric if score is not None else None
        mean_var = None
        if score is not None:
            sel = score.values[(score.steps >= lo) & (score.steps <= hi)]
            if len(sel) >= 2:
                mean_var = float(np.std(sel))
        varies = (spread is not None and spread > 1e-6) or (
            mean_var is not None and mean_var > 1e-4
        )
        before = size[:a]
        msg = (
            f"{pair_name(run, 'advantages_max', 'advantages_min')} are ~0 from step {start} to {end} "
            f"({plural(b - a, 'logged step')}; largest |advantage| {fmt(float(size[a:b].max()))}, typical "
            f"{fmt(float(np.median(before)) if len(before) else typical)} before)"
        )
        if spread is not None and spread > 1e-6:
            msg += f", while scores across samples still span {fmt(spread)}"
            msg += " — every group's samples scored alike, so the policy gradient is 0."
        elif varies:
            msg += f", while {mean_name} still varies (std {fmt(mean_var or 0.0)})"
            msg += " — every group's samples scored alike, so the policy gradient is 0."
        else:
            msg += "; the scores do not vary either: every sample gets the same reward."
        advice = self._advice(run)
        evidence = {
            "start_step": start,
            "end_step": end,
            "steps_collapsed": int(b - a),
            "max_abs_advantage_in_stretch": float(size[a:b].max()),
            "typical_abs_advantage_before": float(np.median(before)) if len(before) else None,
            "score_spread_in_stretch": spread,
            "score_mean_std_in_stretch": mean_var,
            "rollout_n": advice[0].current,
        }
        return self.finding(
            message=msg,
            metric=metric,
            step=start,
            end_step=end,
            evidence=evidence,
            advice=advice,
            references=cite_all([f"{SEED_GRPO} §2", "verl:trainer/ppo/core_algos.py"]),
        )
