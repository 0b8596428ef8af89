"""Simulated verl runs: realistic healthy dynamics plus injected pathologies with ground truth.

Everything is vectorised numpy over steps, so 100,000 steps take well under a second or two.
The simulation works on *latent* series under verl 0.5 names (`_Sim.a`), then `_layout` renames
and drops them for the requested verl version (verl_formats.md §1.0, §2).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy.signal import lfilter
from scipy.special import ndtr

from logscope.model import ConfigSegment, Event, Run, Source
from logscope.schemas import METRICS_SCHEMA
from logscope.synthetic import families as _fam
from logscope.synthetic import pathologies as _path
from logscope.synthetic.config import (
    GSM8K_TEST_PROMPTS,
    default_config,
    get,
    set_dotted,
    steps_per_epoch,
)
from logscope.synthetic.dynamics import Dynamics
from logscope.synthetic.versions import at_least, check_version, first_train_step

VAL_SOURCE = "openai/gsm8k"

# Metrics verl logs as Python ints (printed without decimals in the repr era).
INT_METRICS: frozenset[str] = frozenset(
    {
        "global_seqlen/min",
        "global_seqlen/max",
        "global_seqlen/minmax_diff",
        "global_seqlen/balanced_min",
        "global_seqlen/balanced_max",
        "perf/total_num_tokens",
        "training/global_step",
        "training/epoch",
        "val-aux/num_turns/min",
        "val-aux/num_turns/max",
    }
    | _fam.INT_METRICS
)

# Healthy-run levels; `simulate(levels=...)` overrides any of them (used by the seed fixtures).
LEVEL_DEFAULTS: dict[str, float] = {
    "score_start": 0.35,  # training reward (GSM8K accuracy) at step 1
    "score_end": 0.80,  # where the saturating curve heads
    "score_sd": 0.012,
    "val_start": 0.40,  # validation accuracy before training
    "val_end": 0.78,
    "val_sd": 0.006,
    "kl": 0.018,  # KL to reference after warm-up (kl_loss_coef 0.001)
    "kl_sd": 0.06,  # log-sd
    "ppo_kl": 3e-4,
    "ppo_kl_end": 5e-4,
    "ppo_kl_sd": 0.3,
    "entropy": 0.60,
    "entropy_end_ratio": 0.65,
    "entropy_sd": 0.02,
    "grad_norm": 0.0,  # 0 → 0.45 for GRPO, 2.0 for PPO
    "grad_norm_end_ratio": 0.8,
    "grad_norm_sd": 0.16,
    "pg_clipfrac": 0.002,
    "pg_loss_sd": 0.0,  # 0 → 0.03 (PPO) / 0.012 (GRPO)
    "clip_ratio": 0.004,  # response_length/clip_ratio
    "response_length": 0.0,  # 0 → from data.max_response_length
    "response_drift": -0.12,  # relative drift of the mean response length over the run
    "prompt_length": 105.0,
    "gen_share": 0.0,  # 0 → 0.52 (GRPO) / 0.48 (PPO) of the named phases
    "gen_s": 0.0,  # 0 → derived from gen_share
    "throughput": 0.0,  # tokens/s/GPU; 0 → derived from model size
    "vf_loss": 0.045,  # critic/vf_loss after warm-up
    "vf_loss_start": 0.30,
    "explained_var": 0.5,
    "adv_mean_sd": 0.004,
    "mem_capacity": 80.0,
    "mfu": 0.32,
}


@dataclass(frozen=True)
class Injection:
    """A pathology to inject: `kind` (a PATHOLOGIES slug) from `step`, with `magnitude` (1 = typical)."""

    kind: str
    step: int
    magnitude: float = 1.0


@dataclass
class SimRun:
    """A simulated verl run and its ground truth.

    `config` is the config the run started with; `config_segments` lists `(first_step, config)`
    (two after a restart). `metrics` is the long frame a perfect reader would produce (latest value
    per step). `truth` holds the injections with the step where each first shows. `events` are
    extra log lines printed after a step's line. `details` adds per-kind facts (period, rate, …).
    `superseded` holds the values printed before a restart for steps that were re-run after it.
    """

    algorithm: str
    version: str
    seed: int
    config: dict[str, Any]
    metrics: pl.DataFrame
    truth: list[Injection]
    config_segments: list[tuple[int, dict[str, Any]]]
    events: list[tuple[int, str]]
    noise: float = 1.0
    metric_order: list[str] = field(default_factory=list)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    superseded: pl.DataFrame | None = None
    restart: dict[str, int] | None = None
    dynamics: Dynamics = field(default_factory=Dynamics)

    @property
    def steps(self) -> np.ndarray:
        return np.sort(self.metrics.get_column("step").unique().to_numpy())

    def series(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one metric, sorted by step."""
        frame = self.metrics.filter(pl.col("metric") == metric).sort("step")
        return frame.get_column("step").to_numpy(), frame.get_column("value").to_numpy()

    def to_run(self) -> Run:
        """A `logscope.model.Run` with the exact simulated values (source kind "synthetic")."""
        kinds = "+".join(sorted({t.kind for t in self.truth})) or "healthy"
        meta: dict[str, Any] = {
            "verl_version": self.version,
            "algorithm": self.algorithm,
            "project": get(self.config, "trainer.project_name"),
            "experiment": get(self.config, "trainer.experiment_name"),
        }
        events = [
            Event(line_no=0, step_hint=step, kind=_event_kind(text), text=text)
            for step, text in self.events
        ]
        return Run(
            id=f"synthetic-{self.algorithm}-v{self.version}-s{self.seed}-{kinds}",
            source=Source(kind="synthetic", path=f"<simulated {self.algorithm} seed={self.seed}>"),
            meta=meta,
            config_segments=[ConfigSegment(first, cfg) for first, cfg in self.config_segments],
            metrics=self.metrics,
            events=events,
        )


