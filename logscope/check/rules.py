"""The config rules (tuning_knowledge.md §A and verl's own start-up checks, verl_formats.md §6).

Each rule is a function of a `ConfigView` returning `Hit`s (severity, message, evidence, advice).
`logscope.detectors.config_lint` wraps each one in a Detector (code, name, catalogue docstring),
which is what both `logscope check` and `logscope analyze` run. Unset keys take verl's defaults
(per version where they differ) through `verl_config.effective`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from logscope import verl_config
from logscope.advice import SEED_GRPO, SEED_PPO
from logscope.model import Advice, Severity
from logscope.verl_config import ACT, REF, RO
from logscope.words import plural

TBS = "data.train_batch_size"
PROMPT = "data.max_prompt_length"
RESPONSE = "data.max_response_length"
MICRO = f"{ACT}.ppo_micro_batch_size_per_gpu"
LEGACY_MICRO = f"{ACT}.ppo_micro_batch_size"
MINI = f"{ACT}.ppo_mini_batch_size"
DYNAMIC = f"{ACT}.use_dynamic_bsz"
TP = f"{RO}.tensor_model_parallel_size"
N = f"{RO}.n"
USE_KL_LOSS = f"{ACT}.use_kl_loss"
KL_LOSS_COEF = f"{ACT}.kl_loss_coef"
KL_IN_REWARD = "algorithm.use_kl_in_reward"
KL_CTRL_COEF = "algorithm.kl_ctrl.kl_coef"
ESTIMATOR = "algorithm.adv_estimator"
GPU_MEM = f"{RO}.gpu_memory_utilization"
MAX_TOKENS = f"{RO}.max_num_batched_tokens"
MAX_SEQS = f"{RO}.max_num_seqs"
CHUNKED_PREFILL = f"{RO}.enable_chunked_prefill"
RO_RESPONSE = f"{RO}.response_length"
RO_LOGPROB = f"{RO}.log_prob_micro_batch_size_per_gpu"
REF_LOGPROB = f"{REF}.log_prob_micro_batch_size_per_gpu"

GRPO_ESTIMATORS = frozenset({"grpo", "grpo_passk", "grpo_vectorized", "gdpo"})

SRC_CONFIG = "verl:utils/config.py"  # validate_config (0.6+); trainer/ppo/ray_trainer.py before


@dataclass
class Hit:
    """One rule violation, before it becomes a Finding (the Detector adds code/name/step)."""

    severity: Severity
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: list[Advice] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    title: str | None = None


@dataclass
class ConfigView:
    """A config as the rules read it.

    `explicit`: the dotted keys the user set (a command or YAML); None for a full config dump
    from a log, where every key is present. `preflight`: the run has not started yet, so verl's
    own start-up checks are worth repeating (on a log that ran, verl already passed them).
    """

    config: dict[str, Any]
    version: str | None = None
    explicit: frozenset[str] | None = None
    preflight: bool = True

    def get(self, key: str) -> Any:
        """The key's value; verl's default when unset on a command/YAML. A full dump from a log
        is complete, so a key absent there did not exist in that verl version: None."""
        if self.explicit is None and not verl_config.has(self.config, key):
            return None
        return verl_config.effective(self.config, key, self.version)[0]

    def num(self, key: str) -> float | None:
        return as_number(self.get(key))

    def int_(self, key: str) -> int | None:
        value = self.num(key)
        return int(value) if value is not None and value == int(value) else None

    def flag(self, key: str) -> bool:
        value = self.get(key)
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return bool(value)

    def is_set(self, key: str) -> bool:
        if self.explicit is not None:
            return key in self.explicit
        return verl_config.has(self.config, key) and verl_config.get(self.config, key) is not None

    def model_size(self) -> float | None:
        return verl_config.model_size_b(self.config)

    def n_gpus(self) -> int | None:
        return verl_config.n_gpus(self.config)

    def advice(
        self, key: str, suggested: Any, rationale: str, source: str, prefix: str = ""
    ) -> Advice:
        """Advice to set `key` to `suggested`, with a ready Hydra override."""
        current = self.get(key)
        return Advice(
            parameter=key,
            current=current,
            suggested=suggested,
            override=prefix + verl_config.override(key, suggested),
            rationale=rationale,
            source=source,
        )


def as_number(value: Any) -> float | int | None:
    """A finite number from a config value (None for strings like `$VAR`, bools, null)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    try:
        out = float(str(value))
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def fmt(value: Any) -> str:
    """A number as a user would type it (16, 0.0005, 98,304)."""
    if isinstance(value, float) and value == int(value) and abs(value) < 1e15:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _seq_len(v: ConfigView) -> tuple[int | None, int | None, int | None]:
    prompt, response = v.int_(PROMPT), v.int_(RESPONSE)
    if prompt is None or response is None or prompt + response <= 0:
        return prompt, response, None
    return prompt, response, prompt + response


