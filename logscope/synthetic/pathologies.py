"""Injectable pathologies: what each does to a simulated run, and its ground-truth step.

Each `_kind` function edits the latent series of a `_Sim` from `inj.step` on and returns the step
where the effect first shows in the metrics (that is what `SimRun.truth` records). Phase 0 runs on
the drivers before derived metrics are computed (rewards, timings, throughput follow); phase 1
edits finished metrics (NaN, collapsed advantages, truncation).

The truth step is the injection step itself (the step's own values already carry the effect),
except for:
- kl-out-of-band: the first step whose noiseless KL exceeds the band's top, 0.03 (1-3 steps in);
- validation-drop: the first validation step (test_freq multiple or last step) at or after it;
- kl-coef-changed-midrun: the first step after the restart = last checkpoint before the step + 1
  (checkpoints every trainer.save_freq, set to test_freq when the config has none);
- cuda-oom: the step itself, which is the last step printed; the traceback follows its line;
- train-inference-mismatch: the step itself (training/rollout_probs_diff_mean starts rising
  there); `details` adds the first steps where the noiseless Pearson correlation falls below
  0.99 (1-3 steps in at magnitude 1, up to ~8 at 0.7) and where the noiseless rollout_corr kl /
  chi2_token pass 0.1 / 1 (None when rollout correction is not logged or they stay below);
- dynamic-sampling-waste: the first step whose noiseless expected number of generation batches,
  train_batch_size / (gen_batch_size (1 - filtered share)), reaches 3 (2-4 steps in);
- async-imbalance, staleness-high, aborted-responses: the step itself (the idle ratio passes 0.2,
  the staleness max passes `families.allowed_staleness`, aborted_ratio leaves 0 there).
The family kinds (FAMILY_PATHOLOGIES) need their metric family switched on in the config
(`config.family_overrides`); `not_applicable(kind, algorithm, version, config)` says why not.
Magnitude 1 is a clear, typical case; effects scale with it (see PATHOLOGIES) and stay visible
from ~0.7 at noise up to ~1.5. `SimRun.details[kind]` holds extra facts (period, rate, spikes).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from logscope.synthetic import families as _fam
from logscope.synthetic.config import families, get, set_dotted
from logscope.synthetic.versions import at_least, driver_name, ray_pids

if TYPE_CHECKING:
    from logscope.synthetic.simulate import Injection, _Sim

PATHOLOGIES: dict[str, str] = {
    "kl-jump": "abrupt level shift of KL to the reference (×(1+2.5m)) and of actor/ppo_kl (×(1+8m))",
    "kl-out-of-band": "KL to the reference ramps from the 0.01-0.03 band to ~0.018+0.06m (> 0.05)",
    "reward-sawtooth": "periodic sawtooth (period 8-16 steps, 0.12m peak-to-peak) on score/rewards",
    "clip-ratio-spike": "bursts of response truncation (clip_ratio +0.15m) and pg_clipfrac ×(1+4m)",
    "memory-leak": "GPU reserved/allocated memory climbing linearly (~0.03m GiB/step) toward capacity",
    "grad-norm-spike": "isolated actor/grad_norm spikes ×10m (first at the step, 1-2 more later)",
    "entropy-collapse": "actor/entropy decaying fast (time constant 12/m steps) toward ~0.02",
    "response-length-collapse": "mean response length collapsing (or, 30% of seeds, exploding to the cap)",
    "rollout-bottleneck": "timing_s/gen growing to ~80% (0.8+0.07(m-1)) of timing_s/step",
    "throughput-drop": "every phase slower by ×(1+0.6m): lasting rise in step time, drop in throughput",
    "critic-value-error": "PPO critic broken: vf_loss > 0.15, explained var ≪ 0, advantages mean off 0",
    "advantage-collapse": "GRPO advantages (mean/max/min) → 0 while scores still vary",
    "ppo-kl-too-low": "actor/ppo_kl dropping to ~4.5e-5/m (persistently < 1e-4), clipfrac ~0",
    "reward-plateau": "training reward rising until the step, then flat for the rest of the run",
    "validation-drop": "validation accuracy dropping 0.06m at the first validation from the step, "
    "0.14m by the end (×σ/0.02 when one validation's noise σ exceeds 0.02), while training "
    "reward keeps rising",
    "nan-loss": "losses, KL, entropy and grad norm NaN (grad norm inf at the first step) from the step",
    "cuda-oom": "run ends with a Ray-wrapped torch.OutOfMemoryError traceback after the step",
    "grad-norm-not-finite": "WARN `grad_norm is not finite: nan` lines and NaN grad_norm at a few steps",
    "kl-coef-changed-midrun": "restart from a checkpoint with kl_loss_coef ×2^±(0.5+0.5m): new config "
    "segment, KL level shift, reward sawtooth after it",
}

# Pathologies of the metric families verl 0.6-0.10 added (families.py); kept apart from
# PATHOLOGIES, whose set tests/test_synthetic.py pins. ALL_PATHOLOGIES is what `simulate` accepts.
FAMILY_PATHOLOGIES: dict[str, str] = {
    "train-inference-mismatch": "training-inference mismatch growing (time constant 4/m steps): "
    "Pearson correlation down by 0.004+0.016m (below 0.99), rollout_probs_diff_mean ×(2.5+2.5m); "
    "rollout_corr kl +(0.05+0.1m), chi2_token +(0.6+0.9m) when logged (past 0.1 / 1)",
    "async-imbalance": "fully-async idle imbalance: rollouter idle ratio → 0.4+0.2m with the "
    "trainer's ~0.015, or (half the seeds) trainer idle → 0.4+0.2m with the rollouter's 0",
    "staleness-high": "fully-async trajectory staleness above the allowed lag: max → allowed+1+"
    "round(2m) versions from the step, mean → halfway, spans and dropped stale samples rising",
    "dynamic-sampling-waste": "DAPO filter discarding most groups: filtered share → 0.72+0.1m "
    "(time constant 3 steps), 4-6 generation batches per step instead of 1-2",
    "aborted-responses": "response/aborted_ratio rising to (0.02+0.1m)(time constant 4) with vLLM "
    "preemption (timing_s/agent_loop/num_preempted/mean → 1.5+4m) when agent-loop metrics log",
}
ALL_PATHOLOGIES: dict[str, str] = {**PATHOLOGIES, **FAMILY_PATHOLOGIES}

# 0: edits drivers before derivation; 1: edits derived metrics.
PHASE: dict[str, int] = {k: 0 for k in ALL_PATHOLOGIES}
PHASE.update({"nan-loss": 1, "advantage-collapse": 1, "grad-norm-not-finite": 1, "cuda-oom": 1})


def not_applicable(
    kind: str, algorithm: str, version: str, config: dict[str, Any] | None = None
) -> str | None:
    """Why `kind` cannot be injected into this run (None when it can).

    With `config` (a resolved run config) the family kinds also check that their family logs."""
    if kind in FAMILY_PATHOLOGIES:
        return _family_not_applicable(kind, algorithm, version, config)
    if kind == "critic-value-error" and algorithm != "ppo":
        return "critic metrics exist only in PPO (GAE) runs"
    if kind == "advantage-collapse" and algorithm != "grpo":
        return "PPO advantages are whitened per batch; collapse is a GRPO (group) pathology"
    if kind == "memory-leak" and not at_least(version, "0.3"):
        return f"verl {version} logs no GPU memory metrics (added in 0.3)"
    if kind == "throughput-drop" and not at_least(version, "0.3"):
        # timing still shows it; perf/throughput is 0.3+, but a step-time rise is visible anyway
        return None
    return None


def _family_not_applicable(
    kind: str, algorithm: str, version: str, config: dict[str, Any] | None
) -> str | None:
    if kind == "train-inference-mismatch":
        if not at_least(version, "0.7"):
            return (
                f"verl {version} logs no training-inference mismatch metrics (0.6+; simulated 0.7+)"
            )
    elif not at_least(version, "0.9"):
        return f"verl {version}: the simulator writes this family from 0.9 on"
    if kind == "dynamic-sampling-waste" and algorithm != "grpo":
        return "DAPO group filtering needs GRPO groups"
    if config is None:
        return None
    fam = families(config, version)
    if kind == "train-inference-mismatch" and not fam["mismatch"]:
        return "needs actor_rollout_ref.rollout.calculate_log_probs=True (the mismatch metrics)"
    if kind in ("async-imbalance", "staleness-high") and not fam["fully_async"]:
        return "needs the fully-async recipe: an async_training block (family_overrides(fully_async=True))"
    if kind == "dynamic-sampling-waste":
        group = int(get(config, "actor_rollout_ref.rollout.n", 1) or 1)
        if not fam["filter_groups"] or group <= 1:
            return "needs algorithm.filter_groups.enable=True and rollout.n > 1"
    return None


def apply(sim: _Sim, inj: Injection) -> int:
    """Apply one injection; returns its ground-truth step."""
    i = sim.validate_step(inj.step, inj.kind)
    m = float(inj.magnitude)
    if not m > 0:
        raise ValueError(f"magnitude must be > 0, got {inj.magnitude!r}")
    return _FUNCS[inj.kind](sim, i, m)


def _ramp(k: np.ndarray, tau: float) -> np.ndarray:
    """0 → 1 with time constant tau; already > 0 at k = 0 (the injection step shows)."""
    return 1.0 - np.exp(-(k + 1.0) / max(tau, 1e-9))


def _k(sim: _Sim, i: int) -> np.ndarray:
    return np.arange(sim.n - i, dtype=np.float64)


# ---- phase 0 -------------------------------------------------------------------------------
def _kl_jump(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    hold = 0.6 + 0.4 * np.exp(-k / 30.0)  # partly relaxes, stays elevated
    sim.a["kl"][i:] *= 1 + 2.5 * m * hold
    sim.a["ppo_kl"][i:] *= 1 + 8.0 * m * hold
    sim.a["pg_clipfrac"][i:] *= 1 + 1.5 * m * hold
    return int(sim.steps[i])


def _kl_out_of_band(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    add = 0.06 * m * _ramp(k, 8.0)
    sim.a["kl"][i:] += add * sim.factor["kl"][i:]
    clean = sim.clean["kl"][i:] + add
    above = np.nonzero(clean > 0.03)[0]
    if not len(above):
        raise ValueError("kl-out-of-band: magnitude too small to leave the 0.01-0.03 band")
    sim.details["kl-out-of-band"] = {"final_kl": float(clean[-1])}
    return int(sim.steps[i + above[0]])


def _sawtooth(sim: _Sim, i: int, amp: float, period: int) -> None:
    k = _k(sim, i)
    sim.a["score"][i:] += amp * ((k % period) / period - 0.5)


def _reward_sawtooth(sim: _Sim, i: int, m: float) -> int:
    period = int(sim.rng.integers(8, 17))
    _sawtooth(sim, i, 0.12 * m, period)
    sim.details["reward-sawtooth"] = {"period": period, "amplitude": 0.12 * m}
    return int(sim.steps[i])


def _clip_ratio_spike(sim: _Sim, i: int, m: float) -> int:
    n = sim.n
    burst = [i + j for j in range(int(sim.rng.integers(1, 4))) if i + j < n]
    later = []
    if n - i > 30:
        later = sorted(sim.rng.choice(np.arange(i + 12, n), size=min(2, n - i - 12), replace=False))
    spikes = np.array(burst + [int(x) for x in later])
    add = 0.15 * m * sim.rng.uniform(0.8, 1.2, len(spikes))
    sim.a["clip_ratio"][spikes] += add
    resp = sim.a["resp"]
    resp[spikes] += add * (sim.resp_cap - resp[spikes]) * 0.8
    sim.a["pg_clipfrac"][spikes] *= 1 + 4.0 * m
    sim.details["clip-ratio-spike"] = {"spike_steps": [int(sim.steps[x]) for x in spikes]}
    return int(sim.steps[i])


def _memory_leak(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    cap = sim.L["mem_capacity"]
    reserved = float(np.median(sim.a["mem_reserved"][: max(1, i)] if i else sim.a["mem_reserved"]))
    headroom = max(1.0, 0.97 * cap - reserved)
    rate = m * min(0.03, 0.6 * headroom / max(1, sim.n - i))
    sim.a["mem_reserved"][i:] = np.minimum(sim.a["mem_reserved"][i:] + rate * (k + 1), 0.99 * cap)
    sim.a["mem_allocated"][i:] += 0.9 * rate * (k + 1)
    sim.details["memory-leak"] = {"rate_gb_per_step": rate, "capacity_gb": cap}
    return int(sim.steps[i])


def _grad_norm_spike(sim: _Sim, i: int, m: float) -> int:
    n = sim.n
    spikes = [i]
    if n - i > 25:
        more = sim.rng.choice(np.arange(i + 10, n), size=int(sim.rng.integers(1, 3)), replace=False)
        spikes += sorted(int(x) for x in more)
    factors = 10.0 * m * np.concatenate([[1.0], sim.rng.uniform(0.6, 1.0, len(spikes) - 1)])
    sim.a["grad_norm"][spikes] *= factors
    sim.a["pg_clipfrac"][spikes] *= 3.0
    sim.details["grad-norm-spike"] = {"spike_steps": [int(sim.steps[x]) for x in spikes]}
    return int(sim.steps[i])


def _entropy_collapse(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    floor = 0.03
    sim.a["entropy"][i:] *= floor + (1 - floor) * (1 - _ramp(k, 12.0 / m))
    return int(sim.steps[i])


def _response_length_collapse(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    r = _ramp(k, 8.0 / m)
    if sim.rng.random() < 0.7:
        floor = max(0.05, 1 - 0.85 * m)
        sim.a["resp"][i:] *= 1 - (1 - floor) * r
        sim.a["clip_ratio"][i:] *= 1 - r
        mode = "collapse"
    else:
        target = 0.97 * sim.resp_cap
        sim.a["resp"][i:] += (target - sim.a["resp"][i:]) * r
        sim.a["clip_ratio"][i:] += (0.85 - sim.a["clip_ratio"][i:]) * r
        mode = "explode"
    sim.details["response-length-collapse"] = {"mode": mode}
    return int(sim.steps[i])


def _other_phases(sim: _Sim) -> np.ndarray:
    return sum(sim.a[f"t_{p}"] for p in sim.phases if p != "gen")


def _rollout_bottleneck(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    share = float(np.clip(0.8 + 0.07 * (m - 1), 0.72, 0.95))
    others = _other_phases(sim)[i:]
    target = share * others / (1 - share) * sim.rng.lognormal(0, 0.03, len(k))
    gen = sim.a["t_gen"][i:]
    sim.a["t_gen"][i:] = gen + (np.maximum(target, gen) - gen) * _ramp(k, 1.5)
    sim.details["rollout-bottleneck"] = {"gen_share": share}
    return int(sim.steps[i])


def _throughput_drop(sim: _Sim, i: int, m: float) -> int:
    factor = 1 + 0.6 * m
    for p in sim.phases:
        sim.a[f"t_{p}"][i:] *= factor
    sim.details["throughput-drop"] = {"slowdown": factor}
    return int(sim.steps[i])


def _critic_value_error(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    r = _ramp(k, 3.0)
    sign = 1.0 if sim.rng.random() < 0.5 else -1.0
    sim.a["vf_loss"][i:] += (0.15 + 0.1 * m) * r * sim.rng.lognormal(0, 0.1, len(k))
    sim.a["explained_var"][i:] -= (0.6 + 0.6 * m) * r
    sim.a["adv_mean"][i:] += sign * 0.06 * m * r
    sim.a["value_err"][i:] += sign * 0.3 * m * r
    sim.a["critic_grad_norm"][i:] *= 1 + 1.5 * m * r
    return int(sim.steps[i])


def _ppo_kl_too_low(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    level = 4.5e-5 / m
    r = _ramp(k, 2.0)
    sim.a["ppo_kl"][i:] = (sim.clean["ppo_kl"][i:] * (1 - r) + level * r) * sim.factor["ppo_kl"][i:]
    sim.a["pg_clipfrac"][i:] *= 1 - 0.9 * r
    return int(sim.steps[i])


def _reward_plateau(sim: _Sim, i: int, m: float) -> int:
    t = sim.t
    start = sim.a["score"] - sim.clean["score"]  # keep the noise, replace the centre
    s0 = sim.L["score_start"]
    top = min(0.95, s0 + 0.35 * min(m, 1.6))
    frac = np.minimum(1.0, t / t[i]) ** 0.8
    centre = s0 + (top - s0) * frac
    sim.clean["score"] = centre
    sim.a["score"] = centre + start
    return int(sim.steps[i])


def _validation_drop(sim: _Sim, i: int, m: float) -> int:
    step = int(sim.steps[i])
    vs = sim.val_steps
    after = np.nonzero(vs >= step)[0]
    if not len(after):
        raise ValueError("validation-drop needs a validation step (test_freq) at or after the step")
    last = float(sim.steps[-1])
    frac = (vs[after] - step) / max(1.0, last - step)
    # over-fitting: the validation curve stops following the training reward, then falls
    clean = sim.clean["val"]
    at_step = float(np.interp(step, vs, clean))
    # a clear case on any validation set: at least ~5 sd of one validation's sampling noise
    # by the end (deeper than 0.14m on sets of fewer than ~500 prompts)
    noise = math.sqrt(at_step * (1 - at_step) / sim.val_size)
    depth = 0.14 * m * max(1.0, noise / 0.02)
    sim.val["acc"][after] += at_step - clean[after] - depth * (0.45 + 0.55 * frac)
    sim.details["validation-drop"] = {"depth": depth}
    k = _k(sim, i)
    sim.a["score"][i:] += 0.05 * m * k / max(1, sim.n - i)
    return int(vs[after[0]])


def _checkpoint_before(sim: _Sim, step: int, what: str) -> tuple[int, int]:
    """(last checkpoint step before `step`, last step printed before the restart)."""
    save_freq = int(get(sim.cfg, "trainer.save_freq", -1))
    ckpt = ((step - 1) // save_freq) * save_freq if save_freq > 0 else 0
    if ckpt < 1:
        raise ValueError(
            f"{what} at step {step}: no checkpoint before it "
            f"(trainer.save_freq={save_freq}); choose a step > save_freq"
        )
    return ckpt, min(int(sim.steps[-1]), max(step - 1, ckpt + 2))


def resume(sim: _Sim, step: int) -> None:
    """A healthy restart: the run dies after `step - 1`, resumes from the last checkpoint with the
    same config (printed again); the steps after the checkpoint are logged twice."""
    ckpt, last_printed = _checkpoint_before(sim, step, "resume")
    first_attempt = {k: v.copy() for k, v in sim.a.items()}
    ri = ckpt + 1 - sim.first
    for name in ("score", "pg_loss", "grad_norm", "ppo_kl", "entropy"):
        sim.a[name][ri:] *= 1 + 0.01 * sim.z(sim.n - ri)
    if sim.dyn.memory_warmup_steps:  # new processes: the allocator warms up again
        w, t = sim.dyn.memory_warmup_steps, sim.t[ri:]
        again = (1 - 0.25 * np.exp(-(t - t[0]) / w)) / (1 - 0.25 * np.exp(-(t - 1) / w))
        for name in ("mem_reserved", "mem_allocated"):
            sim.a[name][ri:] *= again
    sim.restart = {
        "checkpoint_step": ckpt,
        "resume_step": ckpt + 1,
        "last_printed": last_printed,
        "config": copy.deepcopy(sim.cfg),
        "first_attempt_drivers": first_attempt,
        "first_val": {k: v.copy() for k, v in sim.val.items()},
    }


def _kl_coef_changed_midrun(sim: _Sim, i: int, m: float) -> int:
    cfg = sim.cfg
    step = int(sim.steps[i])
    ckpt, last_printed = _checkpoint_before(sim, step, "kl-coef-changed-midrun")
    resume = ckpt + 1
    ri = resume - sim.first
    use_kl_loss = bool(get(cfg, "actor_rollout_ref.actor.use_kl_loss", False)) and at_least(
        sim.version, "0.2"
    )
    key = "actor_rollout_ref.actor.kl_loss_coef" if use_kl_loss else "algorithm.kl_ctrl.kl_coef"
    old = float(get(cfg, key, 0.001) or 0.001)
    up = sim.rng.random() < 0.5
    ratio = 2.0 ** ((0.5 + 0.5 * m) * (1 if up else -1))
    new = float(f"{old * ratio:.2g}")
    new_cfg = copy.deepcopy(cfg)
    set_dotted(new_cfg, key, new)
    first_attempt = {k: v.copy() for k, v in sim.a.items()}
    first_val = {k: v.copy() for k, v in sim.val.items()}
    # after the restart: KL level follows the coefficient (mechanics), reward saw-tooths
    sim.a["kl"][ri:] *= (old / new) ** 0.3
    period = int(sim.rng.integers(6, 15))
    _sawtooth(sim, ri, 0.09 * m, period)
    # the re-run steps differ from the first attempt's (new sampling)
    for name in ("score", "pg_loss", "grad_norm", "ppo_kl", "entropy"):
        sim.a[name][ri:] *= 1 + 0.01 * sim.z(sim.n - ri)
    coef_series = np.full(
        sim.n,
        old
        if use_kl_loss
        else float(get(cfg, "actor_rollout_ref.actor.kl_loss_coef", 0.001) or 0.0),
    )
    beta_series = np.full(sim.n, float(get(cfg, "algorithm.kl_ctrl.kl_coef", 0.001) or 0.001))
    if use_kl_loss:
        coef_series[ri:] = new
    else:
        beta_series[ri:] = new
    sim.a["kl_coef"], sim.a["beta"] = coef_series, beta_series
    first_attempt["kl_coef"] = np.full(sim.n, coef_series[0])
    first_attempt["beta"] = np.full(sim.n, beta_series[0])
    sim.restart = {
        "checkpoint_step": ckpt,
        "resume_step": resume,
        "last_printed": last_printed,
        "config": new_cfg,
        "first_attempt_drivers": first_attempt,
        "first_val": first_val,
    }
    sim.details["kl-coef-changed-midrun"] = {
        "key": key,
        "old": old,
        "new": new,
        "checkpoint_step": ckpt,
        "last_printed_before_restart": last_printed,
        "sawtooth_period": period,
    }
    return resume


# ---- phase 1 -------------------------------------------------------------------------------
_LOSSES = ("pg_loss", "kl", "ppo_kl", "grad_norm", "entropy", "actor_loss")
_CRITIC = (
    "vf_loss",
    "critic_grad_norm",
    "values_mean",
    "values_max",
    "values_min",
    "vpred_mean",
    "explained_var",
)


def _nan_loss(sim: _Sim, i: int, m: float) -> int:
    a = sim.a
    for name in _LOSSES:
        if name in a:
            a[name][i:] = np.nan
    if sim.algorithm == "ppo":
        for name in _CRITIC:
            a[name][i:] = np.nan
    a["grad_norm"][i] = np.inf
    k = _k(sim, i)
    fall = _ramp(k, 2.0)
    for name in ("score_mean", "rewards_mean"):
        a[name][i:] = a[name][i:] * (1 - fall) + 0.01 * fall
    return int(sim.steps[i])


def _advantage_collapse(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    f = 1 - _ramp(k, 2.0 / m)
    a = sim.a
    for name in ("adv_mean", "adv_max", "adv_min", "returns_mean", "returns_max", "returns_min"):
        a[name][i:] *= f
    a["pg_loss"][i:] *= f
    a["pg_clipfrac"][i:] *= f
    a["grad_norm"][i:] *= 0.05 + 0.95 * f
    a["ppo_kl"][i:] *= 0.1 + 0.9 * f
    return int(sim.steps[i])


def _worker_pid(sim: _Sim, rank: int) -> int:
    return ray_pids(sim.seed)[1][rank % 8]


def warn_lines(sim: _Sim, value: str = "nan") -> str:
    text = (
        "WARN: grad_norm is not finite: "
        if at_least(sim.version, "0.9")
        else ("WARN: rank {r} grad_norm is not finite: ")
    )
    first = f"(WorkerDict pid={_worker_pid(sim, 0)}) " + text.format(r=0) + value
    if sim.n_gpus <= 1:
        return first
    rest = (
        f"(WorkerDict pid={_worker_pid(sim, 1)}) "
        + text.format(r=1)
        + value
        + f" [repeated {sim.n_gpus - 1}x across cluster]"
    )
    return first + "\n" + rest


def _grad_norm_not_finite(sim: _Sim, i: int, m: float) -> int:
    n = sim.n
    steps = [i]
    if n - i > 20:
        count = int(np.clip(round(1 + 1.5 * m), 1, 4))
        more = sim.rng.choice(np.arange(i + 5, n), size=min(count, n - i - 5), replace=False)
        steps += sorted(int(x) for x in more)
    for j in steps:
        sim.a["grad_norm"][j] = np.nan
        sim.events.append((int(sim.steps[j]), warn_lines(sim)))
    sim.details["grad-norm-not-finite"] = {"steps": [int(sim.steps[j]) for j in steps]}
    return int(sim.steps[i])


def _cuda_oom(sim: _Sim, i: int, m: float) -> int:
    if sim.truncate_after is None or i < sim.truncate_after:
        sim.truncate_after = i
    sim.events.append((int(sim.steps[i]), oom_traceback(sim)))
    return int(sim.steps[i])


def oom_traceback(sim: _Sim) -> str:
    """A Ray-wrapped CUDA OOM as the driver prints it when the actor update runs out of memory."""
    pid, wpid = ray_pids(sim.seed)[0], _worker_pid(sim, 0)
    runner = driver_name(sim.version)
    site = "/usr/local/lib/python3.10/dist-packages"
    cap = sim.L["mem_capacity"] - 0.75
    tried = round(1.0 + 2.0 * float(sim.rng.random()), 2)
    actor_id = f"{int(sim.rng.integers(0, 2**62)):032x}"
    cause = "OutOfMemoryError"
    lines = [
        f"(WorkerDict pid={wpid}) [rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to "
        f"allocate {tried:.2f} GiB. GPU 0 has a total capacity of {cap:.2f} GiB of which "
        f"{tried * 0.4:.2f} GiB is free.",
        "Error executing job with overrides: []",
        "Traceback (most recent call last):",
        f'  File "{site}/verl/trainer/main_ppo.py", line 39, in main',
        "    run_ppo(config)",
        f'  File "{site}/verl/trainer/main_ppo.py", line 69, in run_ppo',
        "    ray.get(runner.run.remote(config))",
        f'  File "{site}/ray/_private/worker.py", line 2822, in get',
        "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)",
        f'  File "{site}/ray/_private/worker.py", line 930, in get_objects',
        "    raise value.as_instanceof_cause()",
        f"ray.exceptions.RayTaskError({cause}): ray::{runner}.run() (pid={pid}, "
        f"ip=10.0.0.12, actor_id={actor_id}, repr=<main_ppo.{runner} object at 0x7f3c2a1b4e50>)",
        f'  File "{site}/verl/trainer/ppo/ray_trainer.py", line 1112, in fit',
        "    actor_output = self.actor_rollout_wg.update_actor(batch)",
        f'  File "{site}/verl/single_controller/ray/base.py", line 51, in __call__',
        "    output = ray.get(output)",
        f"ray.exceptions.RayTaskError({cause}): ray::WorkerDict.actor_rollout_update_actor() "
        f"(pid={wpid}, ip=10.0.0.12, actor_id={actor_id[::-1]}, "
        "repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f1e9c3b2d10>)",
        f'  File "{site}/verl/workers/actor/dp_actor.py", line 410, in update_policy',
        "    loss.backward()",
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried:.2f} GiB. GPU 0 has "
        f"a total capacity of {cap:.2f} GiB of which {tried * 0.4:.2f} GiB is free. Process {wpid} "
        f"has {cap - tried * 0.4:.2f} GiB memory in use. Of the allocated memory "
        f"{cap * 0.9:.2f} GiB is allocated by PyTorch, and {cap * 0.05:.2f} GiB is reserved by "
        "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        "",
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.",
    ]
    return "\n".join(lines)


# ---- family pathologies (phase 0, on the latent series of families.py) -----------------------
def _train_inference_mismatch(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    r = _ramp(k, 4.0 / m)
    a, st = sim.a, sim.fstate
    a["mm_mult"][i:] *= 1 + (1.5 + 2.5 * m) * r
    a["mm_pdef"][i:] += (0.004 + 0.016 * m) * r
    details: dict[str, Any] = {"diff_factor": 2.5 + 2.5 * m, "kl_cross_step": None}
    details["chi2_cross_step"] = None
    if sim.fam["rollout_corr"]:
        a["mm_chi2"][i:] += (0.6 + 0.9 * m) * r
        a["mm_kl"][i:] += (0.05 + 0.1 * m) * r
        kl = st["chi2"] * st["kl_share"] + a["mm_kl"][i:]
        chi2 = st["chi2"] + a["mm_chi2"][i:]
        for name, series, limit in (("kl", kl, 0.1), ("chi2", chi2, 1.0)):
            above = np.nonzero(series > limit)[0]
            details[f"{name}_cross_step"] = int(sim.steps[i + above[0]]) if len(above) else None
    clean = 1 - (st["pearson_def"] + a["mm_pdef"][i:])
    below = np.nonzero(clean < 0.99)[0]
    if not len(below):
        raise ValueError(
            "train-inference-mismatch: too late or too small to take Pearson below 0.99"
        )
    details["pearson_cross_step"] = int(sim.steps[i + below[0]])
    sim.details["train-inference-mismatch"] = details
    return int(sim.steps[i])


def _async_imbalance(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    r = _ramp(k, 1.5)
    a = sim.a
    target = min(0.9, 0.4 + 0.2 * m)
    direction = "rollouter-idle" if sim.rng.random() < 0.5 else "trainer-idle"
    roll, train = a["fa_rollouter_idle"], a["fa_trainer_idle"]
    if direction == "rollouter-idle":  # the trainer is the bottleneck: rollout GPUs wait
        roll[i:] += (target - roll[i:]) * r
        train[i:] += (0.015 - train[i:]) * r
    else:  # the rollouter is the bottleneck: the trainer waits for samples
        train[i:] += (target - train[i:]) * r
        roll[i:] = np.where(r > 0.9, 0.0, roll[i:] * (1 - r))  # it never idles: verl logs 0
    _fam.set_trainer_wait(sim, i)
    sim.details["async-imbalance"] = {"direction": direction, "idle_ratio": target}
    return int(sim.steps[i])


def _staleness_high(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    r = _ramp(k, 3.0)
    a = sim.a
    allowed = _fam.allowed_staleness(sim.cfg)
    top = allowed + 1 + round(2 * m)
    a["st_lag_max"][i:] = np.maximum(allowed + 1, np.round(allowed + (top - allowed) * r))
    goal = allowed + 0.5 * (top - allowed)
    a["st_lag_mean"][i:] += (goal - a["st_lag_mean"][i:]) * r
    a["st_span_mean"][i:] += 0.3 * m * r
    a["st_span_max"][i:] = np.maximum(a["st_span_max"][i:], 2 + np.round(m * r))
    a["fa_dropped"][i:] += sim.samples * 0.05 * m * r
    sim.details["staleness-high"] = {"allowed": allowed, "max_staleness": int(top)}
    return int(sim.steps[i])


def _dynamic_sampling_waste(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    r = _ramp(k, 3.0)
    a, st = sim.a, sim.fstate
    f = a["dapo_f"]
    target = min(0.92, 0.72 + 0.1 * m)
    f[i:] += (target - f[i:]) * r
    before = _fam.round_factor(sim, st["k"])
    _fam.gen_batches(sim)
    if not sim.fam["fully_async"]:  # sync: each extra batch is another generation round
        a["t_gen"] *= _fam.round_factor(sim, st["k"]) / before
    expected = sim.batch / (_fam.gen_batch_size(sim) * (1 - np.clip(f[i:], 0.0, 0.995)))
    hit = np.nonzero(expected >= 3.0)[0]
    if not len(hit):
        raise ValueError("dynamic-sampling-waste: too late to reach 3 generation batches per step")
    sim.details["dynamic-sampling-waste"] = {"filtered_share": target}
    return int(sim.steps[i + hit[0]])


def _aborted_responses(sim: _Sim, i: int, m: float) -> int:
    k = _k(sim, i)
    r = _ramp(k, 4.0)
    a = sim.a
    level = 0.02 + 0.1 * m
    ratio = a.setdefault("aborted_ratio", np.zeros(sim.n))
    ratio[i:] = np.clip(level * r * sim.lognoise(0.15)[i:], 1.0 / sim.samples, 0.9)
    if sim.fam.get("agent_loop") and sim.fstate.get("preempt_available"):
        mean = (1.5 + 4.0 * m) * r * sim.lognoise(0.2)[i:]
        a["np_mean"][i:] = mean
        a["np_max"][i:] = np.ceil(mean * sim.rng.uniform(4.0, 8.0, len(k)))
        a["np_min"][i:] = 0.0
    sim.details["aborted-responses"] = {"aborted_ratio": level}
    return int(sim.steps[i])


_FUNCS: dict[str, Callable[[Any, int, float], int]] = {
    "kl-jump": _kl_jump,
    "kl-out-of-band": _kl_out_of_band,
    "reward-sawtooth": _reward_sawtooth,
    "clip-ratio-spike": _clip_ratio_spike,
    "memory-leak": _memory_leak,
    "grad-norm-spike": _grad_norm_spike,
    "entropy-collapse": _entropy_collapse,
    "response-length-collapse": _response_length_collapse,
    "rollout-bottleneck": _rollout_bottleneck,
    "throughput-drop": _throughput_drop,
    "critic-value-error": _critic_value_error,
    "advantage-collapse": _advantage_collapse,
    "ppo-kl-too-low": _ppo_kl_too_low,
    "reward-plateau": _reward_plateau,
    "validation-drop": _validation_drop,
    "nan-loss": _nan_loss,
    "cuda-oom": _cuda_oom,
    "grad-norm-not-finite": _grad_norm_not_finite,
    "kl-coef-changed-midrun": _kl_coef_changed_midrun,
    "train-inference-mismatch": _train_inference_mismatch,
    "async-imbalance": _async_imbalance,
    "staleness-high": _staleness_high,
    "dynamic-sampling-waste": _dynamic_sampling_waste,
    "aborted-responses": _aborted_responses,
}
assert set(_FUNCS) == set(ALL_PATHOLOGIES)
_ = math