def _event_kind(text: str) -> str:
    if "out of memory" in text.lower():
        return "cuda-oom"
    if "grad_norm is not finite" in text:
        return "grad-norm-not-finite"
    if "Load from checkpoint" in text:
        return "checkpoint-load"
    return "log"


# --------------------------------------------------------------------------------------------
class _Sim:
    """Working state: latent series (verl 0.5 names) over training steps, and helpers."""

    def __init__(
        self,
        n: int,
        algorithm: str,
        version: str,
        cfg: dict[str, Any],
        rng: np.random.Generator,
        noise: float,
        levels: dict[str, float],
        dyn: Dynamics | None = None,
    ) -> None:
        self.dyn = dyn or Dynamics()
        self.n = n
        self.algorithm = algorithm
        self.version = version
        self.cfg = cfg
        self.rng = rng
        self.noise = float(noise)
        self.L = {**LEVEL_DEFAULTS, **levels}
        self.user_levels = set(levels)
        self.first = first_train_step(version)
        self.steps = np.arange(self.first, self.first + n, dtype=np.int64)
        self.t = np.arange(1, n + 1, dtype=np.float64)  # 1-based position in the run
        self.tau = max(10.0, n / 4.0)  # reward saturation time scale
        self.a: dict[str, np.ndarray] = {}
        self.clean: dict[str, np.ndarray] = {}  # noiseless centres, for ground-truth steps
        self.factor: dict[str, np.ndarray] = {}  # multiplicative noise, kept to rescale levels
        self.val_steps = np.array([], dtype=np.int64)
        self.val: dict[str, np.ndarray] = {}
        self.save_steps = np.array([], dtype=np.int64)
        self.events: list[tuple[int, str]] = []
        self.details: dict[str, dict[str, Any]] = {}
        self.truncate_after: int | None = None  # last index kept (cuda-oom)
        self.restart: dict[str, Any] | None = None
        self.batch = int(get(cfg, "data.train_batch_size", 1024))
        rollout_n = get(cfg, "actor_rollout_ref.rollout.n", 1)
        self.group = int(rollout_n) if algorithm == "grpo" and rollout_n else 1
        self.samples = self.batch * self.group
        self.resp_cap = int(get(cfg, "data.max_response_length", 1024))
        self.prompt_cap = int(get(cfg, "data.max_prompt_length", 512))
        self.seed = 0
        self.n_gpus = int(get(cfg, "trainer.n_gpus_per_node", 8)) * int(
            get(cfg, "trainer.nnodes", 1)
        )
        self.size_b = _model_size(cfg)
        self.val_size = self.dyn.val_size or GSM8K_TEST_PROMPTS
        self.actor_from = 0  # first index the actor updates at (PPO critic warm-up)

    # ---- noise -----------------------------------------------------------------------------
    def z(self, size: int | None = None) -> np.ndarray:
        """Unit-variance noise over steps.

        Tame: normal with mildly heavy tails (2% of draws ×1.6), clipped at ±4. Realistic
        (`Dynamics.tail_df`): Student-t, AR(1)-correlated along the run when `noise_phi` is set.
        """
        size = self.n if size is None else size
        if self.dyn.tail_df:
            out = self._t(size)
            if self.dyn.noise_phi and size == self.n:
                phi = self.dyn.noise_phi
                out = lfilter([math.sqrt(1 - phi * phi)], [1.0, -phi], out)
            return np.clip(out, -8.0, 8.0)
        out = self.rng.standard_normal(size)
        out[self.rng.random(size) < 0.02] *= 1.6
        return np.clip(out, -4.0, 4.0)

    def _t(self, size: int) -> np.ndarray:
        df = self.dyn.tail_df
        return self.rng.standard_t(df, size) * math.sqrt((df - 2) / df)

    def ar1(self, phi: float, size: int | None = None) -> np.ndarray:
        """Unit-variance AR(1) noise (slow wander)."""
        size = self.n if size is None else size
        e = self._t(size) if self.dyn.tail_df else self.rng.standard_normal(size)
        out = lfilter([1.0], [1.0, -phi], e * math.sqrt(1 - phi * phi))
        limit = 8.0 if self.dyn.tail_df else 4.0
        return np.clip(out, -limit, limit)

    def lognoise(self, sd: float, phi: float = 0.0) -> np.ndarray:
        """Multiplicative noise exp(sd·noise·(white + some AR)), median 1."""
        white = self.z()
        if phi > 0:
            white = 0.8 * white + 0.6 * self.ar1(phi)
        return np.exp(sd * self.noise * white)

    def idx(self, step: int) -> int:
        return int(step) - self.first

    def validate_step(self, step: int, kind: str) -> int:
        i = self.idx(step)
        if not 0 <= i < self.n:
            raise ValueError(
                f"injection {kind!r} at step {step} is outside the run "
                f"(steps {self.first}..{self.first + self.n - 1})"
            )
        return i


def _model_size(cfg: dict[str, Any]) -> float:
    from logscope.verl_config import model_size_b

    size = model_size_b(cfg)
    return float(size) if size else 7.0