def _round_to_multiple(value: int, unit: int) -> int:
    """`value` rounded down to a multiple of `unit` (at least `unit`)."""
    if unit <= 1:
        return max(1, value)
    return max(unit, value // unit * unit)


def divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of n that is ≤ limit (1 at least); O(√n)."""
    best = 1
    d = 1
    while d * d <= n:
        if n % d == 0:
            for c in (d, n // d):
                if best < c <= limit:
                    best = c
        d += 1
    return best


def _actor_micro(v: ConfigView) -> tuple[int | None, str]:
    """The actor's per-GPU micro batch, and the key it came from (legacy global key ÷ GPUs)."""
    micro = v.int_(MICRO)
    if micro is not None:
        return micro, MICRO
    legacy, gpus = v.int_(LEGACY_MICRO), v.n_gpus()
    if legacy is not None and gpus:
        return max(1, legacy // gpus), LEGACY_MICRO
    return None, MICRO


# ---- micro batch: OOM risk (A1–A3), TP multiple (A4), verl's per-GPU division -------------------

GOLDEN_BUDGET = 24 * 1024  # tokens: the golden formula's budget (seed:grpo-pitfalls §1.2)
RULE_TOKENS = "above 12,000 tokens per GPU per micro-step"
RULE_GOLDEN = "above the golden formula floor(24·1024 / (prompt + response))"


def divisors(n: int) -> list[int]:
    """The divisors of n ≥ 1, ascending; O(√n)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def normalized_mini(v: ConfigView) -> int | None:
    """verl's per-GPU mini-batch `ppo_mini_batch_size × n ÷ (GPUs ÷ SP)`, when verl checks it
    (before a run, without dynamic batch size); None otherwise."""
    if not v.preflight or v.flag(DYNAMIC):
        return None
    mini, gpus = v.int_(MINI), v.n_gpus()
    n = v.int_(N) or 1
    sp = v.int_(f"{ACT}.ulysses_sequence_parallel_size") or 1
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
    _, _, length = _seq_len(v)
    if length is None or v.flag(DYNAMIC):
        return None
    return max(1, GOLDEN_BUDGET // length)


def micro_batch_oom_risk(
    v: ConfigView,
    token_limit: int = 12_000,
    budget_tokens: int = GOLDEN_BUDGET,
    memory_factor: float = 2.5,
) -> list[Hit]:
    """Tokens per GPU per micro-step above 12,000; the golden formula's value as the suggestion.

    Error (with one suggested value) when the micro batch is above the golden formula; info
    (nothing to change) when only the 12,000-token limit is passed, so that `check` of the
    suggested value never asks for another one.
    """
    if v.flag(DYNAMIC):
        return []
    micro, key = _actor_micro(v)
    prompt, response, length = _seq_len(v)
    if micro is None and v.preflight and verl_config.get(v.config, LEGACY_MICRO) is None:
        return [_actor_micro_unset(v, length, budget_tokens)]
    if v.preflight and v.int_(MICRO) is not None and v.int_(LEGACY_MICRO) is not None:
        return [_both_set(v, LEGACY_MICRO, MICRO)]
    if micro is None or length is None:
        return []
    tokens = micro * length
    if tokens <= token_limit:
        return []
    golden = max(1, budget_tokens // length)
    size, hidden = v.model_size(), verl_config.hidden_size(v.config)
    model = f" for a {size:g}B model" if size is not None else ""
    product = (
        f"{fmt(micro)} × ({prompt} + {response}) = {fmt(tokens)} tokens per GPU per micro-step"
    )
    limit = f"the {fmt(token_limit)}-token limit"
    formula = f"the golden formula floor(24·1024 / {length}) = {golden}"
    source = f"{SEED_GRPO} §1.2–1.3"
    evidence: dict[str, Any] = {
        "ppo_micro_batch_size_per_gpu": micro,
        "max_prompt_length": prompt,
        "max_response_length": response,
        "tokens_per_micro_step": tokens,
        "token_limit": token_limit,
        "golden_micro_batch": golden,
    }
    if size is not None:
        evidence["model_size_b"] = size
    if micro <= golden:
        evidence["rules_fired"] = [RULE_TOKENS]
        message = (
            f"Actor micro batch {micro}{model}: {product} is above {limit} but within {formula}, "
            f"the value logscope suggests ({source}); the two heuristics disagree for sequences "
            f"this long. "
            f"If the first update runs out of GPU memory, lower the micro batch (gradient "
            f"accumulation keeps ppo_mini_batch_size) or set {DYNAMIC}=True."
        )
        return [Hit("info", message, evidence, [], [f"{SEED_GRPO} §1.1–1.3"])]
    suggested = best_micro(v, golden)
    evidence["rules_fired"] = [RULE_TOKENS, RULE_GOLDEN]
    evidence["suggested_micro_batch"] = suggested
    message = (
        f"Actor micro batch {micro}{model} risks GPU OOM in the PPO update: {product}, above "
        f"{limit} and above {formula} ({source}). Suggested: "
        f"{suggested}{_lowered(v, golden, suggested)}."
    )
    if suggested * length > token_limit:
        message += (
            f" ({suggested} × {length} = {fmt(suggested * length)} tokens is still above "
            f"{fmt(token_limit)}: the two heuristics disagree for sequences this long; for "
            f"512 + 1024 tokens the GRPO article recommends 8–16.)"
        )
    if hidden is not None:
        estimate = micro * length * hidden * memory_factor
        evidence["hidden_size"] = hidden
        evidence["memory_estimate"] = estimate
        evidence["memory_estimate_at_suggested"] = suggested * length * hidden * memory_factor
        message += (
            f" The same article's memory estimate (§1.1) micro × tokens × hidden_size × 2.5 = "
            f"{fmt(micro)} × {length} × {hidden} × 2.5 ≈ {estimate:.3g}, "
            f"{micro / suggested:.1f}× less at {suggested}."
        )
    advice = _micro_advice(
        v,
        key,
        suggested,
        "Tokens per GPU per micro-step decide activation memory in the update; the golden formula "
        "floor(24·1024 / (prompt + response)) keeps them within a 24 GB budget (A100-40G, "
        "H100-80G). The GRPO article's case (7B, 512 + 1024, micro 64) peaks above 38 GB on an "
        "A100-40G.",
        f"{SEED_GRPO} §1.2",
    )
    return [Hit("error", message, evidence, [advice], [f"{SEED_GRPO} §1.1–1.3"])]


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


def _micro_advice(v: ConfigView, key: str, per_gpu: int, rationale: str, source: str) -> Advice:
    """Advice on the actor's per-GPU micro batch (also when the user set the legacy global key:
    verl then asks to remove that one, which the next round of `--fix` does)."""
    return v.advice(MICRO if key == LEGACY_MICRO else key, per_gpu, rationale, source)


def _both_set(v: ConfigView, legacy: str, per_gpu: str) -> Hit:
    section = per_gpu.rsplit(".", 1)[0]
    return Hit(
        "error",
        f"Both {legacy} ({fmt(v.get(legacy))}) and {per_gpu} ({fmt(v.get(per_gpu))}) are set: "
        f"verl refuses to start (`[{section}] You have set both '{legacy}' AND '{per_gpu}'. "
        f"Please remove ...`); the global form is deprecated.",
        {legacy: v.get(legacy), per_gpu: v.get(per_gpu)},
        [
            Advice(
                legacy,
                v.get(legacy),
                None,
                f"~{legacy}",
                f"Keep only {per_gpu.rsplit('.', 1)[-1]}.",
                SRC_CONFIG,
            )
        ],
        [SRC_CONFIG],
        title="Micro batch set twice",
    )


def _actor_micro_unset(v: ConfigView, length: int | None, budget_tokens: int) -> Hit:
    golden = best_micro(v, max(1, budget_tokens // length) if length else 8)
    return Hit(
        "error",
        f"{MICRO} is not set (nor ppo_micro_batch_size, nor use_dynamic_bsz): verl refuses to "
        f"start (`[actor_rollout_ref.actor] Please set at least one of ... ppo_micro_batch_size "
        f"or ... ppo_micro_batch_size_per_gpu`).",
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


# ---- A4 ---------------------------------------------------------------------------------------


def micro_batch_tp_mismatch(v: ConfigView) -> list[Hit]:
    """A4: the actor micro batch is not a multiple of the rollout's tensor-parallel size.

    The suggestion also keeps the other micro-batch rules satisfied (at most the golden value,
    a divisor of verl's per-GPU mini-batch); when no multiple of TP does, nothing is suggested.
    """
    if v.flag(DYNAMIC):
        return []  # the micro batch is not used
    micro, key = _actor_micro(v)
    tp = v.int_(TP)
    if micro is None or tp is None or tp <= 1 or micro % tp == 0:
        return []
    suggested = _tp_multiple(v, micro, tp)
    message = (
        f"Actor micro batch {micro} is not a multiple of rollout.tensor_model_parallel_size "
        f"{tp} ({micro} % {tp} = {micro % tp}). The GRPO article reports vLLM tensor-split errors "
        f"(`Expected all tensors to be on the same device`) for this; verl itself does not check it."
    )
    advice = []
    if suggested is None:
        message += (
            f" No multiple of {tp} also fits the other micro-batch rules here (a divisor of "
            f"each GPU's mini-batch of {plural(normalized_mini(v) or 0, 'sample')}, within the "
            f"golden formula); change ppo_mini_batch_size or the TP size instead."
        )
    else:
        where = "at or below" if suggested < micro else "just above"
        advice.append(
            _micro_advice(
                v,
                key,
                suggested,
                f"The multiple of the TP size ({tp}) {where} the current value that still "
                f"divides each GPU's mini-batch and stays within the golden formula.",
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
        )
    ]


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


# ---- A5 ---------------------------------------------------------------------------------------


def grpo_group_size(v: ConfigView, minimum: int = 4, costly: int = 16) -> list[Hit]:
    """A5: GRPO needs rollout.n ≥ 4 and even; n=1 degenerates, n=2 noisy, n ≥ 16 costly."""
    estimator = v.get(ESTIMATOR)
    if str(estimator) not in GRPO_ESTIMATORS:
        return []
    n = v.int_(N)
    if n is None:
        return []
    evidence: dict[str, Any] = {"adv_estimator": estimator, "rollout_n": n}
    if n <= 1:
        severity: Severity = "error"
        why = (
            f"rollout.n={n} with adv_estimator={estimator}: each group has one sample, so verl's "
            f"GRPO advantage is the raw score (group mean 0, std 1). verl does not check this; "
            f"the run trains as a baseline-free policy gradient with large reward variance."
        )
        suggested = minimum
    elif n < minimum:
        severity = "warning"
        why = (
            f"rollout.n={n}: too few samples per prompt for a stable group baseline (the GRPO article: "
            f"ranking statistics unreliable, KL estimate noisy); it asks for n ≥ {minimum}, even."
        )
        suggested = minimum
    elif n >= costly:
        severity = "warning"
        why = (
            f"rollout.n={n}: costly for little gain — the GRPO article measures +47% step time at "
            f"n=16 (reward std 0.09 vs 0.11 at n=8) and reports vLLM engine hangs in rollout."
        )
        suggested = 8
    elif n % 2:
        severity = "warning"
        why = f"rollout.n={n} is odd; the GRPO article asks for an even n ≥ {minimum} (4 or 8)."
        suggested = 4 if n < 6 else 8
    else:
        return []
    advice = v.advice(
        N,
        suggested,
        "The GRPO article recommends n=4 on a tight budget and n=8 for reasoning tasks (GSM8K, "
        "Qwen2-7B: n=4 reward std 0.18 / 1200 steps to converge; n=8 std 0.11 / 950 steps).",
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
    return [Hit(severity, why, evidence, [advice, *extra], [f"{SEED_GRPO} §2.1–2.2"])]


# ---- A6 + verl's real_train_batch_size check ---------------------------------------------------


def _batch_for(tbs: int, n: int, gpus: int) -> int:
    """The largest train_batch_size ≤ tbs that is a multiple of n with tbs·n divisible by gpus.

    tbs·n divisible by gpus ⇔ tbs divisible by gpus / gcd(n, gpus); so tbs is a multiple of
    lcm(n, gpus / gcd(n, gpus)). The smallest such multiple when none is ≤ tbs.
    """
    n, gpus = max(1, n), max(1, gpus)
    step = math.lcm(n, gpus // math.gcd(n, gpus))
    return max(step, tbs // step * step)


def gpus_phrase(v: ConfigView, gpus: int) -> str:
    """`8 GPUs`, saying so when the count is verl's default because the user did not set it."""
    text = plural(gpus, "GPU")
    per_node, nodes = "trainer.n_gpus_per_node", "trainer.nnodes"
    if v.explicit is None or v.is_set(per_node):
        return text
    default = f"verl's default {per_node}={fmt(v.get(per_node))}"
    if v.is_set(nodes):
        return f"{text} ({nodes}={fmt(v.get(nodes))} × {default}, which you did not set)"
    return f"{text} ({default} × {nodes}={fmt(v.get(nodes))}; you did not set them)"


def batch_not_divisible_by_n(v: ConfigView) -> list[Hit]:
    """A6 (`train_batch_size % n`) and verl's `real_train_batch_size % n_gpus` check.

    Both suggest the same value: the largest train batch ≤ the current one that satisfies both.
    """
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
                    f"verl will refuse to start: real_train_batch_size = train_batch_size × "
                    f"rollout.n = {tbs} × {n} = {real} is not divisible by the "
                    f"{gpus_phrase(v, gpus)} (verl: `real_train_batch_size ({real}) must be "
                    f"divisible by minimal possible batch size ({gpus})`).",
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
                            f"The largest train batch at or below {tbs} (or the smallest above, "
                            f"when none is) that is a multiple of n={n} and whose × n divides by "
                            f"{plural(gpus, 'GPU')}.",
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
                f"data.train_batch_size {tbs} is not a multiple of rollout.n {n} ({tbs} % {n} = "
                f"{tbs % n}). The GRPO article asks for train_batch_size % n == 0 (its error text "
                f"`batch_size must be divisible by n` is not verl's; verl checks "
                f"train_batch_size × n against the GPU count).",
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
            )
        )
    return hits


