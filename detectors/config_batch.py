"""Config rules on batch sizes: micro batch (OOM risk, TP multiple, per-GPU division), GRPO's
group size, and how the train batch divides (LS501–LS506, LS516; tuning_knowledge.md §A1–A7
and verl's start-up checks).
"""

from __future__ import annotations

import math
from typing import Any

from logscope import verl_config, verl_version
from logscope.advice import SEED_GRPO, SEED_PPO
from logscope.config_view import ConfigView, Hit, fmt
from logscope.detector import param
from logscope.model import Advice, Severity
from logscope.verl_config import ACT, GOLDEN_BUDGET_TOKENS, RO, divisor_at_most, divisors
from logscope.words import plural

from .config_lint import (
    DYNAMIC,
    ESTIMATOR,
    MINI,
    SRC_CONFIG,
    ConfigRule,
    RiskRule,
    both_set,
    is_grpo,
    seq_len,
)

TBS = "data.train_batch_size"
MICRO = f"{ACT}.ppo_micro_batch_size_per_gpu"
LEGACY_MICRO = f"{ACT}.ppo_micro_batch_size"
SP = f"{ACT}.ulysses_sequence_parallel_size"
TP = f"{RO}.tensor_model_parallel_size"
N = f"{RO}.n"

RULE_TOKENS = "above 12,000 tokens per GPU per micro-step"
RULE_GOLDEN = "above the golden formula floor(24·1024 / (prompt + response))"