def _base_dynamics(s: _Sim) -> None:
    """Drivers of a healthy run (centres × noise)."""
    L, t, n, a = s.L, s.t, s.n, s.a
    ppo = s.algorithm == "ppo"
    rise = 1.0 - np.exp(-t / s.tau)

    # reward (GSM8K 0/1 accuracy): saturating curve with AR wander
    score_c = L["score_start"] + (L["score_end"] - L["score_start"]) * rise
    s.clean["score"] = score_c
    a["score"] = score_c + L["score_sd"] * s.noise * (0.7 * s.z() + 0.7 * s.ar1(0.8))

    # KL to the reference: warm-up over ~5 steps into the 0.01-0.03 band, slow growth after
    coef = get(s.cfg, "actor_rollout_ref.actor.kl_loss_coef", None)
    if not get(s.cfg, "actor_rollout_ref.actor.use_kl_loss", False):
        coef = get(s.cfg, "algorithm.kl_ctrl.kl_coef", 0.001)
    coef = float(coef or 0.001)
    s.kl_level = L["kl"] * (0.001 / max(coef, 1e-6)) ** 0.3
    d = s.dyn
    s.lr_factor = d.lr_factor(t, n)
    update = s.lr_factor**d.update_lr_power  # update size follows the LR
    if d.kl_sqrt:  # distance from the reference grows like √(sum of update sizes)
        travelled = np.cumsum(update) / max(1.0, float(np.sum(update)))
        kl_c = s.kl_level * 1.08 * np.sqrt(travelled) * (1 - np.exp(-t / 2.0))
    else:
        kl_c = s.kl_level * (1 - np.exp(-t / 5.0)) * (1 + 0.08 * rise)
    s.clean["kl"] = kl_c
    s.factor["kl"] = s.lognoise(L["kl_sd"], phi=0.7)
    a["kl"] = kl_c * s.factor["kl"]

    lr = float(get(s.cfg, "actor_rollout_ref.actor.optim.lr", 1e-6) or 1e-6)
    lr_scale = 1.0 if "ppo_kl" in s.user_levels else (lr / 1e-6) ** 0.8
    ppo_c = (L["ppo_kl"] + (L["ppo_kl_end"] - L["ppo_kl"]) * rise) * lr_scale * update
    s.clean["ppo_kl"] = ppo_c
    s.factor["ppo_kl"] = s.lognoise(L["ppo_kl_sd"])
    a["ppo_kl"] = ppo_c * s.factor["ppo_kl"]
    if d.on_policy:  # old and new log-probs differ by numerics only: noise around 0
        a["ppo_kl"] = 3e-6 * s.z()

    if d.entropy_drop:  # early fall to a plateau (R1-style)
        ent_c = L["entropy"] * (1 - d.entropy_drop * (1 - np.exp(-t / max(2.0, d.entropy_tau * n))))
    else:
        ent_c = L["entropy"] * (
            L["entropy_end_ratio"] + (1 - L["entropy_end_ratio"]) * np.exp(-t / max(20.0, n / 2))
        )
    s.clean["entropy"] = ent_c
    a["entropy"] = ent_c * s.lognoise(L["entropy_sd"], phi=0.6)

    g0 = L["grad_norm"] or (2.0 if ppo else 0.45)
    gn_c = g0 * (L["grad_norm_end_ratio"] + (1 - L["grad_norm_end_ratio"]) * np.exp(-t / s.tau))
    s.clean["grad_norm"] = gn_c
    a["grad_norm"] = gn_c * s.lognoise(L["grad_norm_sd"])
    pg_sd = L["pg_loss_sd"] or (0.03 if ppo else 0.012)
    a["pg_loss"] = (-0.004 if ppo else -0.002) + pg_sd * s.noise * s.z()
    a["pg_clipfrac"] = L["pg_clipfrac"] * s.lognoise(0.3) * update
    a["pg_clipfrac_lower"] = 2e-5 * s.lognoise(0.8) * (s.rng.random(n) < 0.7) * update
    if d.on_policy:  # ratio 1: nothing is clipped
        a["pg_clipfrac"] = np.zeros(n)
        a["pg_clipfrac_lower"] = np.zeros(n)

    # lengths
    r0 = L["response_length"] or (0.2 * s.resp_cap + 60.0)
    if d.length_growth != 1.0:  # reasoning runs: the mean length grows through the run
        r0 = L["response_length"] or min(r0, 0.28 * s.resp_cap / max(1.0, d.length_growth))
        grow = (1 - np.exp(-t / max(5.0, n / 2))) / (1 - math.exp(-2.0))
        resp_c = r0 * (1 + (d.length_growth - 1) * grow)
    else:
        resp_c = r0 * (1 + L["response_drift"] * rise)
    s.clean["resp"] = resp_c
    a["resp"] = resp_c * s.lognoise(0.02, phi=0.7)
    if d.tame:
        a["clip_ratio"] = L["clip_ratio"] * s.lognoise(0.3)
    else:  # share of log-normal response lengths over the cap
        median = resp_c / math.exp(d.length_sigma**2 / 2)
        over = ndtr(-np.log(s.resp_cap / median) / d.length_sigma)
        a["clip_ratio"] = s.rng.binomial(s.samples, np.clip(over, 0.0, 1.0)) / s.samples
    a["prompt"] = L["prompt_length"] * s.lognoise(0.006)

    # memory (GiB): flat with small jitter
    util = float(get(s.cfg, "actor_rollout_ref.rollout.gpu_memory_utilization", 0.5) or 0.5)
    cap = L["mem_capacity"]
    reserved = min(0.9 * cap, s.size_b * 2.2 + cap * util * 0.55 + 6.0)
    a["mem_reserved"] = reserved + 0.02 * s.noise * s.z()
    a["mem_allocated"] = 0.78 * reserved + 0.03 * s.noise * s.z()
    if d.memory_warmup_steps or d.memory_sawtooth_gb:  # allocator warm-up, then a sawtooth
        ramp = 1 - 0.25 * np.exp(-(t - 1) / d.memory_warmup_steps) if d.memory_warmup_steps else 1.0
        saw = d.memory_sawtooth_gb * ((t % d.memory_sawtooth_period) / d.memory_sawtooth_period)
        a["mem_reserved"] = a["mem_reserved"] * ramp + saw
        a["mem_allocated"] = a["mem_allocated"] * ramp + 0.8 * saw
    a["mem_cpu"] = 60.0 + 4.0 * s.size_b + 0.3 * s.noise * s.z()
    a["mfu_actor"] = L["mfu"] * s.lognoise(0.03)
    a["mfu_critic"] = 0.9 * L["mfu"] * s.lognoise(0.03)

    # timings: relative jitter shared by all phases plus per-phase jitter
    tokens = s.samples * (L["prompt_length"] + resp_c)
    share = L["gen_share"] or (0.48 if ppo else 0.52)
    if L["throughput"]:
        step_c = tokens / (L["throughput"] * s.n_gpus)
    else:
        rate = 8000.0 / math.sqrt(s.size_b)  # rough tokens/s/GPU of the non-rollout phases
        others = tokens / (rate * s.n_gpus) * (2.0 if ppo else 1.0)
        step_c = others / (1 - share)
    gen_c = np.full(n, L["gen_s"]) if L["gen_s"] else step_c * share
    gen_c = gen_c * (resp_c / np.median(resp_c))  # generation time follows the response length
    # the other phases follow the tokens (the tame simulator took them as what generation left)
    rest = step_c - gen_c if d.tame else step_c * (1 - share)
    weights = {
        "reward": 0.01,
        "old_log_prob": 0.14,
        "ref": 0.13,
        "adv": 0.004,
        "update_actor": 0.42,
    }
    if ppo:
        weights.update({"values": 0.12, "update_critic": 0.33})
        weights["update_actor"] = 0.30
    if at_least(s.version, "0.7"):
        weights["update_weights"] = 0.03
    total_w = sum(weights.values()) / 0.97  # 3% of the step is outside any named timer
    common = s.lognoise(0.02, phi=0.5)
    a["t_gen"] = gen_c * common * s.lognoise(0.03)
    s.gen_factor = np.ones(n)  # generation rounds' time factor (families.py replaces it for DAPO)
    if d.dynamic_sampling > 1:  # DAPO: more generation rounds as more groups are all-correct
        solved = np.clip(s.clean["score"], 0.0, 1.0) ** 2
        extra = s.rng.random((d.dynamic_sampling - 1, n)) < solved
        s.gen_factor = 1 + extra.sum(axis=0) * s.rng.uniform(0.7, 1.0, n)
        a["t_gen"] = a["t_gen"] * s.gen_factor
    if d.first_step_slow > 1:  # vLLM graph capture, allocator and compile warm-up
        common[0] *= d.first_step_slow
        a["t_gen"][0] *= d.first_step_slow
    for name, w in weights.items():
        a[f"t_{name}"] = rest * w / total_w * common * s.lognoise(0.03)
    s.phases = ["gen", *weights]

    # critic (PPO)
    warm = np.exp(-t / 6.0)
    a["vf_loss"] = (L["vf_loss"] + (L["vf_loss_start"] - L["vf_loss"]) * warm) * s.lognoise(0.12)
    a["vf_clipfrac"] = (0.004 + 0.03 * warm) * s.lognoise(0.2)
    a["explained_var"] = (
        L["explained_var"] - (L["explained_var"] + 0.4) * warm + 0.03 * s.noise * s.z()
    )
    a["critic_grad_norm"] = (1.5 + 3.0 * warm) * s.lognoise(0.15)
    a["adv_mean"] = L["adv_mean_sd"] * s.noise * s.z()
    a["value_err"] = 0.15 * warm * s.z() + 0.01 * s.noise * s.z()

    # validation (GSM8K test set) on test_freq steps and the last step, plus step 0
    test_freq = int(get(s.cfg, "trainer.test_freq", -1) or -1)
    vsteps = [int(x) for x in s.steps if test_freq > 0 and x % test_freq == 0 and x > 0]
    if test_freq > 0 and (not vsteps or vsteps[-1] != s.steps[-1]):
        vsteps.append(int(s.steps[-1]))
    s.val_steps = np.array(vsteps, dtype=np.int64)
    vt = s.val_steps - s.first + 1.0
    val_c = L["val_start"] + (L["val_end"] - L["val_start"]) * (1 - np.exp(-vt / s.tau))
    s.clean["val"] = val_c
    if s.dyn.val_size:  # k correct out of a (possibly small) validation set
        size = s.dyn.val_size
        s.val["acc"] = s.rng.binomial(size, np.clip(val_c, 0.0, 1.0)) / size
        s.val0 = float(s.rng.binomial(size, np.clip(L["val_start"], 0.0, 1.0))) / size
    else:
        s.val["acc"] = val_c + L["val_sd"] * s.noise * s.z(len(vt))
        s.val0 = L["val_start"] + L["val_sd"] * s.noise * float(s.z(1)[0])

    save_freq = int(get(s.cfg, "trainer.save_freq", -1) or -1)
    s.save_steps = np.array(
        [
            int(x)
            for x in s.steps
            if save_freq > 0 and x > 0 and (x % save_freq == 0 or x == s.steps[-1])
        ],
        dtype=np.int64,
    )