# ---- A7 and verl's train_batch_size >= ppo_mini_batch_size ---------------------------------------


def mini_batch_not_divisor(v: ConfigView) -> list[Hit]:
    """A7: train_batch_size % ppo_mini_batch_size != 0 leaves a remainder every step."""
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
        f"{tbs - rem} of {tbs} prompts per step "
        f"({used:.1%}); the remaining {rem} ({rem / tbs:.1%}) form a short mini-batch that the "
        f"PPO article reports as dropped (it measured 92% → 99.7% data use after fixing). verl checks "
        f"only train_batch_size ≥ ppo_mini_batch_size."
    )
    advice = v.advice(
        MINI,
        suggested,
        f"The largest divisor of {tbs} at or below {mini} (that still gives each GPU a "
        f"sample), so every step splits into equal mini-batches (or make train_batch_size a "
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


def mini_batch_larger_than_batch(v: ConfigView) -> list[Hit]:
    """verl's check: train_batch_size must be ≥ actor.ppo_mini_batch_size."""
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


def mini_for(v: ConfigView, tbs: int, limit: int) -> int:
    """The largest divisor of `tbs` ≤ limit that leaves verl's per-GPU mini-batch above 0 (when
    verl checks it); else the smallest divisor that does; else the largest divisor ≤ limit."""
    floor = 1
    gpus, n = v.n_gpus(), v.int_(N) or 1
    sp = v.int_(f"{ACT}.ulysses_sequence_parallel_size") or 1
    if v.preflight and not v.flag(DYNAMIC) and gpus and sp > 0 and gpus >= sp:
        floor = -(-(gpus // sp) // max(1, n))
    fitting = [d for d in divisors(max(1, tbs)) if d >= floor]
    below = [d for d in fitting if d <= limit]
    if below:
        return max(below)
    return min(fitting) if fitting else divisor_at_most(tbs, limit)


def normalized_mini_batch_mismatch(v: ConfigView) -> list[Hit]:
    """verl's worker check: ppo_mini_batch_size × n ÷ (GPUs ÷ SP) must be a multiple of micro."""
    normalized = normalized_mini(v)
    mini, micro, gpus = v.int_(MINI), v.int_(MICRO), v.n_gpus()
    if normalized is None or mini is None or micro is None or not gpus or micro <= 0:
        return []
    n = v.int_(N) or 1
    sp = v.int_(f"{ACT}.ulysses_sequence_parallel_size") or 1
    dp = gpus // sp
    legacy = v.version is not None and (0, 3) <= verl_config._version_tuple(v.version) < (0, 8)
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
                    f"The largest divisor of {normalized} at or below {micro} (a multiple of the "
                    f"rollout TP size where one divides).",
                    refs[0],
                )
            ],
            refs,
        )
    ]