def _round_to_multiple(value: int, unit: int) -> int:
    """`value` rounded down to a multiple of `unit` (at least `unit`)."""
    if unit <= 1:
        return max(1, value)
    return max(unit, value // unit * unit)


def _actor_micro(v: ConfigView) -> tuple[int | None, str]:
    """The actor's per-GPU micro batch, and the key it came from (legacy global key ÷ GPUs)."""
    micro = v.int_(MICRO)
    if micro is not None:
        return micro, MICRO
    legacy, gpus = v.int_(LEGACY_MICRO), v.n_gpus()
    if legacy is not None and gpus:
        return max(1, legacy // gpus), LEGACY_MICRO
    return None, MICRO


def normalized_mini(v: ConfigView) -> int | None:
    """verl's per-GPU mini-batch `ppo_mini_batch_size × n ÷ (GPUs ÷ SP)`, when verl checks it
    (before a run, without dynamic batch size); None otherwise."""
    if not v.preflight or v.flag(DYNAMIC):
        return None
    mini, gpus = v.int_(MINI), v.n_gpus()
    n = v.int_(N) or 1
    sp = v.int_(SP) or 1
    if mini is None or not gpus or sp <= 0 or gpus < sp:
        return None
    return mini * n // (gpus // sp)


def best_micro(v: ConfigView, limit: int) -> int:
    """The largest micro batch ≤ `limit` that divides verl's per-GPU mini-batch (when verl
    checks it), preferring multiples of the rollout TP size: the one value that satisfies the
    micro-batch rules together where one exists."""
    limit = max(1, limit)
    tp = max(1, v.int_(TP) or 1)
    normalized = normalized_mini(v)
    if not normalized or normalized <= 0:
        return _round_to_multiple(limit, tp) if limit >= tp else limit
    fitting = [d for d in divisors(normalized) if d <= limit]
    return max([d for d in fitting if d % tp == 0] or fitting)


def _golden_bound(v: ConfigView) -> int | None:
    """The golden formula's value when the OOM rule applies (sequence length known)."""
    _, _, length = seq_len(v)
    if length is None or v.flag(DYNAMIC):
        return None
    return max(1, GOLDEN_BUDGET_TOKENS // length)


def _micro_advice(v: ConfigView, key: str, per_gpu: int, rationale: str, source: str) -> Advice:
    """Advice on the actor's per-GPU micro batch (also when the user set the legacy global key:
    verl then asks to remove that one, which the next round of `--fix` does)."""
    return v.advice(MICRO if key == LEGACY_MICRO else key, per_gpu, rationale, source)


def _batch_for(tbs: int, n: int, gpus: int) -> int:
    """The largest train_batch_size ≤ tbs that is a multiple of n with tbs·n divisible by gpus.

    tbs·n divisible by gpus ⇔ tbs divisible by gpus / gcd(n, gpus); so tbs is a multiple of
    lcm(n, gpus / gcd(n, gpus)). The smallest such multiple when none is ≤ tbs.
    """
    n, gpus = max(1, n), max(1, gpus)
    step = math.lcm(n, gpus // math.gcd(n, gpus))
    return max(step, tbs // step * step)


def mini_for(v: ConfigView, tbs: int, limit: int) -> int:
    """The largest divisor of `tbs` ≤ limit that leaves verl's per-GPU mini-batch above 0 (when
    verl checks it); else the smallest divisor that does; else the largest divisor ≤ limit."""
    floor = 1
    gpus, n = v.n_gpus(), v.int_(N) or 1
    sp = v.int_(SP) or 1
    if v.preflight and not v.flag(DYNAMIC) and gpus and sp > 0 and gpus >= sp:
        floor = -(-(gpus // sp) // max(1, n))
    fitting = [d for d in divisors(max(1, tbs)) if d >= floor]
    below = [d for d in fitting if d <= limit]
    if below:
        return max(below)
    return min(fitting) if fitting else divisor_at_most(tbs, limit)


# tuning_knowledge.md §A1–A3
class MicroBatchOomRisk(RiskRule, code="LS501", name="micro-batch-oom-risk"):
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
        On a log whose config got through `survived_steps` training steps with no error line, the
        predicted failure was not observed and the finding is info.

    References:
        seed:grpo-pitfalls §1.1–1.3 (golden formula, 12,000-token limit, memory estimate).
    """

    title = "Actor micro batch risks GPU OOM"
    default_severity = "error"

    token_limit: int = param(12_000, ge=1)
    budget_tokens: int = param(GOLDEN_BUDGET_TOKENS, ge=1)
    memory_factor: float = param(2.5, gt=0)

    def check(self, v: ConfigView) -> list[Hit]:
        if v.flag(DYNAMIC):
            return []
        micro, key = _actor_micro(v)
        prompt, response, length = seq_len(v)
        if micro is None and v.preflight and verl_config.get(v.config, LEGACY_MICRO) is None:
            return [self._micro_unset(v, length)]
        if v.preflight and v.int_(MICRO) is not None and v.int_(LEGACY_MICRO) is not None:
            return [both_set(v, LEGACY_MICRO, MICRO)]
        if micro is None or length is None:
            return []
        tokens = micro * length
        if tokens <= self.token_limit:
            return []
        golden = max(1, self.budget_tokens // length)
        size, hidden = v.model_size(), verl_config.hidden_size(v.config)
        model = f" for a {size:g}B model" if size is not None else ""
        product = (
            f"{fmt(micro)} × ({prompt} + {response}) = {fmt(tokens)} tokens per GPU per micro-step"
        )
        limit = f"the {fmt(self.token_limit)}-token limit"
        formula = f"the golden formula floor(24·1024 / {length}) = {golden}"
        source = f"{SEED_GRPO} §1.2–1.3"
        evidence: dict[str, Any] = {
            "ppo_micro_batch_size_per_gpu": micro,
            "max_prompt_length": prompt,
            "max_response_length": response,
            "tokens_per_micro_step": tokens,
            "token_limit": self.token_limit,
            "golden_micro_batch": golden,
        }
        if size is not None:
            evidence["model_size_b"] = size
        if micro <= golden:
            evidence["rules_fired"] = [RULE_TOKENS]
            message = (
                f"Actor micro batch {micro}{model}: {product} is above {limit} but within "
                f"{formula}, the value logscope suggests ({source}); the two heuristics disagree "
                "for sequences this long. If the first update runs out of GPU memory, lower the "
                "micro batch (gradient accumulation keeps ppo_mini_batch_size) or set "
                f"{DYNAMIC}=True."
            )
            return [Hit("info", message, evidence, [], [f"{SEED_GRPO} §1.1–1.3"])]
        suggested = best_micro(v, golden)
        evidence["rules_fired"] = [RULE_TOKENS, RULE_GOLDEN]
        evidence["suggested_micro_batch"] = suggested
        message = (
            f"Actor micro batch {micro}{model} risks GPU OOM in the PPO update: {product}, above "
            f"{limit} and above {formula} ({source}). Suggested: "
            f"{suggested}{self._lowered(v, golden, suggested)}."
        )
        if suggested * length > self.token_limit:
            message += (
                f" ({suggested} × {length} = {fmt(suggested * length)} tokens is still above "
                f"{fmt(self.token_limit)}: the two heuristics disagree for sequences this long; "
                "for 512 + 1024 tokens the GRPO article recommends 8–16.)"
            )
        if hidden is not None:
            estimate = micro * length * hidden * self.memory_factor
            evidence["hidden_size"] = hidden
            evidence["memory_estimate"] = estimate
            evidence["memory_estimate_at_suggested"] = (
                suggested * length * hidden * self.memory_factor
            )
            message += (
                " The same article's memory estimate (§1.1) micro × tokens × hidden_size × 2.5 = "
                f"{fmt(micro)} × {length} × {hidden} × 2.5 ≈ {estimate:.3g}, "
                f"{micro / suggested:.1f}× less at {suggested}."
            )
        advice = _micro_advice(
            v,
            key,
            suggested,
            "Tokens per GPU per micro-step decide activation memory in the update; the golden "
            "formula floor(24·1024 / (prompt + response)) keeps them within a 24 GB budget "
            "(A100-40G, H100-80G). The GRPO article's case (7B, 512 + 1024, micro 64) peaks above "
            "38 GB on an A100-40G.",
            f"{SEED_GRPO} §1.2",
        )
        return [
            Hit(
                "error",
                message,
                evidence,
                [advice],
                [f"{SEED_GRPO} §1.1–1.3"],
                predicts="a CUDA OOM in the update",
            )
        ]

    @staticmethod
    def _lowered(v: ConfigView, golden: int, suggested: int) -> str:
        """Why the suggestion is below the golden value (TP multiple, verl's per-GPU division)."""
        if suggested == golden:
            return ""
        reasons = []
        tp = v.int_(TP) or 1
        if tp > 1 and suggested % tp == 0:
            reasons.append(f"a multiple of the rollout TP size {tp}")
        normalized = normalized_mini(v)
        if normalized:
            reasons.append(f"a divisor of each GPU's mini-batch of {plural(normalized, 'sample')}")
        return f" (the largest value ≤ {golden} that is {' and '.join(reasons)})" if reasons else ""

    def _micro_unset(self, v: ConfigView, length: int | None) -> Hit:
        golden = best_micro(v, max(1, self.budget_tokens // length) if length else 8)
        return Hit(
            "error",
            f"{MICRO} is not set (nor ppo_micro_batch_size, nor use_dynamic_bsz): verl refuses to "
            "start (`[actor_rollout_ref.actor] Please set at least one of ... "
            "ppo_micro_batch_size or ... ppo_micro_batch_size_per_gpu`).",
            {"parameter": MICRO},
            [
                v.advice(
                    MICRO,
                    golden,
                    f"The golden formula floor(24·1024 / (prompt + response)) = {golden}.",
                    f"{SEED_GRPO} §1.2",
                )
            ],
            [SRC_CONFIG],
            title="Actor micro batch not set",
        )


# tuning_knowledge.md §A4
class MicroBatchTpMismatch(RiskRule, code="LS502", name="micro-batch-tp-mismatch"):
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
        On a log whose config got through `survived_steps` training steps with no error line, the
        predicted failure was not observed and the finding is info.

    References:
        seed:grpo-pitfalls §1.2.
    """

    title = "Actor micro batch not a multiple of the TP size"

    def check(self, v: ConfigView) -> list[Hit]:
        if v.flag(DYNAMIC):
            return []  # the micro batch is not used
        micro, key = _actor_micro(v)
        tp = v.int_(TP)
        if micro is None or tp is None or tp <= 1 or micro % tp == 0:
            return []
        suggested = self._tp_multiple(v, micro, tp)
        message = (
            f"Actor micro batch {micro} is not a multiple of rollout.tensor_model_parallel_size "
            f"{tp} ({micro} % {tp} = {micro % tp}). The GRPO article reports vLLM tensor-split "
            "errors (`Expected all tensors to be on the same device`) for this; verl itself does "
            "not check it."
        )
        advice = []
        if suggested is None:
            message += (
                f" No multiple of {tp} also fits the other micro-batch rules here (a divisor of "
                f"each GPU's mini-batch of {plural(normalized_mini(v) or 0, 'sample')}, within the "
                "golden formula); change ppo_mini_batch_size or the TP size instead."
            )
        else:
            where = "at or below" if suggested < micro else "just above"
            advice.append(
                _micro_advice(
                    v,
                    key,
                    suggested,
                    f"The multiple of the TP size ({tp}) {where} the current value that still "
                    "divides each GPU's mini-batch and stays within the golden formula.",
                    f"{SEED_GRPO} §1.2",
                )
            )
        return [
            Hit(
                "warning",
                message,
                {"ppo_micro_batch_size_per_gpu": micro, "tensor_model_parallel_size": tp},
                advice,
                [f"{SEED_GRPO} §1.2"],
                predicts="a tensor-split error in rollout",
            )
        ]

    @staticmethod
    def _tp_multiple(v: ConfigView, micro: int, tp: int) -> int | None:
        """The largest multiple of `tp` ≤ micro that fits the other micro-batch rules, else the
        smallest one above it; None when none fits."""
        golden = _golden_bound(v)
        normalized = normalized_mini(v)
        ceiling = max(micro, tp) if golden is None else golden
        if normalized and normalized > 0:
            fitting = [d for d in divisors(normalized) if d % tp == 0 and d <= ceiling]
        else:
            top = min(micro, ceiling)
            fitting = [m for m in (top // tp * tp, tp) if 0 < m <= ceiling]
        below = [m for m in fitting if m <= micro]
        if below:
            return max(below)
        return min(fitting) if fitting else None


# tuning_knowledge.md §A5
class GrpoGroupSize(RiskRule, code="LS503", name="grpo-group-size"):
    """GRPO's group size (`rollout.n`) is degenerate, too small, odd or costly.

    What it detects:
        With `algorithm.adv_estimator` grpo (or grpo_passk, grpo_vectorized, gdpo):
        `rollout.n=1` (error: each group has one sample), n below 4 (warning), odd n (info),
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
        Large n can be deliberate (pass@k estimators, research on group size). On a log whose
        config got through `survived_steps` training steps with no error line, the predicted hang
        was not observed and the finding for a costly n is info.

    References:
        seed:grpo-pitfalls §2.1–2.2; verl:trainer/ppo/core_algos.py.
    """

    title = "GRPO group size (rollout.n) out of the safe range"

    minimum: int = param(4, ge=1)
    costly: int = param(16, ge=1)

    def check(self, v: ConfigView) -> list[Hit]:
        if not is_grpo(v):
            return []
        estimator = v.get(ESTIMATOR)
        n = v.int_(N)
        if n is None:
            return []
        evidence: dict[str, Any] = {"adv_estimator": estimator, "rollout_n": n}
        predicts = None
        if n <= 1:
            severity: Severity = "error"
            why = (
                f"rollout.n={n} with adv_estimator={estimator}: each group has one sample, so "
                "verl's GRPO advantage is the raw score (group mean 0, std 1). verl does not "
                "check this; the run trains as a baseline-free policy gradient with large reward "
                "variance."
            )
            suggested = self.minimum
        elif n < self.minimum:
            severity = "warning"
            why = (
                f"rollout.n={n}: too few samples per prompt for a stable group baseline (the GRPO "
                "article: ranking statistics unreliable, KL estimate noisy); it asks for n ≥ "
                f"{self.minimum}, even."
            )
            suggested = self.minimum
        elif n >= self.costly:
            severity = "warning"
            why = (
                f"rollout.n={n}: costly for little gain — the GRPO article measures +47% step time "
                "at n=16 (reward std 0.09 vs 0.11 at n=8) and reports vLLM engine hangs in "
                "rollout."
            )
            suggested = 8
            predicts = "a rollout hang"
        elif n % 2:
            # verl's own GRPO examples run n=5: odd n is a preference the article states without
            # a measured cost, so it is a note, not a warning
            severity = "info"
            why = (
                f"rollout.n={n} is odd; the GRPO article asks for an even n ≥ {self.minimum} "
                "(4 or 8), though it measures no cost of odd n (verl's own GRPO examples use n=5)."
            )
            suggested = 4 if n < 6 else 8
        else:
            return []
        advice = v.advice(
            N,
            suggested,
            "The GRPO article recommends n=4 on a tight budget and n=8 for reasoning tasks "
            "(GSM8K, Qwen2-7B: n=4 reward std 0.18 / 1200 steps to converge; n=8 std 0.11 / 950 "
            "steps).",
            f"{SEED_GRPO} §2.2",
        )
        extra = []
        tbs = v.int_(TBS)
        if tbs is not None and tbs % suggested:
            extra.append(
                v.advice(
                    TBS,
                    _batch_for(tbs, suggested, v.n_gpus() or 1),
                    f"Keep data.train_batch_size a multiple of rollout.n={suggested}.",
                    f"{SEED_GRPO} §2.3",
                )
            )
        refs = [f"{SEED_GRPO} §2.1–2.2"]
        return [Hit(severity, why, evidence, [advice, *extra], refs, predicts=predicts)]


# tuning_knowledge.md §A6
class BatchNotDivisibleByN(RiskRule, code="LS504", name="batch-not-divisible-by-n"):
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
        accepts a train batch that is not a multiple of n when the product divides; on a log whose
        config got through `survived_steps` training steps with no error line, that warning is
        info.

    References:
        seed:grpo-pitfalls §2.3; verl:utils/config.py; verl:trainer/ppo/ray_trainer.py.
    """

    title = "Train batch not a multiple of rollout.n"

    def check(self, v: ConfigView) -> list[Hit]:
        tbs, n, gpus = v.int_(TBS), v.int_(N), v.n_gpus()
        if tbs is None or n is None or n < 1:
            return []
        hits = []
        suggested = _batch_for(tbs, n, gpus or 1)
        strategy = str(v.get(f"{ACT}.strategy") or "fsdp")
        if v.preflight and gpus and not v.flag(DYNAMIC) and strategy.startswith("fsdp"):
            real = tbs * n
            if real % gpus:
                hits.append(
                    Hit(
                        "error",
                        "verl will refuse to start: real_train_batch_size = train_batch_size × "
                        f"rollout.n = {tbs} × {n} = {real} is not divisible by the "
                        f"{self._gpus_phrase(v, gpus)} (verl: `real_train_batch_size ({real}) must "
                        f"be divisible by minimal possible batch size ({gpus})`).",
                        {
                            "train_batch_size": tbs,
                            "rollout_n": n,
                            "real_train_batch_size": real,
                            "n_gpus": gpus,
                        },
                        [
                            v.advice(
                                TBS,
                                suggested,
                                f"The largest train batch at or below {tbs} (or the smallest "
                                f"above, when none is) that is a multiple of n={n} and whose × n "
                                f"divides by {plural(gpus, 'GPU')}.",
                                SRC_CONFIG,
                            )
                        ],
                        [SRC_CONFIG, "verl:trainer/ppo/ray_trainer.py"],
                        title="Train batch × n not divisible by the GPU count",
                    )
                )
        if n > 1 and tbs % n:
            hits.append(
                Hit(
                    "warning",
                    f"data.train_batch_size {tbs} is not a multiple of rollout.n {n} ({tbs} % {n} "
                    f"= {tbs % n}). The GRPO article asks for train_batch_size % n == 0 (its error "
                    "text `batch_size must be divisible by n` is not verl's; verl checks "
                    "train_batch_size × n against the GPU count).",
                    {"train_batch_size": tbs, "rollout_n": n, "remainder": tbs % n},
                    [
                        v.advice(
                            TBS,
                            suggested,
                            f"A multiple of n={n} at or below {tbs} whose × n also divides by "
                            f"{plural(gpus or 1, 'GPU')}.",
                            f"{SEED_GRPO} §2.3",
                        )
                    ],
                    [f"{SEED_GRPO} §2.3"],
                    predicts="a batch-size error",
                )
            )
        return hits

    @staticmethod
    def _gpus_phrase(v: ConfigView, gpus: int) -> str:
        """`8 GPUs`, saying so when the count is verl's default because the user did not set it."""
        text = plural(gpus, "GPU")
        per_node, nodes = "trainer.n_gpus_per_node", "trainer.nnodes"
        if v.explicit is None or v.is_set(per_node):
            return text
        default = f"verl's default {per_node}={fmt(v.get(per_node))}"
        if v.is_set(nodes):
            return f"{text} ({nodes}={fmt(v.get(nodes))} × {default}, which you did not set)"
        return f"{text} ({default} × {nodes}={fmt(v.get(nodes))}; you did not set them)"


# tuning_knowledge.md §A7
class MiniBatchNotDivisor(ConfigRule, code="LS505", name="mini-batch-not-divisor"):
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

    title = "PPO mini batch does not divide the train batch"

    def check(self, v: ConfigView) -> list[Hit]:
        tbs, mini = v.int_(TBS), v.int_(MINI)
        if tbs is None or mini is None or mini <= 0 or tbs < mini or tbs % mini == 0:
            return []
        rem = tbs % mini
        used = (tbs - rem) / tbs
        suggested = mini_for(v, tbs, mini)
        full = tbs // mini
        message = (
            f"data.train_batch_size {tbs} is not a multiple of actor.ppo_mini_batch_size {mini}: "
            f"{plural(full, 'full mini-batch', 'full mini-batches')} use{'s' if full == 1 else ''} "
            f"{tbs - rem} of {tbs} prompts per step ({used:.1%}); the remaining {rem} "
            f"({rem / tbs:.1%}) form a short mini-batch that the PPO article reports as dropped "
            "(it measured 92% → 99.7% data use after fixing). verl checks only train_batch_size ≥ "
            "ppo_mini_batch_size."
        )
        advice = v.advice(
            MINI,
            suggested,
            f"The largest divisor of {tbs} at or below {mini} (that still gives each GPU a "
            "sample), so every step splits into equal mini-batches (or make train_batch_size a "
            f"multiple of {mini}).",
            f"{SEED_PPO} §5.1",
        )
        evidence = {
            "train_batch_size": tbs,
            "ppo_mini_batch_size": mini,
            "remainder": rem,
            "data_used_share": used,
            "data_dropped_share": rem / tbs,
        }
        return [Hit("warning", message, evidence, [advice], [f"{SEED_PPO} §5.1"])]


# verl's own check
class MiniBatchLargerThanBatch(ConfigRule, code="LS506", name="mini-batch-larger-than-batch"):
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

    title = "PPO mini batch larger than the train batch"
    default_severity = "error"

    def check(self, v: ConfigView) -> list[Hit]:
        tbs, mini = v.int_(TBS), v.int_(MINI)
        if tbs is None or mini is None or tbs >= mini or v.flag(DYNAMIC):
            return []  # verl checks this only without dynamic batch size
        message = (
            f"actor.ppo_mini_batch_size {mini} is larger than data.train_batch_size {tbs}: verl "
            f"refuses this (0.6+: `train_batch_size ({tbs}) must be >= actor.ppo_mini_batch_size "
            f"({mini})`; 0.3–0.5: a bare AssertionError in _validate_config)."
        )
        advice = v.advice(MINI, tbs, "At most the train batch (one update per step).", SRC_CONFIG)
        return [
            Hit(
                "error",
                message,
                {"train_batch_size": tbs, "ppo_mini_batch_size": mini},
                [advice],
                [
                    "verl:workers/config/actor.py (ActorConfig.validate)",
                    "verl:trainer/ppo/ray_trainer.py",
                ],
            )
        ]


# verl's own check
class NormalizedMiniBatchMismatch(ConfigRule, code="LS516", name="normalized-mini-batch-mismatch"):
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

    title = "Mini batch per GPU not a multiple of the micro batch"

    def check(self, v: ConfigView) -> list[Hit]:
        normalized = normalized_mini(v)
        mini, micro, gpus = v.int_(MINI), v.int_(MICRO), v.n_gpus()
        if normalized is None or mini is None or micro is None or not gpus or micro <= 0:
            return []
        n = v.int_(N) or 1
        sp = v.int_(SP) or 1
        dp = gpus // sp
        legacy = verl_version.at_least(v.version, "0.3") and verl_version.older_than(
            v.version, "0.8"
        )
        severity: Severity = "error" if legacy else "warning"
        where = (
            "verl 0.3–0.7 refuses to start"
            if legacy
            else "verl 0.3–0.7 workers refuse to start (newer engines may accept it)"
        )
        evidence = {
            "ppo_mini_batch_size": mini,
            "rollout_n": n,
            "data_parallel_size": dp,
            "normalized_mini_batch": normalized,
            "ppo_micro_batch_size_per_gpu": micro,
        }
        refs = ["verl:workers/fsdp_workers.py"]
        ranks = plural(dp, "data-parallel rank")
        if normalized <= 0:
            tbs = v.int_(TBS)
            message = (
                f"ppo_mini_batch_size {mini} × n {n} ÷ {ranks} = {normalized}: {where} "
                f"(`ppo_mini_batch_size {normalized} should be larger than 0 after normalization`)."
            )
            advice = []
            if tbs is None or tbs * n >= dp:
                least = -(-dp // n)
                suggested = mini_for(v, tbs, least) if tbs is not None else least
                advice.append(
                    v.advice(MINI, suggested, f"At least {dp} ÷ n prompts per mini-batch.", refs[0])
                )
            else:
                message += f" Even the whole train batch ({tbs} × n {n}) is below {ranks}."
            return [Hit(severity, message, evidence, advice, refs)]
        if normalized % micro == 0:
            return []
        suggested = best_micro(v, micro)
        return [
            Hit(
                severity,
                f"Each GPU's mini-batch is ppo_mini_batch_size {mini} × n {n} ÷ {ranks} = "
                f"{plural(normalized, 'sample')}, which micro batches of {micro} do not divide: "
                f"{where} (`normalized ppo_mini_batch_size {normalized} should be divisible by "
                f"ppo_micro_batch_size_per_gpu {micro}`).",
                evidence,
                [
                    v.advice(
                        MICRO,
                        suggested,
                        f"The largest divisor of {normalized} at or below {micro} (a multiple of "
                        "the rollout TP size where one divides).",
                        refs[0],
                    )
                ],
                refs,
            )
        ]