def _critic_warmup(s: _Sim, warmup: int) -> None:
    """verl updates the actor once `trainer.critic_warmup <= global_steps`: before that the actor
    logs nothing and its update takes no time."""
    s.actor_from = max(0, min(s.n, warmup - s.first))
    s.a["t_update_actor"][: s.actor_from] = 0.0


def _from_actor_update(name: str) -> bool:
    """Whether verl's actor update produces metric `name` (absent while the critic warms up)."""
    if name.startswith("actor/"):
        return not name.startswith(("actor/entropy", "actor/reward_kl"))
    return name.startswith(("perf/mfu/actor", "perf/max_memory", "perf/cpu_memory")) or (
        name.endswith("/update_actor")
    )


def _derive(s: _Sim) -> None:
    """Metrics computed from the drivers the way verl computes them."""
    a, n = s.a, s.n
    ppo = s.algorithm == "ppo"
    N = s.samples
    score = np.clip(a["score"], 0.0, 1.0)
    score = np.round(score * N) / N  # mean of N 0/1 scores is k/N
    a["score_mean"] = score
    a["score_max"] = np.where(score > 0, 1.0, 0.0)
    a["score_min"] = np.where(score < 1, 0.0, 1.0)
    kl_in_reward = (
        bool(get(s.cfg, "algorithm.use_kl_in_reward", False))
        or s.version == "0.1"
        or (
            not at_least(s.version, "0.4")
            and not get(s.cfg, "actor_rollout_ref.actor.use_kl_loss", False)
        )
    )
    s.kl_in_reward = kl_in_reward
    resp = np.clip(a["resp"], 1.0, s.resp_cap)
    a["resp"] = resp
    beta = float(get(s.cfg, "algorithm.kl_ctrl.kl_coef", 0.001) or 0.001)
    s.beta = beta
    penalty = beta * np.nan_to_num(a["kl"], nan=0.0) * resp if kl_in_reward else 0.0
    a["rewards_mean"] = score - penalty
    a["rewards_max"] = a["score_max"] - (0.3 * penalty if kl_in_reward else 0.0)
    a["rewards_min"] = a["score_min"] - (2.5 * penalty if kl_in_reward else 0.0)

    if ppo:
        a["adv_max"] = 3.2 + 0.5 * s.lognoise(0.1)
        a["adv_min"] = -(3.6 + 0.7 * s.lognoise(0.1))
        a["returns_mean"] = a["rewards_mean"] * 0.98
        a["returns_max"] = a["rewards_max"] + 0.02 * s.lognoise(0.3)
        a["returns_min"] = a["rewards_min"] - 0.05 * s.lognoise(0.3)
        a["values_mean"] = a["returns_mean"] + a["value_err"]
        a["values_max"] = a["values_mean"] + 0.7 * s.lognoise(0.1)
        a["values_min"] = a["values_mean"] - 0.8 * s.lognoise(0.1)
        a["vpred_mean"] = a["values_mean"] + 0.01 * s.z()
    else:
        g = s.group
        if g > 1:
            std_norm = bool(get(s.cfg, "algorithm.norm_adv_by_std_in_grpo", True))
            amax = (g - 1) / math.sqrt(g) if std_norm else (g - 1) / g
            amax = amax * (1 - 1e-6)
            a["adv_max"] = np.where((score > 0) & (score < 1), amax, 0.0)
            a["adv_min"] = -a["adv_max"]
            a["adv_mean"] = -0.006 + 0.012 * s.noise * s.z()
        else:  # n=1: advantage = raw score (verl does not guard this)
            a["adv_max"], a["adv_min"], a["adv_mean"] = a["score_max"], a["score_min"], score
        a["returns_mean"], a["returns_max"], a["returns_min"] = (
            a["adv_mean"],
            a["adv_max"],
            a["adv_min"],
        )

    # torch reports bytes / 2**30: reserved memory comes in 2 MiB blocks, allocations in 512 B
    a["mem_reserved"] = np.round(a["mem_reserved"] * 512) / 512
    a["mem_allocated"] = np.round(a["mem_allocated"] * 2**21) / 2**21
    clip = np.clip(np.round(np.clip(a["clip_ratio"], 0, 1) * N) / N, 0.0, 1.0)
    a["clip_ratio"] = clip
    a["resp_max"] = np.where(
        clip > 0, float(s.resp_cap), np.minimum(s.resp_cap, np.round(resp * 3.1))
    )
    a["resp_min"] = np.maximum(1.0, np.round(resp * 0.12 + 3 * s.z()))
    a["resp_mean"] = np.round(resp * N) / N
    prompt = np.round(a["prompt"] * N) / N
    a["prompt_mean"] = prompt
    a["prompt_max"] = np.minimum(float(s.prompt_cap), np.round(prompt * 2.1 + 4 * s.z()))
    a["prompt_min"] = np.round(prompt * 0.55 + 2 * s.z())
    a["prompt_clip"] = np.zeros(n)

    _fam.before_tokens(s)
    tokens = np.round(N * (prompt + a["resp_mean"]))
    a["total_tokens"] = tokens
    per_rank = tokens / max(1, s.n_gpus)
    spread = np.abs(0.03 * s.z()) + 0.01
    a["seqlen_mean"] = per_rank
    a["seqlen_min"] = np.floor(per_rank * (1 - spread))
    a["seqlen_max"] = np.ceil(per_rank * (1 + spread))
    a["seqlen_minmax_diff"] = a["seqlen_max"] - a["seqlen_min"]
    a["seqlen_bmin"] = np.floor(per_rank - np.abs(3 * s.z()) - 1)
    a["seqlen_bmax"] = np.ceil(per_rank + np.abs(3 * s.z()) + 1)
    _derive_timing(s)
    _fam.after_timing(s)