# ---- A8 ---------------------------------------------------------------------------------------


def kl_in_reward_active(v: ConfigView) -> bool:
    """In-reward KL (algorithm.kl_ctrl) applies: use_kl_in_reward, or verl < 0.4 without KL loss."""
    if v.flag(KL_IN_REWARD):
        return True
    version = v.version
    if version and verl_config._version_tuple(version) < (0, 4):
        return not v.flag(USE_KL_LOSS)
    return False


def suggested_kl_coef(size: float | None, small: float = 3.0, large: float = 30.0) -> float:
    """A starting KL coefficient by model size: 0.001 is tuned for ~7B (seed §3.1)."""
    if size is not None and size <= small:
        return 0.0005
    if size is not None and size >= large:
        return 0.002
    return 0.001


def kl_coef_zero(v: ConfigView) -> list[Hit]:
    """A8: a KL coefficient of 0 removes the pull toward the reference policy."""
    hits = []
    coef = v.num(KL_LOSS_COEF)
    size = v.model_size()
    target = suggested_kl_coef(size)
    grpo = str(v.get(ESTIMATOR)) in GRPO_ESTIMATORS
    if coef == 0 and (v.flag(USE_KL_LOSS) or v.is_set(KL_LOSS_COEF)):
        advice = [
            v.advice(
                KL_LOSS_COEF,
                target,
                "0.001 is verl's default, tuned for ~7B models; the GRPO article starts smaller "
                "models at 0.0005 and calibrates so actor/kl_loss sits in 0.01–0.03.",
                f"{SEED_GRPO} §3.1–3.2",
            )
        ]
        if v.flag(USE_KL_LOSS):
            severity: Severity = "error"
            message = (
                "actor.use_kl_loss=True with actor.kl_loss_coef=0: the KL term is switched off, "
                "so nothing keeps the policy near the reference (the GRPO article: the policy drifts "
                "into gibberish and repetition)."
            )
        else:
            in_reward = kl_in_reward_active(v) and (v.num(KL_CTRL_COEF) or 0) > 0
            severity = "warning" if grpo and not in_reward else "info"
            message = (
                "actor.kl_loss_coef=0 (and actor.use_kl_loss=False): there is no KL loss"
                + ("" if in_reward else " and no in-reward KL either, so no KL constraint at all")
                + ". The GRPO article warns that without a KL constraint the policy drifts "
                "(gibberish, repetition)."
            )
            if grpo and not in_reward:
                advice.append(
                    v.advice(
                        USE_KL_LOSS,
                        True,
                        "GRPO recipes in verl use the KL loss.",
                        f"{SEED_GRPO} §3.3",
                    )
                )
        hits.append(
            Hit(
                severity,
                message,
                {"kl_loss_coef": coef, "use_kl_loss": v.flag(USE_KL_LOSS)},
                advice,
                [f"{SEED_GRPO} §3.3"],
            )
        )
    ctrl = v.num(KL_CTRL_COEF)
    if ctrl == 0 and v.flag(KL_IN_REWARD):
        hits.append(
            Hit(
                "warning",
                "algorithm.use_kl_in_reward=True with algorithm.kl_ctrl.kl_coef=0: the in-reward "
                "KL penalty is on but weighs nothing.",
                {"kl_ctrl.kl_coef": ctrl, "use_kl_in_reward": True},
                [v.advice(KL_CTRL_COEF, target, "verl's default is 0.001.", f"{SEED_GRPO} §3.3")],
                [f"{SEED_GRPO} §3.3"],
            )
        )
    return hits


