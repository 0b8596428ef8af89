"""The metric families verl 0.6-0.10 added, simulated with their verl 0.9/0.10 names.

Switched by the verl config keys in `config.families` (off by default for versions <= 0.9, so
their output is unchanged; 0.10 follows verl's defaults). Every draw comes from a separate
generator (`_Sim.frng`), never from the run's own stream. Healthy levels (verl_metrics.md §3-§5):

- mismatch (`rollout.calculate_log_probs`): `training/rollout_probs_diff_mean` flat at a run level
  of 3.3e-3-4.5e-3 (verl-omni#637: 4e-3) with slow AR wander, `_std` 5-7x the mean, `_max`
  ~0.7, `_valid` 1; `training/rollout_actor_probs_pearson_corr` 1 - (6e-4..1.6e-3): 0.998-0.9995.
- rollout_corr (`algorithm.rollout_correction` with rollout_is/rollout_rs/bypass_mode): chi2_token
  0.03-0.07 per run (<= 0.1), kl = k3_kl ~ 0.06-0.1 chi2 (|kl| <= 0.01), log-PPL of the entropy's
  order, log_ppl_abs_diff ~0.01; IS weights (rollout_is set): mean ~0.99, std ~0.2, ESS ~0.95,
  raw max 4-20, min 0.02-0.1. Bypass mode prints them as `actor/rollout_corr/*` (and they then
  include the policy's own drift, `actor/ppo_kl`).
- fully-async recipe (an `async_training` block): `fully_async/trainer/idle_ratio` =
  timing_s/gen / timing_s/step (the trainer's wait for samples) 0.04-0.12 per run, the rollouter's
  0 at many steps and <= 0.19 otherwise (both <= 0.2; in realistic runs the first step waits for
  the first batch: trainer idle 0.5-0.7 at step 1); trajectory staleness (versions) mean ~0.1-0.3,
  max <= `allowed_staleness` = max(1, ceil(staleness_threshold)), spans 1-2; cumulative
  `fully_async/count/*`; `timing_s/param_sync` ~0.5+0.35*size_b s;
  `timing_s/wait_for_enough_samples` (dynamic resource scheduling only) 5-15 % of the step.
- DAPO filter (`algorithm.filter_groups.enable`, GRPO): per-prompt accuracy ~ Beta with the
  training score as mean (concentration 2.5-4), groups all-correct/all-wrong are filtered;
  generation batches per step are drawn until enough groups have signal (1-2 healthy, filtered
  share ~0.2-0.45). verl 0.9's V1 trainer logs no batch count (it ignores max_num_gen_batches):
  it logs `training/filter_groups/evicted_samples` (filtered groups) and
  `training/filter_groups/discarded_surplus_samples` (surplus groups), only at steps where they
  are > 0; batches = (train_batch_size + evicted + surplus) / gen_batch_size (`data.gen_batch_size`,
  default train_batch_size: then 2 batches at most steps; 1.5x: 1-2). The legacy DAPO recipe
  trainer (`trainer.use_v1=False`) logs `train/num_gen_batches` instead.
- agent loop (a `rollout.agent` block): `timing_s/agent_loop/generate_sequences/{min,max,mean}`,
  `timing_s/agent_loop/num_preempted/{min,max,mean}` 0 (vLLM) or -1 (not available: SGLang),
  `response_length_non_aborted/*` = `response_length/*`; `response/aborted_ratio` 0 (0.9+).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import gammaln

from logscope.synthetic.config import families, get

if TYPE_CHECKING:
    from logscope.synthetic.simulate import _Sim

FAMILY_SEED = 0xFA11
MAX_GEN_BATCHES = 12  # a step's generation rounds are simulated up to this many

RC_OFFPOLICY = (
    "training_ppl",
    "training_log_ppl",
    "kl",
    "k3_kl",
    "rollout_ppl",
    "rollout_log_ppl",
    "log_ppl_diff",
    "log_ppl_abs_diff",
    "log_ppl_diff_max",
    "log_ppl_diff_min",
    "ppl_ratio",
    "chi2_token",
    "chi2_seq",
)
RC_IS = (
    "rollout_is_max",
    "rollout_is_min",
    "rollout_is_mean",
    "rollout_is_ratio_fraction_high",
    "rollout_is_ratio_fraction_low",
    "rollout_is_std",
    "rollout_is_eff_sample_size",
)
FA_COUNTS = (
    "total_generated_samples",
    "stale_samples_processed",
    "stale_trajectory_processed",
    "current_param_version",
    "dropped_stale_samples",
)
STALENESS = ("trajectory_spans", "trajectory_staleness", "trajectory_staleness_worst")


@contextmanager
def _own_rng(s: _Sim) -> Iterator[None]:
    """Route `s.z()`, `s.lognoise()`, … through the family generator."""
    main = s.rng
    s.rng = s.frng
    try:
        yield
    finally:
        s.rng = main


def active(s: _Sim) -> dict[str, Any]:
    return getattr(s, "fam", None) or {}


def allowed_staleness(cfg: dict[str, Any]) -> int:
    """Versions a trajectory may lag in a healthy fully-async run: max(1, ceil(threshold)).

    `async_training.staleness_threshold` is a share of extra samples the rollouter may produce
    per parameter version (0.1 by default), not a version count; below 1 a sample lags 1 version
    at most."""
    thr = float(get(cfg, "async_training.staleness_threshold", 0.1) or 0.0)
    return max(1, math.ceil(thr - 1e-9))


def setup(s: _Sim, seed: int) -> None:
    """Decide the families from the config and draw their healthy latent series."""
    fam = families(s.cfg, s.version)
    if s.algorithm != "grpo" or s.group <= 1:
        fam["filter_groups"] = False  # the DAPO filter needs groups of responses
    s.fam = fam
    s.fstate = {}
    if not any(fam.values()):
        return
    s.frng = np.random.default_rng([int(seed), 1 if s.algorithm == "ppo" else 0, FAMILY_SEED])
    with _own_rng(s):
        s.fstate["gen_own"] = s.a["t_gen"].copy()  # generation time before any async override
        if fam["mismatch"]:
            _mismatch_drivers(s)
        if fam["fully_async"]:
            _async_drivers(s)
        if fam["staleness"]:
            _staleness_drivers(s)
        if fam["filter_groups"]:
            _dapo_drivers(s)
        if fam["agent_loop"]:
            _agent_drivers(s)


# ---- drivers (before injections) ------------------------------------------------------------
def _mismatch_drivers(s: _Sim) -> None:
    a, st, r, n = s.a, s.fstate, s.frng, s.n
    st["diff_level"] = float(r.uniform(3.3e-3, 4.5e-3))
    st["pearson_def"] = float(r.uniform(6e-4, 1.6e-3))
    a["mm_x"] = s.lognoise(0.05, phi=0.7)  # mismatch severity, median 1
    a["mm_def_noise"] = s.lognoise(0.1, phi=0.5)
    a["mm_std_ratio"] = float(r.uniform(5.0, 7.0)) * s.lognoise(0.04)
    a["mm_max"] = np.clip(0.72 + 0.06 * s.noise * s.z(), 0.3, 0.999)
    for key in ("mm_mult",):
        a[key] = np.ones(n)
    for key in ("mm_pdef", "mm_chi2", "mm_kl"):
        a[key] = np.zeros(n)
    if active(s)["rollout_corr"]:
        st["chi2"] = float(r.uniform(0.03, 0.07))
        st["kl_share"] = float(r.uniform(0.06, 0.1))
        st["k3_ratio"] = float(r.uniform(0.9, 1.1))
        st["ppl_share"] = float(r.uniform(0.85, 1.0))
        st["ppl_spread"] = float(r.uniform(0.01, 0.04))
        st["diff_share"] = float(r.uniform(0.8, 1.0))
        st["is_var_share"] = float(r.uniform(0.55, 0.75))
        st["seq_share"] = float(r.uniform(0.4, 0.8))
        a["rc_chi2_noise"] = s.lognoise(0.08, phi=0.5)
        a["rc_kl_z"] = s.z()
        a["rc_diff_z"] = s.z()
        a["rc_abs_noise"] = s.lognoise(0.1)
        a["rc_dmax"] = float(r.uniform(6, 12)) * s.lognoise(0.2)
        a["rc_dmin"] = float(r.uniform(3, 8)) * s.lognoise(0.2)
        a["rc_seq_noise"] = s.lognoise(0.15)
        a["rc_k3_noise"] = s.lognoise(0.05)
        a["rc_frac_noise"] = s.lognoise(0.2)
        a["rc_max_z"] = np.abs(s.z())
        a["rc_min_z"] = np.abs(s.z())
        a["rc_ppl_noise"] = s.lognoise(0.01)


def _async_drivers(s: _Sim) -> None:
    a, st, r, n = s.a, s.fstate, s.frng, s.n
    trainer = float(r.uniform(0.04, 0.12)) * s.lognoise(0.15, phi=0.6)
    a["fa_trainer_idle"] = np.clip(trainer, 0.005, 0.19)
    busy = float(r.uniform(0.3, 0.8))  # share of steps the rollouter never idles
    level = float(r.uniform(0.02, 0.10))
    roll = level * s.lognoise(0.25, phi=0.5) * (r.random(n) >= busy)
    a["fa_rollouter_idle"] = np.minimum(roll, 0.19)
    if not s.dyn.tame and n > 1:  # the first step waits for the rollouter's first batch
        a["fa_trainer_idle"][0] = float(r.uniform(0.5, 0.7))
    st["partial"] = float(r.uniform(0.05, 0.2))
    a["fa_partial"] = np.clip(st["partial"] * s.lognoise(0.2), 0.0, 1.0)
    a["fa_gen_noise"] = 1 + 0.03 * s.noise * s.z()
    a["fa_version_noise"] = s.lognoise(0.02)
    a["fa_sync"] = (0.5 + 0.35 * s.size_b) * s.lognoise(0.08)
    a["fa_wait_share"] = float(r.uniform(0.05, 0.15)) * s.lognoise(0.1)
    a["fa_dropped"] = np.zeros(n)
    set_trainer_wait(s, 0)


def set_trainer_wait(s: _Sim, i: int) -> None:
    """timing_s/gen (the fully-async trainer's wait for samples) from its idle-ratio target, so
    that timing_s/gen / timing_s/step, which verl logs as fully_async/trainer/idle_ratio, hits it."""
    a = s.a
    others = sum(a[f"t_{p}"][i:] for p in s.phases if p != "gen")
    ratio = np.clip(a["fa_trainer_idle"][i:], 0.0, 0.95)
    a["t_gen"][i:] = ratio * others / (0.97 - 0.97 * ratio)


def _staleness_drivers(s: _Sim) -> None:
    a, r, n = s.a, s.frng, s.n
    if not active(s)["fully_async"]:  # V1 synchronous: on-policy, one version per trajectory
        a["st_lag_mean"], a["st_lag_max"] = np.zeros(n), np.zeros(n)
        a["st_span_mean"], a["st_span_max"] = np.ones(n), np.ones(n)
        return
    allowed = allowed_staleness(s.cfg)
    thr = float(get(s.cfg, "async_training.staleness_threshold", 0.1) or 0.0)
    share = min(0.9, thr / (1 + thr) * float(r.uniform(0.8, 2.5)))
    a["st_lag_mean"] = np.minimum(
        share * (1 + allowed) / 2 * s.lognoise(0.2, phi=0.5), float(allowed)
    )
    a["st_lag_max"] = np.where(r.random(n) < 0.92, float(allowed), 0.0)
    a["st_lag_mean"] = np.where(a["st_lag_max"] > 0, a["st_lag_mean"], 0.0)
    partial = bool(get(s.cfg, "async_training.partial_rollout", True))
    frac = a.get("fa_partial", np.zeros(n)) if partial else np.zeros(n)
    a["st_span_mean"] = 1 + frac
    a["st_span_max"] = np.where(frac > 0, 2.0, 1.0)


def filtered_share(score: np.ndarray, group: int, concentration: float) -> np.ndarray:
    """Share of prompt groups whose `group` responses all agree (all correct or all wrong) when
    per-prompt accuracy is Beta-distributed with mean `score`."""
    mu = np.clip(score, 0.02, 0.98)
    a, b = mu * concentration, (1 - mu) * concentration

    def moment(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # E[p^group], p ~ Beta(x, y)
        return np.exp(gammaln(x + group) - gammaln(x) + gammaln(x + y) - gammaln(x + y + group))

    return moment(a, b) + moment(b, a)


def _dapo_drivers(s: _Sim) -> None:
    st, r = s.fstate, s.frng
    st["concentration"] = float(r.uniform(2.5, 4.0))
    s.a["dapo_f"] = filtered_share(s.clean["score"], s.group, st["concentration"])
    st["z"] = r.standard_normal((MAX_GEN_BATCHES, s.n))
    st["round_time"] = r.uniform(0.85, 1.0, s.n)
    gen_batches(s)
    st["k0"] = st["k"].copy()
    if not active(s)["fully_async"]:  # sync: one generation round per batch (replacing the
        # dynamics' own DAPO rounds); fully-async: the rollouter's, not the trainer's, time
        s.a["t_gen"] = s.a["t_gen"] / s.gen_factor * round_factor(s, st["k"])


def round_factor(s: _Sim, k: np.ndarray) -> np.ndarray:
    return 1 + (k - 1) * s.fstate["round_time"]


def gen_batch_size(s: _Sim) -> int:
    """Prompts per generation batch: `data.gen_batch_size`, else train_batch_size (V1)."""
    return int(get(s.cfg, "data.gen_batch_size", None) or s.batch)


def gen_batches(s: _Sim) -> None:
    """Per step: generation batches drawn, filtered groups, surplus groups (into fstate)."""
    st, B, G = s.fstate, s.batch, gen_batch_size(s)
    f = np.clip(s.a["dapo_f"], 0.0, 0.995)
    kept = np.round(G * (1 - f) + np.sqrt(G * f * (1 - f)) * st["z"])
    kept = np.clip(kept, 0, G)
    cum = np.cumsum(kept, axis=0)
    enough = cum >= B
    k = np.where(enough.any(axis=0), enough.argmax(axis=0) + 1, MAX_GEN_BATCHES)
    cols = np.arange(s.n)
    kept_total = cum[k - 1, cols]
    st["k"] = k.astype(np.float64)
    st["evicted"] = k * G - kept_total
    st["surplus"] = np.maximum(0.0, kept_total - B)


def _agent_drivers(s: _Sim) -> None:
    a, r, n = s.a, s.frng, s.n
    available = str(get(s.cfg, "actor_rollout_ref.rollout.name", "vllm")) == "vllm"
    fill = 0.0 if available else -1.0
    for key in ("np_min", "np_max", "np_mean"):
        a[key] = np.full(n, fill)
    a["ag_mean"] = float(r.uniform(0.35, 0.5)) * s.lognoise(0.05)
    a["ag_max"] = 0.93 * s.lognoise(0.02)
    a["ag_min"] = float(r.uniform(0.01, 0.04)) * s.lognoise(0.2)
    s.fstate["preempt_available"] = available


# ---- derived metrics --------------------------------------------------------------------------
def before_tokens(s: _Sim) -> None:
    """After the response statistics, before tokens and timings: mismatch metrics, aborted mix."""
    fam = active(s)
    a = s.a
    ar = a.get("aborted_ratio")
    if ar is not None and np.any(ar > 0):
        _mix_aborted(s, ar)
    elif fam.get("agent_loop"):
        for stat in ("mean", "max", "min"):
            a[f"resp_na_{stat}"] = a[f"resp_{stat}"].copy()
        a["clip_na"] = a["clip_ratio"].copy()
    if fam.get("mismatch"):
        _mismatch_metrics(s)


def _mix_aborted(s: _Sim, ar: np.ndarray) -> None:
    """Aborted responses stop early: response_length/* now mixes them with the others, while
    response_length_non_aborted/* keeps the non-aborted statistics."""
    a, N = s.a, s.samples
    ar = np.round(np.clip(ar, 0.0, 1.0) * N) / N
    a["aborted_ratio"] = ar
    for stat in ("mean", "max", "min"):
        a[f"resp_na_{stat}"] = a[f"resp_{stat}"].copy()
    a["clip_na"] = a["clip_ratio"].copy()
    short = 0.3 * a["resp_na_mean"]
    a["resp_mean"] = np.round(((1 - ar) * a["resp_na_mean"] + ar * short) * N) / N
    a["resp_min"] = np.where(ar > 0, np.minimum(a["resp_na_min"], 1.0), a["resp_na_min"])
    a["clip_ratio"] = np.round((1 - ar) * a["clip_na"] * N) / N


def _mismatch_metrics(s: _Sim) -> None:
    a, st = s.a, s.fstate
    x = a["mm_x"] * a["mm_mult"]
    mean = st["diff_level"] * x
    a["pd_mean"] = mean
    a["pd_std"] = mean * a["mm_std_ratio"]
    a["pd_max"] = 1 - (1 - a["mm_max"]) * np.exp(-0.5 * (a["mm_mult"] - 1))
    a["pd_valid"] = np.ones(s.n)
    deficit = st["pearson_def"] * a["mm_def_noise"] * a["mm_x"] + a["mm_pdef"]
    a["pearson"] = 1 - np.clip(deficit, 1e-6, 1.0)
    if not active(s)["rollout_corr"]:
        return
    chi2_h = st["chi2"] * a["mm_x"] ** 2 * a["rc_chi2_noise"]
    chi2 = chi2_h + a["mm_chi2"]
    kl_mean = chi2_h * st["kl_share"] + a["mm_kl"]
    if active(s)["rollout_corr"] == "bypass":  # π_θ vs π_rollout: the policy's own drift adds in
        kl_mean = kl_mean + np.nan_to_num(a["ppo_kl"])
    kl = kl_mean + 4e-4 * s.noise * a["rc_kl_z"]
    rc = {"kl": kl, "k3_kl": np.maximum(0.0, kl_mean * st["k3_ratio"] * a["rc_k3_noise"])}
    log_ppl = np.nan_to_num(a["entropy"], nan=0.5) * st["ppl_share"]
    rc["training_log_ppl"] = log_ppl
    rc["training_ppl"] = np.exp(log_ppl) * (1 + st["ppl_spread"]) * a["rc_ppl_noise"]
    diff = kl * st["diff_share"] + 3e-4 * s.noise * a["rc_diff_z"]
    rc["rollout_log_ppl"] = log_ppl - diff
    rc["rollout_ppl"] = rc["training_ppl"] * np.exp(-diff)
    absd = np.abs(diff) + 0.03 * np.sqrt(chi2) * a["rc_abs_noise"]
    rc["log_ppl_diff"] = diff
    rc["log_ppl_abs_diff"] = absd
    rc["log_ppl_diff_max"] = absd * a["rc_dmax"]
    rc["log_ppl_diff_min"] = -absd * a["rc_dmin"]
    rc["ppl_ratio"] = np.exp(diff) * (1 + 0.5 * absd**2)
    rc["chi2_token"] = chi2
    rc["chi2_seq"] = chi2 * np.sqrt(np.maximum(a["resp_mean"], 1.0)) * st["seq_share"]
    rc["chi2_seq"] = rc["chi2_seq"] * a["rc_seq_noise"]
    if active(s)["rollout_is"]:
        thr = float(get(s.cfg, "algorithm.rollout_correction.rollout_is_threshold", 2.0) or 2.0)
        high = np.clip(8e-4 * (chi2 / 0.05) * a["rc_frac_noise"], 0.0, 0.5)
        low = np.clip(1.5 * high, 0.0, 0.5)
        mean = np.exp(-kl) * (1 - 0.3 * high)
        std = np.minimum(np.sqrt(chi2 * st["is_var_share"]), 2.5)
        rc["rollout_is_max"] = np.exp(1.5 + 0.8 * a["rc_max_z"]) * (1 + chi2)
        rc["rollout_is_min"] = np.exp(-(2.5 + 0.5 * a["rc_min_z"])) / (1 + chi2)
        rc["rollout_is_mean"] = mean
        rc["rollout_is_ratio_fraction_high"] = high
        rc["rollout_is_ratio_fraction_low"] = low
        rc["rollout_is_std"] = std
        trunc = np.minimum(std, thr / 2) * 0.95
        rc["rollout_is_eff_sample_size"] = 1 / (1 + (trunc / mean) ** 2)
    for key, value in rc.items():
        a[f"rc_{key}"] = value


def after_timing(s: _Sim) -> None:
    """Metrics that need the step time: the fully-async recipe's, agent-loop timings, DAPO."""
    fam = active(s)
    a, n = s.a, s.n
    if fam.get("fully_async"):
        N = float(s.samples)
        a["fa_trainer_idle_ratio"] = a["t_gen"] / a["t_step"]
        generated = np.round(N * a["fa_gen_noise"])
        stale = np.round(N * a["st_lag_mean"] / max(1.0, float(allowed_staleness(s.cfg))))
        stale_traj = np.round(np.minimum(N, stale + N * a["fa_partial"]))
        a["fa_total_generated_samples"] = np.cumsum(generated)
        a["fa_stale_samples_processed"] = np.cumsum(stale)
        a["fa_stale_trajectory_processed"] = np.cumsum(stale_traj)
        a["fa_current_param_version"] = s.steps.astype(np.float64)
        a["fa_dropped_stale_samples"] = np.cumsum(np.round(a["fa_dropped"]))
        partial = np.round(N * a["fa_partial"])
        a["fa_total_partial_num"] = partial
        a["fa_partial_ratio"] = partial / N
        a["fa_max_partial_span"] = np.maximum(a["st_span_max"] - 1, (partial > 0) * 1.0)
        version = a["t_step"] * a["fa_version_noise"]
        a["fa_version_time"] = version
        a["fa_active_time"] = version * (1 - a["fa_rollouter_idle"])
        idle = 1 - a["fa_active_time"] / version
        a["fa_rollouter_idle_ratio"] = np.where(a["fa_rollouter_idle"] > 0, idle, 0.0)
        a["fa_step_generated_samples"] = generated
        a["t_param_sync"] = a["fa_sync"]
        if fam.get("dynamic_resource"):
            a["t_wait_for_enough_samples"] = a["t_step"] * np.clip(a["fa_wait_share"], 0, 0.9)
    if fam.get("staleness"):
        mean, top = a["st_lag_mean"], np.round(a["st_lag_max"])
        a["st_trajectory_staleness_mean"] = mean
        a["st_trajectory_staleness_max"] = top
        a["st_trajectory_staleness_min"] = np.zeros(n)
        a["st_trajectory_spans_mean"] = a["st_span_mean"]
        a["st_trajectory_spans_max"] = np.round(a["st_span_max"])
        a["st_trajectory_spans_min"] = np.ones(n)
        a["st_trajectory_staleness_worst_mean"] = mean + a["st_span_mean"] - 1
        a["st_trajectory_staleness_worst_max"] = top + np.round(a["st_span_max"]) - 1
        a["st_trajectory_staleness_worst_min"] = np.zeros(n)
    if fam.get("filter_groups"):
        st = s.fstate
        a["dapo_num_gen_batches"] = st["k"]
        a["dapo_evicted"] = np.where(st["evicted"] > 0, st["evicted"], np.nan)
        a["dapo_surplus"] = np.where(st["surplus"] > 0, st["surplus"], np.nan)
    if fam.get("agent_loop"):
        gen = s.fstate["gen_own"] if fam.get("fully_async") else a["t_gen"]
        for stat in ("mean", "max", "min"):
            a[f"ag_gen_{stat}"] = gen * a[f"ag_{stat}"]


def layout(s: _Sim, where: str) -> list[tuple[str, str]]:
    """(printed name, latent key) of the families at one place of `simulate._layout`."""
    fam = active(s)
    out: list[tuple[str, str]] = []
    if not fam:
        return out
    if where == "actor" and fam["rollout_corr"] == "bypass":
        out += _rc_names(s, "actor/rollout_corr/")
    elif where == "training":
        if fam["mismatch"]:
            out += [
                ("training/rollout_probs_diff_valid", "pd_valid"),
                ("training/rollout_probs_diff_max", "pd_max"),
                ("training/rollout_probs_diff_mean", "pd_mean"),
                ("training/rollout_probs_diff_std", "pd_std"),
                ("training/rollout_actor_probs_pearson_corr", "pearson"),
            ]
        if fam["rollout_corr"] == "decoupled":
            out += _rc_names(s, "rollout_corr/")
        if fam["filter_groups"]:
            if bool(get(s.cfg, "trainer.use_v1", True)):
                out += [
                    ("training/filter_groups/evicted_samples", "dapo_evicted"),
                    ("training/filter_groups/discarded_surplus_samples", "dapo_surplus"),
                ]
            else:
                out.append(("train/num_gen_batches", "dapo_num_gen_batches"))
        if fam["staleness"]:
            for group in STALENESS:
                for stat in ("mean", "max", "min"):
                    key = f"st_{group}_{stat}"
                    out.append((f"training/off_policy/{group}/{stat}", key))
    elif where == "response" and fam["agent_loop"]:
        for stat in ("mean", "max", "min"):
            out.append((f"response_length_non_aborted/{stat}", f"resp_na_{stat}"))
        out.append(("response_length_non_aborted/clip_ratio", "clip_na"))
    elif where == "timing":
        if fam["agent_loop"]:
            for part, key in (("generate_sequences", "ag_gen"), ("num_preempted", "np")):
                for stat in ("min", "max", "mean"):
                    out.append((f"timing_s/agent_loop/{part}/{stat}", f"{key}_{stat}"))
        if fam["fully_async"]:
            if fam["dynamic_resource"]:
                out.append(("timing_s/wait_for_enough_samples", "t_wait_for_enough_samples"))
            out.append(("timing_s/param_sync", "t_param_sync"))
    elif where == "end" and fam["fully_async"]:
        out += [(f"fully_async/count/{k}", f"fa_{k}") for k in FA_COUNTS]
        for k in ("total_partial_num", "partial_ratio", "max_partial_span"):
            out.append((f"fully_async/partial/{k}", f"fa_{k}"))
        for k in ("active_time", "version_time"):
            out.append((f"fully_async/rollouter/{k}", f"fa_{k}"))
        out.append(("fully_async/rollouter/idle_ratio", "fa_rollouter_idle_ratio"))
        out.append(("fully_async/rollouter/step_generated_samples", "fa_step_generated_samples"))
        out.append(("fully_async/trainer/idle_ratio", "fa_trainer_idle_ratio"))
    return out


def _rc_names(s: _Sim, prefix: str) -> list[tuple[str, str]]:
    keys = (RC_IS if active(s)["rollout_is"] else ()) + RC_OFFPOLICY
    return [(f"{prefix}{k}", f"rc_{k}") for k in keys]


# How verl's metrics dict holds these values (console printing, verl_formats.md §1.2).
INT_METRICS: frozenset[str] = frozenset(
    {
        "training/rollout_probs_diff_valid",
        "training/filter_groups/evicted_samples",
        "training/filter_groups/discarded_surplus_samples",
        "train/num_gen_batches",
        "fully_async/partial/total_partial_num",
        "fully_async/rollouter/step_generated_samples",
        *(f"fully_async/count/{k}" for k in FA_COUNTS),
    }
)
NP_INT_METRICS: frozenset[str] = frozenset(
    {
        "timing_s/agent_loop/num_preempted/min",
        "timing_s/agent_loop/num_preempted/max",
        "fully_async/partial/max_partial_span",
        *(f"training/off_policy/{g}/{s}" for g in STALENESS for s in ("max", "min")),
    }
)
NP_FLOAT_METRICS: frozenset[str] = frozenset(
    {
        "timing_s/agent_loop/num_preempted/mean",
        *(f"timing_s/agent_loop/generate_sequences/{s}" for s in ("min", "max", "mean")),
        *(f"training/off_policy/{g}/mean" for g in STALENESS),
    }
)
# Logged only at steps where they are > 0 (the replay buffer adds them when it evicts).
SPARSE_METRICS: frozenset[str] = frozenset(
    {"training/filter_groups/evicted_samples", "training/filter_groups/discarded_surplus_samples"}
)