def _derive_timing(s: _Sim) -> None:
    a = s.a
    ppo = s.algorithm == "ppo"
    phases = [p for p in s.phases if f"t_{p}" in a]
    named = sum(a[f"t_{p}"] for p in phases)
    step = named / 0.97
    testing = np.zeros(s.n)
    if len(s.val_steps):
        vi = s.val_steps - s.first
        # validation generates GSM8K test prompts once (n=1), greedy
        val_gen = a["t_gen"][vi] * s.val_size / s.samples * 0.9 + 3.0
        a["t_testing"] = val_gen
        testing[vi] = val_gen
    save = np.zeros(s.n)
    if len(s.save_steps):
        si = s.save_steps - s.first
        a["t_save_checkpoint"] = (6.0 + 3.0 * s.size_b * (2 if ppo else 1)) * s.lognoise(0.05)[si]
        save[si] = a["t_save_checkpoint"]
    a["t_step"] = step + testing + save
    a["time_per_step"] = a["t_step"]
    a["throughput"] = a["total_tokens"] / (a["t_step"] * s.n_gpus)
    resp_tokens = s.samples * a["resp_mean"]
    all_tokens = a["total_tokens"]
    a["tpt_gen"] = a["t_gen"] * 1000 / resp_tokens
    for p in ("ref", "values", "adv", "update_critic", "update_actor"):
        if f"t_{p}" in a:
            a[f"tpt_{p}"] = a[f"t_{p}"] * 1000 / all_tokens