def kl_coef_scale_mismatch(v: ConfigView, small_b: float = 3.0, large_b: float = 30.0) -> list[Hit]:
    """A8: 0.001 is tuned for ~7B; smaller models want less, larger ones more."""
    size = v.model_size()
    if size is None:
        return []
    keys = []
    if v.flag(USE_KL_LOSS):
        keys.append(KL_LOSS_COEF)
    if kl_in_reward_active(v) or (v.explicit is not None and v.is_set(KL_CTRL_COEF)):
        keys.append(KL_CTRL_COEF)
    hits = []
    for key in keys:
        coef = v.num(key)
        if coef is None or coef <= 0:
            continue
        # the suggestion is the starting value by model size, which this rule accepts
        if size <= small_b and coef >= 0.001:
            suggested = suggested_kl_coef(size, small_b, large_b)
            direction = f"smaller models want less: the default over-constrains a {size:g}B policy"
        elif size >= large_b and coef <= 0.001:
            suggested = suggested_kl_coef(size, small_b, large_b)
            direction = f"larger models want more: the default lets a {size:g}B policy diverge"
        else:
            continue
        note = ""
        if key == KL_CTRL_COEF and not kl_in_reward_active(v):
            note = (
                " Note: verl ≥ 0.4 uses algorithm.kl_ctrl only with "
                "algorithm.use_kl_in_reward=True."
            )
        message = (
            f"{key.rsplit('.', 1)[-1]}={fmt(coef)} for a {size:g}B model: the default 0.001 is "
            f"tuned for ~7B models and {direction} (the GRPO article).{note}"
        )
        advice = v.advice(
            key,
            suggested,
            "A starting point, not a measured optimum: the GRPO article gives the direction "
            "only (the PPO article's run on Qwen2.5-0.5B lowered kl_coef 0.001 → 0.0005). Then calibrate "
            "against the KL to the reference (target 0.01–0.03) and keep it fixed for the run.",
            f"{SEED_GRPO} §3.1; {SEED_PPO} §4.2",
        )
        hits.append(
            Hit(
                "info",
                message,
                {"parameter": key, "coefficient": coef, "model_size_b": size},
                [advice],
                [f"{SEED_GRPO} §3.1", f"{SEED_PPO} §4.2"],
            )
        )
    return hits


