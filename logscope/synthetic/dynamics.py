"""The shape of a simulated run: the tame defaults, or the dynamics real healthy runs show.

`Dynamics()` is the tame simulator (near-Gaussian noise, constant LR, smooth trends) that the
seed fixtures and the unit tests were calibrated on. `realistic(rng, n_steps, algorithm)` draws the
knobs from the ranges public runs show (verl's examples, the DAPO and DeepSeek-R1 papers, the
excerpts in `shared/real_logs/`):

- noise is Student-t (3-6 degrees of freedom) and AR(1)-correlated (phi 0.3-0.8), not i.i.d.;
- the learning rate warms up over 0-10% of the run and decays by cosine or linearly (or stays);
  the size of each update (`actor/ppo_kl`, clip fractions) follows the LR;
- response length grows 1-4x over a reasoning run and truncation rises slowly with it;
- entropy falls by 30-60% in the first 5-20% of the run, then plateaus;
- KL to the reference grows like the square root of the distance travelled;
- checkpoint and validation steps lengthen their own step only; the first step is slow (warm-up
  of vLLM and the allocator); runs may resume from a checkpoint (config printed again, the steps
  after the checkpoint logged twice);
- DAPO-style dynamic sampling repeats generation 1-3x step to step;
- GPU memory rises over the first steps, then stays flat with an allocator sawtooth;
- PPO may warm the critic up first (no actor metrics for `trainer.critic_warmup` steps);
- on-policy runs (one mini-batch, one epoch) log `ppo_kl` as pure noise around 0, clip fraction 0;
- the validation set may be small (30-500 prompts), so validation accuracy moves in steps of 1/N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

SCHEDULES = ("constant", "cosine", "linear")


@dataclass(frozen=True)
class Dynamics:
    """Knobs of a simulated run's healthy dynamics; the defaults are the tame simulator.

    Each knob, with the range `realistic` draws it from:
    tail_df: Student-t degrees of freedom of the noise (0: near-Gaussian, tame). 3-6.
    noise_phi: AR(1) coefficient of the noise (0: white). 0.3-0.8.
    lr_warmup_ratio: share of the run the LR warms up over (verl's `lr_warmup_steps_ratio`).
        0 (2 runs in 3) or 0.01-0.1.
    lr_schedule: "constant", "cosine" or "linear" decay after warm-up. 45/40/15 %.
    min_lr_ratio: the decayed LR's floor, relative to the peak. 0 or 0.1.
    update_lr_power: update size (ppo_kl, clip fraction) ∝ (lr / peak lr) ** power. 1-2.
    length_growth: mean response length at the end / at the start (1: the tame drift).
        Reasoning runs (60 %) 1.8-4, others 0.7-1.3.
    length_sigma: log-sd of per-response lengths; sets how truncation rises with the mean.
        0.45-0.7.
    entropy_drop: share of entropy lost in the early fall (0: the tame slow decay). 0.3-0.6.
    entropy_tau: time constant of that fall, as a share of the run. 0.05-0.2.
    kl_sqrt: KL to the reference grows like √(distance travelled) instead of the tame warm-up.
        Always.
    dynamic_sampling: most generation rounds a step takes (1: none; DAPO: up to 3). GRPO runs:
        3 in one run of 3.
    first_step_slow: the first step's time multiplier (vLLM/allocator warm-up; 1: none). 1.2-3.
    memory_warmup_steps: steps over which GPU memory rises to its plateau (0: flat from step 1).
        2-30.
    memory_sawtooth_gb: peak-to-peak GiB of the allocator's sawtooth (0: none). 0-1.5.
    memory_sawtooth_period: its period in steps. 3-40.
    critic_warmup: PPO steps before the actor's first update (`trainer.critic_warmup`). Half
        the PPO runs: 3-20 (at most a quarter of the run).
    on_policy: one mini-batch and one epoch per step: ppo_kl is noise around 0, clip fraction 0.
        One run in 5.
    val_size: prompts in the validation set (accuracy moves in steps of 1/val_size; 0: GSM8K's
        1319 with the tame noise). 30, 60, 100, 500 or 1319.
    resume_step: resume from the last checkpoint before this step (None: no resume). Runs
        longer than 3 checkpoints: 30 %, at 30-80 % of the run.
    """

    tail_df: float = 0.0
    noise_phi: float = 0.0
    lr_warmup_ratio: float = 0.0
    lr_schedule: str = "constant"
    min_lr_ratio: float = 0.0
    update_lr_power: float = 1.5
    length_growth: float = 1.0
    length_sigma: float = 0.55
    entropy_drop: float = 0.0
    entropy_tau: float = 0.1
    kl_sqrt: bool = False
    dynamic_sampling: int = 1
    first_step_slow: float = 1.0
    memory_warmup_steps: int = 0
    memory_sawtooth_gb: float = 0.0
    memory_sawtooth_period: int = 10
    critic_warmup: int = 0
    on_policy: bool = False
    val_size: int = 0
    resume_step: int | None = None

    def __post_init__(self) -> None:
        if self.lr_schedule not in SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {SCHEDULES}, not {self.lr_schedule!r}")
        if self.tail_df and self.tail_df <= 2:
            raise ValueError("tail_df must be > 2 (finite variance) or 0")
        if not 0 <= self.noise_phi < 1:
            raise ValueError("noise_phi must be in [0, 1)")
        if not 0 <= self.lr_warmup_ratio < 1 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError("lr_warmup_ratio must be in [0, 1), min_lr_ratio in [0, 1]")
        if self.length_growth <= 0 or not 0 <= self.entropy_drop < 1:
            raise ValueError("length_growth must be > 0, entropy_drop in [0, 1)")
        if self.dynamic_sampling < 1 or self.first_step_slow < 1:
            raise ValueError("dynamic_sampling and first_step_slow must be >= 1")

    @property
    def tame(self) -> bool:
        return self == Dynamics()

    def config(self, train_batch_size: int) -> dict[str, object]:
        """The verl config keys these dynamics imply (dotted key → value)."""
        out: dict[str, object] = {}
        if self.lr_warmup_ratio:
            out["actor_rollout_ref.actor.optim.lr_warmup_steps_ratio"] = self.lr_warmup_ratio
        if self.lr_schedule != "constant":
            out["actor_rollout_ref.actor.optim.warmup_style"] = self.lr_schedule
            out["actor_rollout_ref.actor.optim.min_lr_ratio"] = self.min_lr_ratio
        if self.critic_warmup:
            out["trainer.critic_warmup"] = self.critic_warmup
        if self.on_policy:
            out["actor_rollout_ref.actor.ppo_mini_batch_size"] = train_batch_size
            out["actor_rollout_ref.actor.ppo_epochs"] = 1
        return out

    def lr_factor(self, t: np.ndarray, n: int) -> np.ndarray:
        """LR / peak LR at 1-based positions `t`, as verl's schedulers log it (`actor/lr`)."""
        warm = int(self.lr_warmup_ratio * n)
        out = np.ones(len(t))
        if warm > 0:
            out = np.minimum(1.0, t / warm)
        if self.lr_schedule != "constant":
            span = max(1, n - warm)
            frac = np.clip((t - warm) / span, 0.0, 1.0)
            shape = 0.5 * (1 + np.cos(math.pi * frac)) if self.lr_schedule == "cosine" else 1 - frac
            decayed = self.min_lr_ratio + (1 - self.min_lr_ratio) * shape
            out = np.where(t > warm, decayed, out)
        return out


def realistic(
    rng: np.random.Generator, n_steps: int, algorithm: str, reasoning: bool | None = None
) -> tuple[Dynamics, dict[str, object]]:
    """Draw realistic dynamics for a run, and the config overrides that go with them."""
    if reasoning is None:
        reasoning = bool(rng.random() < 0.6)
    schedule = str(rng.choice(SCHEDULES, p=[0.45, 0.4, 0.15]))
    warm_ratio = float(rng.choice([0.0, 0.0, rng.uniform(0.01, 0.1)]))
    min_lr = float(rng.choice([0.0, 0.1])) if schedule != "constant" else 0.0
    on_policy = bool(rng.random() < 0.2)
    ppo = algorithm == "ppo"
    critic_warmup = int(rng.integers(3, 21)) if ppo and rng.random() < 0.5 else 0
    critic_warmup = min(critic_warmup, max(0, n_steps // 4))
    dyn = Dynamics(
        tail_df=float(rng.uniform(3.0, 6.0)),
        noise_phi=float(rng.uniform(0.3, 0.8)),
        lr_warmup_ratio=warm_ratio,
        lr_schedule=schedule,
        min_lr_ratio=min_lr,
        update_lr_power=float(rng.uniform(1.0, 2.0)),
        length_growth=float(rng.uniform(1.8, 4.0)) if reasoning else float(rng.uniform(0.7, 1.3)),
        length_sigma=float(rng.uniform(0.45, 0.7)),
        entropy_drop=float(rng.uniform(0.3, 0.6)),
        entropy_tau=float(rng.uniform(0.05, 0.2)),
        kl_sqrt=True,
        dynamic_sampling=int(rng.choice([1, 1, 3])) if not ppo else 1,
        first_step_slow=float(rng.uniform(1.2, 3.0)),
        memory_warmup_steps=int(rng.integers(2, 30)),
        memory_sawtooth_gb=float(rng.uniform(0.0, 1.5)),
        memory_sawtooth_period=int(rng.integers(3, 40)),
        critic_warmup=critic_warmup,
        on_policy=on_policy,
        val_size=int(rng.choice([30, 60, 100, 500, 1319])),
    )
    batch = int(rng.choice([64, 128, 256, 512]))
    save_freq = int(rng.choice([10, 20, 50, 100]))
    if n_steps > 3 * save_freq and rng.random() < 0.3:
        # after the first checkpoint, so there is one to resume from
        at = max(int(rng.uniform(0.3, 0.8) * n_steps), save_freq + 1)
        dyn = replace(dyn, resume_step=at)
    overrides: dict[str, object] = {"data.train_batch_size": batch, "trainer.save_freq": save_freq}
    if not on_policy:
        overrides["actor_rollout_ref.actor.ppo_mini_batch_size"] = batch // int(
            rng.choice([2, 4, 8])
        )
    if reasoning:  # long responses: verl's recipes pack them by tokens (dynamic batch size)
        cap = int(rng.choice([2048, 4096, 8192]))
        overrides["data.max_response_length"] = cap
        for role in ("actor", "rollout", "ref"):
            overrides[f"actor_rollout_ref.{role}.use_dynamic_bsz"] = True
        overrides["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] = 2 * (cap + 512)
        if ppo:
            overrides["critic.use_dynamic_bsz"] = True
            overrides["critic.ppo_max_token_len_per_gpu"] = 4 * (cap + 512)
    return dyn, overrides


__all__ = ["SCHEDULES", "Dynamics", "realistic"]