# --------------------------------------------------------------------------------------------
def simulate(
    n_steps: int = 200,
    algorithm: str = "grpo",
    seed: int = 0,
    noise: float = 1.0,
    inject: tuple[Injection, ...] | list[Injection] = (),
    config: dict[str, Any] | None = None,
    version: str = "0.5",
    test_freq: int = 10,
    levels: dict[str, float] | None = None,
    dynamics: Dynamics | None = None,
) -> SimRun:
    """Simulate a verl run of `n_steps` training steps with `inject`ed pathologies.

    `config` holds dotted-key overrides on a realistic GSM8K verl config; `levels` overrides the
    healthy-run levels in LEVEL_DEFAULTS (for calibrated fixtures); `dynamics` shapes the healthy
    run (default: the tame simulator; `synthetic.realistic` draws the dynamics of real runs).
    """
    dyn = dynamics or Dynamics()
    algorithm = algorithm.lower()
    if algorithm not in ("grpo", "ppo"):
        raise ValueError(f"algorithm must be 'grpo' or 'ppo', not {algorithm!r}")
    version = check_version(version)
    n_steps = int(n_steps)
    if n_steps < 2:
        raise ValueError("n_steps must be at least 2")
    unknown = [k for k in (levels or {}) if k not in LEVEL_DEFAULTS]
    if unknown:
        raise ValueError(f"unknown levels {unknown}; known: {sorted(LEVEL_DEFAULTS)}")
    injections = [i if isinstance(i, Injection) else Injection(*i) for i in inject]
    for inj in injections:
        if inj.kind not in _path.ALL_PATHOLOGIES:
            known = sorted(_path.ALL_PATHOLOGIES)
            raise ValueError(f"unknown pathology {inj.kind!r}; known: {known}")
        reason = _path.not_applicable(inj.kind, algorithm, version)
        if reason:
            raise ValueError(f"cannot inject {inj.kind!r}: {reason}")

    if dyn.on_policy and any(i.kind == "ppo-kl-too-low" for i in injections):
        raise ValueError("cannot inject 'ppo-kl-too-low' into an on-policy run (ppo_kl is noise)")
    if dyn.resume_step is not None and any(
        i.kind in ("kl-coef-changed-midrun", "cuda-oom") for i in injections
    ):
        raise ValueError("a resume cannot be combined with kl-coef-changed-midrun or cuda-oom")
    batch = int((config or {}).get("data.train_batch_size", 1024))
    overrides = {**dyn.config(batch), **(config or {})}
    if any(i.kind == "kl-coef-changed-midrun" for i in injections):
        save_freq = get(
            default_config(algorithm, version, n_steps, test_freq, overrides),
            "trainer.save_freq",
            -1,
        )
        if not save_freq or int(save_freq) <= 0:
            overrides["trainer.save_freq"] = test_freq if test_freq > 0 else 10
    cfg = default_config(algorithm, version, n_steps, test_freq, overrides)
    for inj in injections:
        reason = _path.not_applicable(inj.kind, algorithm, version, cfg)
        if reason:
            raise ValueError(f"cannot inject {inj.kind!r}: {reason}")

    rng = np.random.default_rng([int(seed), 1 if algorithm == "ppo" else 0, 0x5EED])
    sim = _Sim(n_steps, algorithm, version, cfg, rng, noise, dict(levels or {}), dyn)
    sim.seed = int(seed)
    _base_dynamics(sim)
    if dyn.critic_warmup and algorithm == "ppo":
        _critic_warmup(sim, dyn.critic_warmup)
    _fam.setup(sim, int(seed))
    if dyn.resume_step is not None:
        _path.resume(sim, sim.validate_step(dyn.resume_step, "resume") + sim.first)
    truth: list[Injection] = []
    ordered = sorted(injections, key=lambda i: _path.PHASE[i.kind])
    pending: list[tuple[Injection, int]] = []
    for inj in ordered:
        if _path.PHASE[inj.kind] == 0:
            pending.append((inj, _path.apply(sim, inj)))
    _derive(sim)
    if sim.restart is not None:
        first = copy.copy(sim)
        first.a = sim.restart.pop("first_attempt_drivers")
        _derive(first)
        sim.restart["first_attempt"] = first.a
    for inj in ordered:
        if _path.PHASE[inj.kind] == 1:
            pending.append((inj, _path.apply(sim, inj)))
    by_input = {id(inj): step for inj, step in pending}
    truth = [Injection(i.kind, by_input[id(i)], i.magnitude) for i in injections]
    return _build(sim, truth, int(seed))