# ---- A9 ---------------------------------------------------------------------------------------


def gpu_memory_range(size: float | None, gpus: int | None) -> tuple[float, float, str]:
    """(low, high, why) of the advised rollout.gpu_memory_utilization."""
    if size is not None and size <= 1.5:
        return 0.5, 0.65, f"0.5–0.65 for a small model ({size:g}B; {SEED_PPO} §2.1)"
    if gpus == 1:
        return 0.4, 0.5, f"0.4–0.5 on a single GPU ({SEED_GRPO} §4.2)"
    if gpus is None or gpus >= 8:
        return 0.3, 0.4, f"0.3–0.4 with {gpus or 8}-GPU FSDP ({SEED_GRPO} §4.2)"
    return 0.4, 0.5, f"0.4–0.5 with {gpus} GPUs (between the GRPO article's 1- and 8-GPU figures)"


def gpu_memory_utilization_risk(v: ConfigView, oom_above: float = 0.7) -> list[Hit]:
    """A9: vLLM's KV-cache share too high for FSDP to fit (or, for small models, too low)."""
    value = v.num(GPU_MEM)
    if value is None:
        return []
    size, gpus = v.model_size(), v.n_gpus()
    low, high, why = gpu_memory_range(size, gpus)
    evidence = {
        "gpu_memory_utilization": value,
        "n_gpus": gpus,
        "model_size_b": size,
        "recommended_range": [low, high],
    }
    if value > oom_above:
        severity: Severity = "error"
        message = (
            f"rollout.gpu_memory_utilization={fmt(value)} leaves {1 - value:.0%} of each GPU to "
            f"FSDP (weights, gradients, optimizer state, NCCL buffers): above {oom_above} the "
            f"GRPO and PPO articles report OOM, `NCCL operation failed`, vLLM falling back to CPU "
            f"offload "
            f"(3–5× slower) and inf/nan losses. Advised here: {why}."
        )
        suggested = high
        if v.flag(f"{ACT}.fsdp_config.param_offload") and v.flag(
            f"{ACT}.fsdp_config.optimizer_offload"
        ):
            severity = "warning"
            message += (
                " The actor's parameters and optimizer state are offloaded to CPU, which frees "
                "much of that memory during rollout, so this is less likely to fail."
            )
    elif value > high:
        severity = "warning"
        message = (
            f"rollout.gpu_memory_utilization={fmt(value)} is above the advised {why}: little "
            f"room for FSDP's update and communication buffers."
        )
        suggested = high
    elif value < low:
        severity = "info"
        message = (
            f"rollout.gpu_memory_utilization={fmt(value)} is below the advised {why}: a smaller "
            f"KV cache slows rollout (the PPO article: 0.4 → 0.65 on Qwen2.5-0.5B cut timing_s/gen "
            f"5.72 → 3.21 s)."
        )
        suggested = high
    else:
        return []
    advice = v.advice(
        GPU_MEM,
        suggested,
        f"vLLM pre-allocates this share of GPU memory for its KV cache; advised {why}.",
        f"{SEED_GRPO} §4; {SEED_PPO} §2.1",
    )
    return [Hit(severity, message, evidence, [advice], [f"{SEED_GRPO} §4", f"{SEED_PPO} §2.1"])]


# ---- A10, A11 -----------------------------------------------------------------------------------


def shuffle_mismatch(v: ConfigView) -> list[Hit]:
    """A10: data.shuffle and actor.shuffle differ (the GRPO article's claim)."""
    data, actor = v.flag("data.shuffle"), v.flag(f"{ACT}.shuffle")
    if data == actor:
        return []
    touched = v.explicit is not None and (v.is_set("data.shuffle") or v.is_set(f"{ACT}.shuffle"))
    message = (
        f"data.shuffle={data} but actor.shuffle={actor}. The GRPO article says they must match or "
        f"responses and prompts get misaligned. (verl's own defaults differ: data.shuffle=True, "
        f"actor.shuffle=False; actor.shuffle only reorders samples inside an update, so treat "
        f"this as the GRPO article's advice, not a verl error.)"
    )
    advice = v.advice(
        f"{ACT}.shuffle", data, "Match data.shuffle, as the GRPO article asks.", f"{SEED_GRPO} §5.1"
    )
    return [
        Hit(
            "warning" if touched else "info",
            message,
            {"data.shuffle": data, "actor.shuffle": actor},
            [advice],
            [f"{SEED_GRPO} §5"],
        )
    ]


