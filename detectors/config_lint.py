"""Config lint: the §A rules of tuning_knowledge.md and verl's start-up checks (LS501–LS516).

The rule logic lives in `logscope.check.rules`; each class here is one rule's catalogue entry,
tunables and wrapper. `logscope check` runs them on a launch command or YAML (a run that has
not started: verl's own start-up checks are repeated), `logscope analyze` on the config dump(s)
of a log (findings at the segment's first step; identical findings in later segments are not
repeated).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from logscope.advice import cited
from logscope.check import rules
from logscope.check.rules import ConfigView, Hit
from logscope.detector import Detector
from logscope.model import Finding, Run
from logscope.sources import cite, cite_all

#: Source kinds of runs that have not started (a command line or a YAML file).
PREFLIGHT_KINDS = frozenset({"verl-command", "verl-yaml"})


def views(run: Run) -> list[tuple[int | None, ConfigView]]:
    """(step for findings, view) per config segment of `run`."""
    preflight = run.source.kind in PREFLIGHT_KINDS
    explicit = run.meta.get("explicit_keys")
    explicit_set = frozenset(explicit) if explicit is not None else None
    version = run.meta.get("verl_version")
    out = []
    for seg in run.config_segments:
        view = ConfigView(seg.config, version, explicit_set, preflight)
        out.append((None if preflight else seg.first_step, view))
    return out


class ConfigRule(Detector):
    """Base for config rules: lint each config segment; don't repeat a finding unchanged."""

    reads: ClassVar[str] = "config"
    groups: ClassVar[tuple[str, ...]] = ("config",)

    def __init__(self) -> None:
        """No tunables; a subclass that has some declares them as keyword arguments."""

    @abstractmethod
    def check(self, view: ConfigView) -> list[Hit]:
        """The rule's hits on one config."""

    def detect(self, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        previous: set[tuple[str, str]] = set()
        for step, view in views(run):
            current: set[tuple[str, str]] = set()
            for hit in self.check(view):
                key = (hit.severity, hit.message)
                current.add(key)
                if key in previous:
                    continue
                findings.append(self._finding(hit, step))
            previous = current
        return findings

    def _finding(self, hit: Hit, step: int | None) -> Finding:
        return self.finding(
            severity=hit.severity,
            title=hit.title or self.title,
            message=cite(hit.message, short=True),
            step=step,
            evidence=hit.evidence,
            advice=[cited(a) for a in hit.advice],
            references=cite_all(hit.references),
        )


class MicroBatchOomRisk(ConfigRule):
    """The actor's micro batch puts too many tokens on each GPU in the PPO update.

    What it detects:
        `actor.ppo_micro_batch_size_per_gpu × (data.max_prompt_length + data.max_response_length)`
        above 12,000 tokens per GPU per micro-step. Error when the micro batch is also above the
        GRPO article's golden formula `floor(24·1024 / (prompt + response))`, with one suggested
        value; info, with nothing to change, when only the 12,000-token limit is passed (the
        golden formula, which gives the suggested value, allows it: the two heuristics disagree
        for long sequences), so checking the suggested value never asks for another. When the
        model is known from `actor_rollout_ref.model.path` (e.g. `Qwen2.5-7B-Instruct` → 7B),
        the message adds the GRPO article's memory estimate `micro × tokens × hidden_size × 2.5`.
        Skipped with `actor.use_dynamic_bsz=True`.

    Why it matters:
        Activation memory in the update grows with tokens per micro-step; the run dies with
        `CUDA out of memory` in the first update, after a full rollout.

    Example:
        Qwen2-7B-Instruct, `data.max_prompt_length=512 data.max_response_length=1024
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64`: 64 × 1536 = 98,304 tokens;
        floor(24·1024/1536) = 16 → suggest 16. The GRPO article reports a peak above 38 GB on an
        A100-40G for this case.

    Advice:
        Set `actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu` to the largest value at or
        below the golden one that is a multiple of the rollout TP size and divides each GPU's
        mini-batch (`ppo_mini_batch_size × n ÷ (GPUs ÷ SP)`, verl's own check), where such a
        value exists, so the micro-batch rules (LS501, LS502, LS516) agree on it. Gradient
        accumulation keeps the effective batch (`ppo_mini_batch_size`) unchanged.

    Known false positives:
        GPUs with much more than 40 GB, gradient checkpointing, offloading or sequence
        parallelism make larger micro batches fit. The memory estimate is the GRPO
        article's heuristic: it does not reproduce that article's own 38 GB (it is shown as a relative
        size only).

    References:
        seed:grpo-pitfalls §1.1–1.3 (golden formula, 12,000-token limit, memory estimate).
    """

    code = "LS501"
    name = "micro-batch-oom-risk"
    title = "Actor micro batch risks GPU OOM"
    default_severity = "error"

    def __init__(
        self, token_limit: int = 12_000, budget_tokens: int = 24 * 1024, memory_factor: float = 2.5
    ) -> None:
        self.token_limit = token_limit
        self.budget_tokens = budget_tokens
        self.memory_factor = memory_factor

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.micro_batch_oom_risk(
            view, self.token_limit, self.budget_tokens, self.memory_factor
        )


class MicroBatchTpMismatch(ConfigRule):
    """The actor micro batch is not a multiple of the rollout's tensor-parallel size.

    What it detects:
        `actor.ppo_micro_batch_size_per_gpu % rollout.tensor_model_parallel_size != 0` with a
        TP size above 1 (verl's default TP size is 2).

    Why it matters:
        The GRPO article ties this to vLLM tensor-split errors such as `RuntimeError: Expected
        all tensors to be on the same device`.

    Example:
        `actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3
        actor_rollout_ref.rollout.tensor_model_parallel_size=2` → suggest 2.

    Advice:
        The largest multiple of the TP size at or below the current micro batch (or just above,
        when it is below the TP size) that stays within the golden formula and divides each
        GPU's mini-batch; when none does, no value is suggested (change the mini batch or TP).

    Known false positives:
        verl does not enforce this and many runs use odd micro batches without trouble; it is
        the GRPO article's claim, hence a warning.

    References:
        seed:grpo-pitfalls §1.2.
    """

    code = "LS502"
    name = "micro-batch-tp-mismatch"
    title = "Actor micro batch not a multiple of the TP size"

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.micro_batch_tp_mismatch(view)


class GrpoGroupSize(ConfigRule):
    """GRPO's group size (`rollout.n`) is degenerate, too small, odd or costly.

    What it detects:
        With `algorithm.adv_estimator` grpo (or grpo_passk, grpo_vectorized, gdpo):
        `rollout.n=1` (error: each group has one sample), n below 4 (warning), odd n (warning),
        n ≥ 16 (warning).

    Why it matters:
        With n=1 verl's GRPO advantage is the raw score (group mean 0, std 1) and verl does not
        check it. Small groups give a noisy baseline; the GRPO article measured on GSM8K/Qwen2-7B:
        n=4 reward std 0.18, 1200 steps to converge; n=8 std 0.11, 950 steps; n=16 std 0.09 but
        +47% step time, and vLLM hangs in rollout.

    Example:
        `algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=1` → error, suggest n=4;
        `rollout.n=16` → warning, suggest 8.

    Advice:
        `actor_rollout_ref.rollout.n=4` on a tight budget, 8 for reasoning tasks; keep
        `data.train_batch_size` a multiple of it.

    Known false positives:
        Large n can be deliberate (pass@k estimators, research on group size).

    References:
        seed:grpo-pitfalls §2.1–2.2; verl:trainer/ppo/core_algos.py.
    """

    code = "LS503"
    name = "grpo-group-size"
    title = "GRPO group size (rollout.n) out of the safe range"

    def __init__(self, minimum: int = 4, costly: int = 16) -> None:
        self.minimum = minimum
        self.costly = costly

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.grpo_group_size(view, self.minimum, self.costly)


class BatchNotDivisibleByN(ConfigRule):
    """The train batch does not divide as verl and the GRPO article require.

    What it detects:
        Before a run: verl's own check, `real_train_batch_size = data.train_batch_size ×
        rollout.n` not divisible by the GPU count (error; FSDP, no dynamic batch size). Always:
        `data.train_batch_size % rollout.n != 0` (warning; the GRPO article's rule).

    Why it matters:
        verl stops at start-up with `real_train_batch_size (X) must be divisible by minimal
        possible batch size (Y)`; the GRPO article's divisibility keeps groups whole.

    Example:
        `data.train_batch_size=500 actor_rollout_ref.rollout.n=8` on 8 GPUs: 500 % 8 = 4 →
        suggest 496 (500 × 8 = 4000 is divisible by 8 GPUs, so verl itself accepts it).

    Advice:
        The largest `data.train_batch_size` at or below the current one (the smallest above
        when none is) that is a multiple of n and whose product with n divides by the GPU
        count: both checks suggest the same value. When the GPU count is verl's default (the
        user set no `trainer.n_gpus_per_node`), the message says so.

    Known false positives:
        The GRPO article's error text `batch_size must be divisible by n` is not verl's; verl
        accepts a train batch that is not a multiple of n when the product divides.

    References:
        seed:grpo-pitfalls §2.3; verl:utils/config.py; verl:trainer/ppo/ray_trainer.py.
    """

    code = "LS504"
    name = "batch-not-divisible-by-n"
    title = "Train batch not a multiple of rollout.n"

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.batch_not_divisible_by_n(view)


class MiniBatchNotDivisor(ConfigRule):
    """The PPO mini batch does not divide the train batch.

    What it detects:
        `data.train_batch_size % actor.ppo_mini_batch_size != 0`, with the share of
        each step's prompts outside the full mini-batches.

    Why it matters:
        The PPO article reports the remainder as dropped every step (92% → 99.7% data use after
        fixing); at best it is a short, unevenly weighted last update. verl only checks
        `train_batch_size >= ppo_mini_batch_size`.

    Example:
        `data.train_batch_size=500 actor_rollout_ref.actor.ppo_mini_batch_size=128`: 3 full
        mini-batches use 384 of 500 prompts (76.8%) → suggest 125.

    Advice:
        The largest divisor of the train batch at or below the current mini batch that still
        gives every GPU a sample (or make the train batch a multiple of the mini batch).

    Known false positives:
        None known for the arithmetic; the size of the effect depends on the verl version's
        splitting. The PPO article's own example (256/64) divides exactly, so this rule stays
        silent on it.

    References:
        seed:ppo-tuning §5.1.
    """

    code = "LS505"
    name = "mini-batch-not-divisor"
    title = "PPO mini batch does not divide the train batch"

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.mini_batch_not_divisor(view)


class MiniBatchLargerThanBatch(ConfigRule):
    """The PPO mini batch is larger than the train batch.

    What it detects:
        `actor.ppo_mini_batch_size > data.train_batch_size`.

    Why it matters:
        verl refuses to start: `train_batch_size (X) must be >= actor.ppo_mini_batch_size (Y)`
        (0.6+, ValueError) or a bare AssertionError in `_validate_config` (0.3–0.5).

    Example:
        `data.train_batch_size=128 actor_rollout_ref.actor.ppo_mini_batch_size=256` → suggest
        128.

    Advice:
        `actor_rollout_ref.actor.ppo_mini_batch_size` at most the train batch.

    Known false positives:
        None: this is verl's own check.

    References:
        verl:workers/config/actor.py (ActorConfig.validate); verl:trainer/ppo/ray_trainer.py.
    """

    code = "LS506"
    name = "mini-batch-larger-than-batch"
    title = "PPO mini batch larger than the train batch"
    default_severity = "error"

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.mini_batch_larger_than_batch(view)


class KlCoefZero(ConfigRule):
    """A KL coefficient of 0 switches off the pull toward the reference policy.

    What it detects:
        `actor.kl_loss_coef=0` with `actor.use_kl_loss=True` (error), an explicit
        `kl_loss_coef=0` without the KL loss (warning for GRPO without in-reward KL, else
        info), and `algorithm.kl_ctrl.kl_coef=0` with `algorithm.use_kl_in_reward=True`
        (warning).

    Why it matters:
        Without a KL constraint the policy drifts from the reference; the GRPO article reports
        gibberish and repetition.

    Example:
        `actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0` →
        suggest 0.001 (0.0005 for models ≤ 3B).

    Advice:
        verl's default 0.001 for ~7B models (0.0005 for small models, 0.002 as a start for
        ≥ 30B), then keep it fixed for the run.

    Known false positives:
        Deliberate KL-free recipes (e.g. DAPO-style training without a reference model).

    References:
        seed:grpo-pitfalls §3.1, §3.3.
    """

    code = "LS507"
    name = "kl-coef-zero"
    title = "KL coefficient set to 0"
    default_severity = "error"

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.kl_coef_zero(view)


class KlCoefScaleMismatch(ConfigRule):
    """The KL coefficient is verl's 7B-tuned default on a much smaller or larger model.

    What it detects:
        The active KL coefficient (`actor.kl_loss_coef` with the KL loss on;
        `algorithm.kl_ctrl.kl_coef` with in-reward KL, or set explicitly on a command line) at
        0.001 or more for a model of ≤ 3B, or at 0.001 or less for ≥ 30B (model size from
        `actor_rollout_ref.model.path`).

    Why it matters:
        The GRPO article: 0.001 is tuned for ~7B; on a small model it over-suppresses the policy
        (reward grows slowly), on 72B it is too weak (loss oscillates).

    Example:
        Qwen2.5-0.5B with `algorithm.kl_ctrl.kl_coef=0.001` → suggest 0.0005 (what the PPO
        article's tuned run used).

    Advice:
        The starting value by model size (0.0005 up to 3B, 0.002 from 30B), which this rule
        accepts; then calibrate on the KL to the reference (0.01–0.03) and keep it fixed.

    Known false positives:
        The GRPO article gives a direction, not numbers; a coefficient already calibrated for the
        task is fine. Sizes are guessed from the model path.

    References:
        seed:grpo-pitfalls §3.1–3.2; seed:ppo-tuning §4.2.
    """

    code = "LS508"
    name = "kl-coef-scale-mismatch"
    title = "KL coefficient not scaled to the model size"
    default_severity = "info"

    def __init__(self, small_b: float = 3.0, large_b: float = 30.0) -> None:
        self.small_b = small_b
        self.large_b = large_b

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.kl_coef_scale_mismatch(view, self.small_b, self.large_b)


class GpuMemoryUtilizationRisk(ConfigRule):
    """vLLM's share of GPU memory is outside the advised range for this GPU count and model.

    What it detects:
        `rollout.gpu_memory_utilization` above 0.7 (error; warning when the actor's parameters
        and optimizer state are offloaded), above the advised range (warning), or below it
        (info). Range: 0.5–0.65 for models ≤ 1.5B (PPO article), 0.4–0.5
        on one GPU, 0.3–0.4 with 8-GPU FSDP (GRPO article), 0.4–0.5 for 2–7 GPUs.

    Why it matters:
        vLLM pre-allocates this share for its KV cache; the rest must hold FSDP's model,
        gradients, optimizer state and NCCL buffers. Too high: OOM, `NCCL operation failed`,
        CPU-offload fallback 3–5× slower, inf/nan loss. Too low on a small model: slow rollout
        (0.4 → 0.65 cut timing_s/gen 5.72 → 3.21 s).

    Example:
        `actor_rollout_ref.rollout.gpu_memory_utilization=0.9` with `trainer.n_gpus_per_node=8`
        → error, advised range 0.3–0.4, suggest 0.4.

    Advice:
        The upper end of the advised range.

    Known false positives:
        80 GB GPUs, offloaded actors, or a separate rollout pool leave more room than the
        articles assume. verl's own default (0.5) is above the 8-GPU range.

    References:
        seed:grpo-pitfalls §4; seed:ppo-tuning §2.1.
    """

    code = "LS509"
    name = "gpu-memory-utilization-risk"
    title = "Rollout gpu_memory_utilization outside the advised range"

    def __init__(self, oom_above: float = 0.7) -> None:
        self.oom_above = oom_above

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.gpu_memory_utilization_risk(view, self.oom_above)


class ShuffleMismatch(ConfigRule):
    """`data.shuffle` and `actor.shuffle` differ.

    What it detects:
        `data.shuffle != actor_rollout_ref.actor.shuffle`. Warning when the user
        set one of them, info when the mismatch is verl's defaults (True/False).

    Why it matters:
        The GRPO article says a mismatch misaligns prompts and responses between rollout and
        training.

    Example:
        `data.shuffle=True actor_rollout_ref.actor.shuffle=False` → suggest
        `actor_rollout_ref.actor.shuffle=true`.

    Advice:
        Make `actor.shuffle` equal `data.shuffle`.

    Known false positives:
        By verl's mechanics `actor.shuffle` only reorders samples inside an update, and verl's
        defaults differ, so most runs are fine; this is the GRPO article's advice.

    References:
        seed:grpo-pitfalls §5.
    """

    code = "LS510"
    name = "shuffle-mismatch"
    title = "data.shuffle and actor.shuffle differ"
    default_severity = "info"

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.shuffle_mismatch(view)


class SeedUnset(ConfigRule):
    """No explicit seed is set.

    What it detects:
        Neither `data.seed` nor `trainer.seed` set.

    Why it matters:
        The GRPO article asks for a fixed, recorded seed so runs can be compared. verl seeds its
        data sampler with 1 when `data.seed` is absent, so the data order is repeatable anyway.

    Example:
        A command without `data.seed` → suggest `++data.seed=42`.

    Advice:
        `++data.seed=42` (`++` adds the key whether or not the verl version declares it).

    Known false positives:
        Most runs: verl's sampler default makes the data order repeatable; hence info.

    References:
        seed:grpo-pitfalls §5.1; verl:trainer/main_ppo.py (create_rl_sampler).
    """

    code = "LS511"
    name = "seed-unset"
    title = "No explicit seed"
    default_severity = "info"

    def __init__(self, seed: int = 42) -> None:
        self.seed = seed

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.seed_unset(view, self.seed)


class ResponseLengthMismatch(ConfigRule):
    """The rollout's response length differs from the data's.

    What it detects:
        `actor_rollout_ref.rollout.response_length != data.max_response_length`. In
        verl the first follows the second unless overridden by hand.

    Why it matters:
        Rollout longer than the data: generated tokens beyond the data's length are computed
        and thrown away. Shorter: responses are cut (response_length/clip_ratio rises).

    Example:
        `actor_rollout_ref.rollout.response_length=256 data.max_response_length=200`: up to 56
        tokens per response wasted (the PPO article says 64, an arithmetic slip) → suggest
        `data.max_response_length=256`, as the PPO article did.

    Advice:
        Make the two equal: raise the smaller one, or drop the hand override.

    Known false positives:
        None known.

    References:
        seed:ppo-tuning §5.2.
    """

    code = "LS512"
    name = "response-length-mismatch"
    title = "rollout.response_length differs from data.max_response_length"

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.response_length_mismatch(view)


class RolloutBatchingMismatch(ConfigRule):
    """vLLM's batching limits (`max_num_batched_tokens`, `max_num_seqs`) do not fit together.

    What it detects:
        Before a run: `max_num_batched_tokens < max_num_seqs` (vLLM refuses) and
        `max_num_batched_tokens < max_prompt_length + max_response_length` with chunked prefill
        on (verl refuses). On a command or YAML: only one of the two moved away from verl's
        default (info: change them together). For models ≤ 1.5B at verl's defaults (8192/1024): info with the PPO
        article's tuned pair 16384/1896.

    Why it matters:
        The two set vLLM's per-iteration token budget and concurrency; the PPO article measured
        +22% throughput and response_length/clip_ratio 0.012 → 0.003 from raising both.

    Example:
        Qwen2.5-0.5B with the defaults → info, suggest `max_num_batched_tokens=16384
        max_num_seqs=1896`; `max_num_seqs=1896` alone → info, suggest
        `max_num_batched_tokens=15168`.

    Advice:
        Change both, keeping the tokens-per-sequence ratio; satisfy vLLM's and verl's limits.

    Known false positives:
        The PPO article's stated reason (ratio near the mean sequence length, ≈ 239 on GSM8K)
        does not match its own numbers (8 → 8.6); the info is a measured recipe for small
        models, not a derived bound.

    References:
        seed:ppo-tuning §2.2; verl:workers/rollout/vllm_rollout; vllm:config.py
        (SchedulerConfig).
    """

    code = "LS513"
    name = "rollout-batching-mismatch"
    title = "Rollout batching limits do not fit together"

    def __init__(self, small_model_b: float = 1.5) -> None:
        self.small_model_b = small_model_b

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.rollout_batching_mismatch(view, self.small_model_b)


class LogProbMicroBatch(ConfigRule):
    """The log-prob micro batch is unset, small, or large.

    What it detects:
        `rollout.log_prob_micro_batch_size_per_gpu` (and the reference model's, when a KL
        term uses it) unset before a run without dynamic batch size (error: verl refuses),
        below 16 (info) or above 20 (info).

    Why it matters:
        The PPO article measured 16 faster than 8 (perf/throughput 1176 → 1320 tokens/s) and
        padding overhead above 20.

    Example:
        `actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8` → suggest 16.

    Advice:
        16; if `perf/max_memory_allocated_gb` rises more than 10%, lower
        `rollout.gpu_memory_utilization`.

    Known false positives:
        The measurement is from one setup (Qwen2.5-0.5B, GSM8K, A100); long sequences may need
        smaller values.

    References:
        seed:ppo-tuning §2.3; verl:utils/config.py.
    """

    code = "LS514"
    name = "log-prob-micro-batch"
    title = "Log-prob micro batch off the measured best"
    default_severity = "info"

    def __init__(self, best: int = 16, padding_above: int = 20) -> None:
        self.best = best
        self.padding_above = padding_above

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.log_prob_micro_batch(view, self.best, self.padding_above)


class KlCoefChangedMidrun(ConfigRule):
    """The KL coefficient changed between two config dumps of one log (a restart).

    What it detects:
        Consecutive config segments of a log with a different `actor.kl_loss_coef` or
        `algorithm.kl_ctrl.kl_coef`; the finding is at the restart step (the later
        segment's first step). Warning when the coefficient is in use, info otherwise. The
        evidence lists other keys that changed at the same restart.

    Why it matters:
        The GRPO article: changing the KL penalty mid-run breaks gradient consistency and produces a
        sawtooth reward curve; lock it after calibration.

    Example:
        A log restarted from a checkpoint at step 120 with `kl_loss_coef` 0.001 → 0.002:
        warning at step 120, suggest setting it back to 0.001.

    Advice:
        Keep the coefficient of the first segment for the whole run (or start a new run).

    Known false positives:
        A deliberate schedule; logs that concatenate unrelated runs.

    References:
        seed:grpo-pitfalls §3.3.
    """

    code = "LS515"
    name = "kl-coef-changed-midrun"
    title = "KL coefficient changed mid-run"

    def check(self, view: ConfigView) -> list[Hit]:
        return []

    def detect(self, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        segments = views(run)
        for (_, before), (step, after), seg in zip(
            segments, segments[1:], run.config_segments[1:], strict=False
        ):
            restart = step if step is not None else seg.first_step
            for key, old, new, active in rules.kl_coef_changes(before, after):
                others = [k for k in rules.changed_keys(before.config, after.config) if k != key]
                short = key.rsplit(".", 1)[-1]
                message = (
                    f"{key} changed from {rules.fmt(old)} to {rules.fmt(new)} at the restart at "
                    f"step {restart}: the GRPO article warns this breaks gradient "
                    f"consistency and gives a sawtooth reward curve."
                )
                if not active:
                    message += " (The coefficient is not in use in this config.)"
                advice = after.advice(
                    key,
                    old,
                    f"Keep {short} at the first segment's value for the whole run; calibrate "
                    f"early, then lock it.",
                    cite(f"{rules.SEED_GRPO} §3.3"),
                )
                findings.append(
                    self.finding(
                        severity="warning" if active else "info",
                        message=message,
                        step=restart,
                        evidence={
                            "parameter": key,
                            "before": old,
                            "after": new,
                            "restart_step": restart,
                            "other_changed_keys": others,
                        },
                        advice=[advice],
                        references=cite_all([f"{rules.SEED_GRPO} §3.3"]),
                    )
                )
        return findings


class NormalizedMiniBatchMismatch(ConfigRule):
    """Each GPU's share of a mini-batch is not a whole number of micro batches.

    What it detects:
        Before a run without dynamic batch size: verl's worker normalisation
        `ppo_mini_batch_size × rollout.n ÷ (n_gpus ÷ ulysses_sequence_parallel_size)` is 0, or
        is not a multiple of `actor.ppo_micro_batch_size_per_gpu`. Error when `--verl-version`
        is 0.3–0.7 (whose workers assert it), warning otherwise.

    Why it matters:
        verl 0.3–0.7 stops at worker start-up with `normalized ppo_mini_batch_size A should be
        divisible by ppo_micro_batch_size_per_gpu B` (or `should be larger than 0 after
        normalization`), after the cluster and models have been set up.

    Example:
        `ppo_mini_batch_size=256 rollout.n=5 ppo_micro_batch_size_per_gpu=64` on 8 GPUs:
        256 × 5 ÷ 8 = 160, and 160 % 64 = 32 → suggest a micro batch of 40.

    Advice:
        The largest divisor of the normalized mini batch at or below the current micro batch,
        a multiple of the rollout TP size where one divides (or a mini batch that makes the
        division exact). When the normalized mini batch is 0: the smallest mini batch dividing
        the train batch that gives every GPU a sample.

    Known false positives:
        verl 0.8+ engines pass the global mini batch on and may not assert this; hence a
        warning unless the version is known to check it.

    References:
        verl:workers/fsdp_workers.py (the check, verl 0.3–0.7).
    """

    code = "LS516"
    name = "normalized-mini-batch-mismatch"
    title = "Mini batch per GPU not a multiple of the micro batch"

    def check(self, view: ConfigView) -> list[Hit]:
        return rules.normalized_mini_batch_mismatch(view)