# --------------------------------------------------------------------------------------------
def _layout(s: _Sim) -> list[tuple[str, str]]:
    """(printed name, latent key) in verl's insertion order for this version and config."""
    v, ppo, cfg = s.version, s.algorithm == "ppo", s.cfg
    out: list[tuple[str, str]] = []
    add = out.append
    if at_least(v, "0.2") and get(cfg, "trainer.balance_batch", True):
        for name, key in (
            ("min", "seqlen_min"),
            ("max", "seqlen_max"),
            ("minmax_diff", "seqlen_minmax_diff"),
            ("balanced_min", "seqlen_bmin"),
            ("balanced_max", "seqlen_bmax"),
            ("mean", "seqlen_mean"),
        ):
            add((f"global_seqlen/{name}", key))
    if at_least(v, "0.4"):
        add(("actor/entropy", "entropy"))
    use_kl_loss = bool(get(cfg, "actor_rollout_ref.actor.use_kl_loss", False)) and at_least(
        v, "0.2"
    )
    if at_least(v, "0.4") and get(cfg, "algorithm.use_kl_in_reward", False):
        out += [("actor/reward_kl_penalty", "kl"), ("actor/reward_kl_penalty_coeff", "beta")]
    if s.kl_in_reward and not at_least(v, "0.4"):
        out += [("critic/kl", "kl"), ("critic/kl_coeff", "beta")]
    if ppo:
        out += [
            ("critic/vf_loss", "vf_loss"),
            ("critic/vf_clipfrac", "vf_clipfrac"),
            ("critic/vpred_mean", "vpred_mean"),
            ("critic/grad_norm", "critic_grad_norm"),
        ]
        if at_least(v, "0.8"):
            add(("critic/loss", "vf_loss"))
        out += _mfu(v, "critic")
        add(_lr(v, "critic"))
    if use_kl_loss:
        out += [("actor/kl_loss", "kl"), ("actor/kl_coef", "kl_coef")]
    if not at_least(v, "0.4"):
        add(("actor/entropy_loss", "entropy"))
    out += [("actor/pg_loss", "pg_loss"), ("actor/pg_clipfrac", "pg_clipfrac")]
    add(("actor/ppo_kl", "ppo_kl"))
    if at_least(v, "0.4"):
        add(("actor/pg_clipfrac_lower", "pg_clipfrac_lower"))
    add(("actor/grad_norm", "grad_norm"))
    if at_least(v, "0.8"):
        add(("actor/loss", "actor_loss"))
    out += _mfu(v, "actor")
    if at_least(v, "0.3"):
        perf = "actor/perf" if at_least(v, "0.8") else "perf"
        for name, key in (
            ("max_memory_allocated_gb", "mem_allocated"),
            ("max_memory_reserved_gb", "mem_reserved"),
            ("cpu_memory_used_gb", "mem_cpu"),
        ):
            add((f"{perf}/{name}", key))
    add(_lr(v, "actor"))
    out += _fam.layout(s, "actor")
    for name in val_names(v):
        add((name, "VAL"))
    if at_least(v, "0.4"):
        out += [("training/global_step", "global_step"), ("training/epoch", "epoch")]
    out += _fam.layout(s, "training")
    for prefix, key in (
        ("critic/score", "score"),
        ("critic/rewards", "rewards"),
        ("critic/advantages", "adv"),
        ("critic/returns", "returns"),
    ):
        out += _stats(prefix, key)
    if ppo:
        out += _stats("critic/values", "values")
        if at_least(v, "0.2"):
            add(("critic/vf_explained_var", "explained_var"))
    out += _stats("response_length", "resp")
    if at_least(v, "0.2"):
        add(("response_length/clip_ratio", "clip_ratio"))
    out += _fam.layout(s, "response")
    out += _stats("prompt_length", "prompt")
    if at_least(v, "0.2"):
        add(("prompt_length/clip_ratio", "prompt_clip"))
    if at_least(v, "0.9"):
        add(("response/aborted_ratio", "aborted_ratio"))
    tprefix = "timing/" if v == "0.1" else "timing_s/"
    phases = [
        "gen",
        "reward",
        "old_log_prob",
        "ref",
        "values",
        "adv",
        "update_critic",
        "update_actor",
        "update_weights",
        "testing",
        "save_checkpoint",
        "step",
    ]
    if v == "0.1":
        phases = [p for p in phases if p not in ("reward", "old_log_prob", "update_weights")]
    for p in phases:
        if f"t_{p}" in s.a:
            add((f"{tprefix}{p}", f"t_{p}"))
    if at_least(v, "0.2"):
        for p in ("gen", "ref", "values", "adv", "update_critic", "update_actor"):
            if f"tpt_{p}" in s.a:
                add((f"timing_per_token_ms/{p}", f"tpt_{p}"))
    out += _fam.layout(s, "timing")
    if at_least(v, "0.3"):
        out += [
            ("perf/total_num_tokens", "total_tokens"),
            ("perf/time_per_step", "time_per_step"),
            ("perf/throughput", "throughput"),
        ]
    out += _fam.layout(s, "end")
    return out


def _stats(prefix: str, key: str) -> list[tuple[str, str]]:
    """`prefix/mean`, `/max`, `/min` for `_layout`, read from latent `key_mean`, … ."""
    return [(f"{prefix}/{stat}", f"{key}_{stat}") for stat in ("mean", "max", "min")]


def _mfu(version: str, role: str) -> list[tuple[str, str]]:
    """`role`'s MFU metric for `_layout`: `perf/mfu/<role>` from verl 0.3, `mfu/<role>` in 0.2,
    none before."""
    if at_least(version, "0.3"):
        return [(f"perf/mfu/{role}", f"mfu_{role}")]
    return [(f"mfu/{role}", f"mfu_{role}")] if version == "0.2" else []


def _lr(version: str, role: str) -> tuple[str, str]:
    """`role`'s learning-rate metric for `_layout` (verl 0.1: `<role>/lr(1e-4)`, lr × 1e4)."""
    return (f"{role}/lr(1e-4)" if version == "0.1" else f"{role}/lr", f"{role}_lr")


def val_names(version: str) -> list[str]:
    """Validation metric names verl logs for GSM8K in `version`."""
    if not at_least(version, "0.4"):
        return [f"val/test_score/{VAL_SOURCE}"]
    names = [
        f"val-aux/{VAL_SOURCE}/reward/mean@1",
        f"val-aux/{VAL_SOURCE}/score/mean@1",
        f"val-core/{VAL_SOURCE}/acc/mean@1",
    ]
    if at_least(version, "0.5"):
        names += ["val-aux/num_turns/min", "val-aux/num_turns/max", "val-aux/num_turns/mean"]
    return names


def _val_values(name: str, acc: np.ndarray, size: int = GSM8K_TEST_PROMPTS) -> np.ndarray:
    if "num_turns" in name:
        return np.full(len(acc), 2.0)
    # accuracy over the validation set: k correct out of its size (GSM8K's test set: 1319)
    acc = np.round(np.clip(acc, 0.0, 1.0) * size) / size
    if name.endswith("/acc/mean@1"):
        return acc
    # reward/score: GSM8K reward = acc here (format score 0); 1319 samples → k/1319
    return acc