def seed_unset(v: ConfigView, seed: int = 42) -> list[Hit]:
    """A11: no explicit seed."""
    for key in ("data.seed", "trainer.seed"):
        if v.is_set(key) and v.get(key) is not None:
            return []
    message = (
        "No seed is set (data.seed / trainer.seed). verl seeds its data sampler with 1 when "
        "data.seed is absent, so the data order is repeatable, but the GRPO article asks for an "
        "explicit, recorded seed so that runs can be compared and reproduced."
    )
    advice = v.advice(
        "data.seed",
        seed,
        "`++` adds the key whether or not your verl version declares it.",
        f"{SEED_GRPO} §5.1",
        prefix="++",
    )
    return [
        Hit(
            "info",
            message,
            {"data.seed": None, "trainer.seed": None},
            [advice],
            [f"{SEED_GRPO} §5.1", "verl:trainer/main_ppo.py (create_rl_sampler)"],
        )
    ]


# ---- A12 --------------------------------------------------------------------------------------


def response_length_mismatch(v: ConfigView) -> list[Hit]:
    """A12: rollout.response_length differs from data.max_response_length."""
    rollout = as_number(verl_config.get(v.config, RO_RESPONSE))
    data = v.num(RESPONSE)
    if rollout is None or data is None or rollout == data:
        return []
    rollout, data = int(rollout), int(data)
    gap = abs(rollout - data)
    if rollout > data:
        detail = (
            f"vLLM generates up to {plural(rollout, 'token')} but training keeps {data}: up to "
            f"{plural(gap, 'generated token')} per response "
            f"{'is' if gap == 1 else 'are'} computed and thrown away"
        )
        key, suggested = RESPONSE, rollout
    else:
        detail = (
            f"vLLM stops at {plural(rollout, 'token')} although the data allows {data}: responses are cut "
            f"{plural(gap, 'token')} short (watch response_length/clip_ratio)"
        )
        key, suggested = RO_RESPONSE, data
    message = (
        f"rollout.response_length={rollout} but data.max_response_length={data}: {detail}. verl "
        f"makes the first follow the second unless it is overridden by hand."
    )
    advice = v.advice(
        key,
        suggested,
        "Make the two equal (the PPO article set both to 256; response_length/clip_ratio went to 0).",
        f"{SEED_PPO} §5.2",
    )
    return [
        Hit(
            "warning",
            message,
            {
                "rollout.response_length": rollout,
                "data.max_response_length": data,
                "difference": gap,
            },
            [advice],
            [f"{SEED_PPO} §5.2"],
        )
    ]


# ---- A13 --------------------------------------------------------------------------------------

ARTICLE_TOKENS, ARTICLE_SEQS = 16384, 1896


def rollout_batching_mismatch(v: ConfigView, small_model_b: float = 1.5) -> list[Hit]:
    """A13 and vLLM's/verl's own limits on max_num_batched_tokens and max_num_seqs."""
    tokens, seqs = v.int_(MAX_TOKENS), v.int_(MAX_SEQS)
    if tokens is None or seqs is None:
        return []
    _, _, length = _seq_len(v)
    evidence: dict[str, Any] = {
        "max_num_batched_tokens": tokens,
        "max_num_seqs": seqs,
        "tokens_per_seq": tokens / seqs if seqs else None,
        "max_sequence_length": length,
    }
    hits = []
    if v.preflight and tokens < seqs:
        hits.append(
            Hit(
                "error",
                f"rollout.max_num_batched_tokens={tokens} < max_num_seqs={seqs}: vLLM refuses this "
                f"(`max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs "
                f"({seqs})`).",
                evidence,
                [
                    v.advice(
                        MAX_TOKENS,
                        seqs,
                        "At least max_num_seqs.",
                        "vllm:config.py (SchedulerConfig)",
                    )
                ],
                ["vllm:config.py (SchedulerConfig)"],
            )
        )
    chunked = v.get(CHUNKED_PREFILL)
    if v.preflight and length and tokens < length and chunked is not False:
        hits.append(
            Hit(
                "error",
                f"rollout.max_num_batched_tokens={tokens} is smaller than prompt + response = "
                f"{length} with chunked prefill on: verl refuses this (`Enable chunked prefill, "
                f"max_num_batched_tokens is smaller than max_model_len, please increase "
                f"max_num_batched_tokens or disable chunked prefill`).",
                evidence,
                [
                    v.advice(
                        MAX_TOKENS,
                        length,
                        "At least max_prompt_length + max_response_length.",
                        "verl:workers/rollout/vllm_rollout",
                    )
                ],
                ["verl:workers/rollout/vllm_rollout"],
            )
        )
    default_tokens = verl_config.default_for(MAX_TOKENS, v.version)
    default_seqs = verl_config.default_for(MAX_SEQS, v.version)
    # "changed": away from verl's default (setting a key to its default changes nothing)
    moved_tokens, moved_seqs = tokens != default_tokens, seqs != default_seqs
    if v.explicit is not None and moved_tokens != moved_seqs:
        changed, other = (MAX_TOKENS, MAX_SEQS) if moved_tokens else (MAX_SEQS, MAX_TOKENS)
        if changed == MAX_SEQS:
            suggested = round(8192 * seqs / 1024)
        else:
            suggested = max(1, round(1024 * tokens / 8192))
        hits.append(
            Hit(
                "info",  # a throughput recipe, not a correctness problem
                f"Only {changed.rsplit('.', 1)[-1]} was changed ({fmt(v.get(changed))}); "
                f"{other.rsplit('.', 1)[-1]} stays at verl's default {fmt(v.get(other))}. The PPO "
                f"article changes the two together (8192/1024 → 16384/1896: +22% throughput).",
                evidence,
                [
                    v.advice(
                        other,
                        suggested,
                        "Scaled by the same factor, keeping verl's tokens-per-sequence ratio.",
                        f"{SEED_PPO} §2.2",
                    )
                ],
                [f"{SEED_PPO} §2.2"],
            )
        )
    size = v.model_size()
    if (
        not hits
        and size is not None
        and size <= small_model_b
        and tokens == default_tokens
        and seqs == default_seqs
    ):
        hits.append(
            Hit(
                "info",
                f"Rollout batching at verl's defaults ({tokens}/{seqs}) for a {size:g}B model: the PPO "
                f"article raised both to {ARTICLE_TOKENS}/{ARTICLE_SEQS} with "
                f"gpu_memory_utilization 0.65 (+22% throughput; response_length/clip_ratio "
                f"0.012 → 0.003 on GSM8K). Its stated reason (tokens per sequence near the mean "
                f"prompt+response length ≈ 239) does not match its own numbers (8 → 8.6), so take "
                f"the values as measured, not derived.",
                evidence,
                [
                    v.advice(
                        MAX_TOKENS,
                        ARTICLE_TOKENS,
                        "The PPO article's tuned value.",
                        f"{SEED_PPO} §2.2",
                    ),
                    v.advice(
                        MAX_SEQS, ARTICLE_SEQS, "The PPO article's tuned value.", f"{SEED_PPO} §2.2"
                    ),
                ],
                [f"{SEED_PPO} §2.2"],
            )
        )
    return hits