def _build(s: _Sim, truth: list[Injection], seed: int) -> SimRun:
    a, cfg = s.a, s.cfg
    n = s.n
    a["global_step"] = s.steps.astype(np.float64)
    a["epoch"] = ((s.steps - 1).clip(0) // steps_per_epoch(cfg)).astype(np.float64)
    lr = float(get(cfg, "actor_rollout_ref.actor.optim.lr", 1e-6) or 1e-6)
    clr = float(get(cfg, "critic.optim.lr", 1e-5) or 1e-5)
    scale = 1e4 if s.version == "0.1" else 1.0
    a["actor_lr"] = lr * scale * s.lr_factor
    a["critic_lr"] = np.full(n, clr * scale)
    coef = float(get(cfg, "actor_rollout_ref.actor.kl_loss_coef", 0.001) or 0.0)
    if "kl_coef" not in a:
        a["kl_coef"] = np.full(n, coef)
    if "beta" not in a:
        a["beta"] = np.full(n, s.beta)
    a["zero"] = np.zeros(n)
    if "aborted_ratio" not in a:
        a["aborted_ratio"] = np.zeros(n)
    a["actor_loss"] = a["pg_loss"] + np.nan_to_num(a["kl_coef"]) * a["kl"]
    for key in ("seqlen_mean",):
        a[key] = a[key].astype(np.float64)

    wall = 60.0 + np.cumsum(a["t_step"])
    if s.restart is not None:
        wall = _restart_wall(s, wall)
    keep = n if s.truncate_after is None else s.truncate_after + 1

    layout = _layout(s)
    names: list[str] = []
    cols_step: list[np.ndarray] = []
    cols_val: list[np.ndarray] = []
    cols_wall: list[np.ndarray] = []
    steps = s.steps[:keep]
    vmask = s.val_steps <= steps[-1]
    vsteps = s.val_steps[vmask]
    vwall = wall[vsteps - s.first]
    for name, key in layout:
        if key == "VAL":
            vals = _val_values(name, s.val["acc"][vmask], s.val_size)
            st, wt = vsteps, vwall
            if s.first == 1 and get(cfg, "trainer.val_before_train", True):
                v0 = _val_values(name, np.array([s.val0]), s.val_size)
                st = np.concatenate([[0], st])
                vals = np.concatenate([v0, vals])
                wt = np.concatenate([[45.0], wt])
        elif key in ("t_testing", "t_save_checkpoint"):
            sub = s.val_steps if key == "t_testing" else s.save_steps
            sub = sub[sub <= steps[-1]]
            st, vals, wt = sub, a[key][: len(sub)], wall[sub - s.first]
        else:
            st, vals, wt = steps, a[key][:keep], wall[:keep]
            if s.actor_from and _from_actor_update(name):
                st, vals, wt = st[s.actor_from :], vals[s.actor_from :], wt[s.actor_from :]
            if name in _fam.SPARSE_METRICS:  # logged only at steps where they are > 0
                logged = np.isfinite(vals)
                st, vals, wt = st[logged], vals[logged], wt[logged]
        names.append(name)
        cols_step.append(np.asarray(st, dtype=np.int64))
        cols_val.append(np.asarray(vals, dtype=np.float64))
        cols_wall.append(np.asarray(wt, dtype=np.float64))
    metrics = _long_frame(names, cols_step, cols_val, cols_wall)

    superseded = None
    if s.restart is not None:
        superseded = _superseded_frame(s, layout)
    segments = [
        (
            int(
                min(
                    0 if get(cfg, "trainer.val_before_train", True) and s.first == 1 else s.first,
                    s.first,
                )
            ),
            cfg,
        )
    ]
    if s.restart is not None:
        segments.append((s.restart["resume_step"], s.restart["config"]))
    return SimRun(
        algorithm=s.algorithm,
        version=s.version,
        seed=seed,
        config=cfg,
        metrics=metrics,
        truth=truth,
        config_segments=segments,
        events=sorted(s.events, key=lambda e: e[0]),
        noise=s.noise,
        metric_order=names,
        details=s.details,
        dynamics=s.dyn,
        superseded=superseded,
        restart=None
        if s.restart is None
        else {
            k: int(v)
            for k, v in s.restart.items()
            if k in ("checkpoint_step", "last_printed", "resume_step")
        },
    )


def _long_frame(
    names: list[str], steps: list[np.ndarray], values: list[np.ndarray], walls: list[np.ndarray]
) -> pl.DataFrame:
    lengths = np.array([len(x) for x in steps])
    metric = pl.Series("metric", names, dtype=pl.Utf8).gather(
        np.repeat(np.arange(len(names)), lengths)
    )
    step = np.concatenate(steps)
    # sort by (step, metric name) through an integer key: much faster than a string sort
    rank = np.argsort(np.argsort(np.array(names, dtype=object)))
    key = step * len(names) + np.repeat(rank, lengths)
    order = np.argsort(key, kind="stable")
    frame = pl.DataFrame(
        {
            "step": step[order],
            "metric": metric.gather(order),
            "value": np.concatenate(values)[order],
            "wall_time": np.concatenate(walls)[order],
        },
        schema=METRICS_SCHEMA,
    )
    return frame


def _restart_wall(s: _Sim, wall: np.ndarray) -> np.ndarray:
    r = s.restart
    assert r is not None
    ci, pi = r["checkpoint_step"] - s.first, r["last_printed"] - s.first
    gap = (wall[pi] - wall[ci]) + 240.0  # re-run steps + restart time (Ray, model load)
    out = wall.copy()
    out[ci + 1 :] += gap
    r["first_wall"] = wall  # first attempt's wall times, for superseded values
    return out


def _superseded_frame(s: _Sim, layout: list[tuple[str, str]]) -> pl.DataFrame:
    r = s.restart
    assert r is not None
    lo, hi = r["resume_step"] - s.first, r["last_printed"] - s.first + 1
    first_a = r["first_attempt"]
    wall = r["first_wall"]
    names, st, va, wa = [], [], [], []
    steps = s.steps[lo:hi]
    for name, key in layout:
        if key in ("VAL", "t_testing", "t_save_checkpoint"):
            continue
        src = first_a.get(key, s.a[key])
        names.append(name)
        st.append(steps)
        va.append(np.asarray(src[lo:hi], dtype=np.float64))
        wa.append(wall[lo:hi])
    return _long_frame(names, st, va, wa)


__all__ = [
    "INT_METRICS",
    "LEVEL_DEFAULTS",
    "Injection",
    "SimRun",
    "set_dotted",
    "simulate",
    "val_names",
]