# ---- A14 --------------------------------------------------------------------------------------


def log_prob_micro_batch(v: ConfigView, best: int = 16, padding_above: int = 20) -> list[Hit]:
    """A14: log-prob micro batch 16 beats 8; above 20 padding overhead. Unset: verl refuses."""
    hits = []
    keys = [(RO_LOGPROB, f"{RO}.log_prob_micro_batch_size")]
    if v.flag(USE_KL_LOSS) or v.flag(KL_IN_REWARD):  # a reference model exists
        keys.append((REF_LOGPROB, f"{REF}.log_prob_micro_batch_size"))
    for key, legacy in keys:
        value = v.int_(key)
        section = key.rsplit(".", 1)[0]
        dyn = v.flag(DYNAMIC)  # verl gates these checks on the actor's flag
        if value is not None and v.preflight and not dyn and v.int_(legacy) is not None:
            hits.append(_both_set(v, legacy, key))
            continue
        if value is None:
            unset = v.int_(legacy) is None and verl_config.get(v.config, key) is None
            if v.preflight and not dyn and unset:
                hits.append(
                    Hit(
                        "error",
                        f"{key} is not set (nor {legacy.rsplit('.', 1)[-1]}, nor dynamic batch size): "
                        f"verl refuses to start (`[{section}] Please set at least one of "
                        f"'{legacy}' or '{key}' ...`).",
                        {"parameter": key},
                        [v.advice(key, best, "The PPO article's best value.", f"{SEED_PPO} §2.3")],
                        [SRC_CONFIG],
                        title="Log-prob micro batch not set",
                    )
                )
            continue
        if value < best:
            severity: Severity = "info"
            message = (
                f"{key}={value}: the PPO article measured 16 faster than 8 (perf/throughput "
                f"1176 → 1320 tokens/s, fewer small forward passes)."
            )
        elif value > padding_above:
            severity = "info"
            message = (
                f"{key}={value}: above {padding_above} the PPO article saw padding overhead "
                f"slow the log-prob pass down."
            )
        else:
            continue
        hits.append(
            Hit(
                severity,
                message,
                {"parameter": key, "value": value},
                [
                    v.advice(
                        key,
                        best,
                        "The PPO article's measured best; if "
                        "perf/max_memory_allocated_gb rises > 10%, lower "
                        "rollout.gpu_memory_utilization.",
                        f"{SEED_PPO} §2.3",
                    )
                ],
                [f"{SEED_PPO} §2.3"],
            )
        )
    return hits


# ---- A16 --------------------------------------------------------------------------------------


def kl_coef_changes(before: ConfigView, after: ConfigView) -> list[tuple[str, float, float, bool]]:
    """(key, old, new, active) for each KL coefficient that differs between two configs."""
    out = []
    for key, active in (
        (KL_LOSS_COEF, before.flag(USE_KL_LOSS) or after.flag(USE_KL_LOSS)),
        (KL_CTRL_COEF, kl_in_reward_active(before) or kl_in_reward_active(after)),
    ):
        old, new = before.num(key), after.num(key)
        if old is None or new is None:
            continue
        if not math.isclose(old, new, rel_tol=1e-9, abs_tol=0.0):
            out.append((key, old, new, active))
    return out


def changed_keys(a: dict[str, Any], b: dict[str, Any], limit: int = 20) -> list[str]:
    """Dotted keys whose values differ between two nested configs (first `limit`)."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    keys = sorted(
        k for k in set(flat_a) | set(flat_b) if flat_a.get(k, _NONE) != flat_b.get(k, _NONE)
    )
    return keys[:limit]


_NONE = object()


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
