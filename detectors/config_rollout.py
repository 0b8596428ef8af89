"""Config rules on vLLM's rollout: its share of GPU memory, response length, batching limits,
the log-prob micro batch (LS509, LS512–LS514; tuning_knowledge.md §A9, §A12–A14), the context
length vLLM is given (LS519) and the log-prob micro batch against the PPO one (LS522).
"""

from __future__ import annotations

import math
from typing import Any

from logscope import verl_config
from logscope.advice import SEED_GRPO, SEED_PPO
from logscope.config_view import ConfigView, Hit, as_number, fmt
from logscope.detector import param
from logscope.model import Severity
from logscope.verl_config import ACT, AR, REF, RO, gpu_memory_range
from logscope.words import plural

from .config_batch import MICRO
from .config_lint import (
    DYNAMIC,
    KL_IN_REWARD,
    RESPONSE,
    SRC_CONFIG,
    USE_KL_LOSS,
    ConfigRule,
    RiskRule,
    both_set,
    seq_len,
)

GPU_MEM = f"{RO}.gpu_memory_utilization"
MAX_TOKENS = f"{RO}.max_num_batched_tokens"
MAX_SEQS = f"{RO}.max_num_seqs"
CHUNKED_PREFILL = f"{RO}.enable_chunked_prefill"
RO_RESPONSE = f"{RO}.response_length"
RO_LOGPROB = f"{RO}.log_prob_micro_batch_size_per_gpu"
REF_LOGPROB = f"{REF}.log_prob_micro_batch_size_per_gpu"
MAX_MODEL_LEN = f"{RO}.max_model_len"

#: LS522's default bound on log-prob micro / PPO micro (either way); LS514 defers to it
MICRO_RATIO_LIMIT = 4.0

ARTICLE_TOKENS, ARTICLE_SEQS = 16384, 1896
LOGPROB_BEST = 16  # LS514's default `best` (the PPO article's measured value)


# tuning_knowledge.md §A9
class GpuMemoryUtilizationRisk(RiskRule, code="LS509", name="gpu-memory-utilization-risk"):
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
        On a log whose config got through `survived_steps` training steps with no error line, a
        share above the range predicted an OOM that was not observed, and the finding is info.

    References:
        seed:grpo-pitfalls §4; seed:ppo-tuning §2.1.
    """

    title = "Rollout gpu_memory_utilization outside the advised range"

    oom_above: float = param(0.7, gt=0, le=1)

    def check(self, v: ConfigView) -> list[Hit]:
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
        if value > self.oom_above:
            severity: Severity = "error"
            message = (
                f"rollout.gpu_memory_utilization={fmt(value)} leaves {1 - value:.0%} of each GPU "
                "to FSDP (weights, gradients, optimizer state, NCCL buffers): above "
                f"{self.oom_above} the GRPO and PPO articles report OOM, `NCCL operation failed`, "
                "vLLM falling back to CPU offload (3–5× slower) and inf/nan losses. Advised here: "
                f"{why}."
            )
            suggested = high
            if v.flag(f"{ACT}.fsdp_config.param_offload") and v.flag(
                f"{ACT}.fsdp_config.optimizer_offload"
            ):
                severity = "warning"
                message += (
                    " The actor's parameters and optimizer state are offloaded to CPU, which "
                    "frees much of that memory during rollout, so this is less likely to fail."
                )
        elif value > high:
            severity = "warning"
            message = (
                f"rollout.gpu_memory_utilization={fmt(value)} is above the advised {why}: little "
                "room for FSDP's update and communication buffers."
            )
            suggested = high
        elif value < low:
            severity = "info"
            message = (
                f"rollout.gpu_memory_utilization={fmt(value)} is below the advised {why}: a "
                "smaller KV cache slows rollout (the PPO article: 0.4 → 0.65 on Qwen2.5-0.5B cut "
                "the generation time 5.72 → 3.21 s)."
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
        refs = [f"{SEED_GRPO} §4", f"{SEED_PPO} §2.1"]
        predicts = "an OOM or NCCL failure" if value > high else None
        return [Hit(severity, message, evidence, [advice], refs, predicts=predicts)]


# tuning_knowledge.md §A12
class ResponseLengthMismatch(ConfigRule, code="LS512", name="response-length-mismatch"):
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

    title = "rollout.response_length differs from data.max_response_length"

    def check(self, v: ConfigView) -> list[Hit]:
        rollout = as_number(verl_config.get(v.config, RO_RESPONSE))
        data = v.num(RESPONSE)
        if rollout is None or data is None or rollout == data:
            return []
        rollout, data = int(rollout), int(data)
        gap = abs(rollout - data)
        if rollout > data:
            detail = (
                f"vLLM generates up to {plural(rollout, 'token')} but training keeps {data}: up to "
                f"{plural(gap, 'generated token')} per response {'is' if gap == 1 else 'are'} "
                "computed and thrown away"
            )
            key, suggested = RESPONSE, rollout
        else:
            detail = (
                f"vLLM stops at {plural(rollout, 'token')} although the data allows {data}: "
                f"responses are cut {plural(gap, 'token')} short (watch the truncation ratio)"
            )
            key, suggested = RO_RESPONSE, data
        message = (
            f"rollout.response_length={rollout} but data.max_response_length={data}: {detail}. "
            "verl makes the first follow the second unless it is overridden by hand."
        )
        advice = v.advice(
            key,
            suggested,
            "Make the two equal (the PPO article set both to 256; the truncation ratio went to 0).",
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


# tuning_knowledge.md §A13
class RolloutBatchingMismatch(ConfigRule, code="LS513", name="rollout-batching-mismatch"):
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

    title = "Rollout batching limits do not fit together"

    small_model_b: float = param(1.5, gt=0)

    def check(self, v: ConfigView) -> list[Hit]:
        tokens, seqs = v.int_(MAX_TOKENS), v.int_(MAX_SEQS)
        if tokens is None or seqs is None:
            return []
        _, _, length = seq_len(v)
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
                    f"rollout.max_num_batched_tokens={tokens} < max_num_seqs={seqs}: vLLM refuses "
                    f"this (`max_num_batched_tokens ({tokens}) must be greater than or equal to "
                    f"max_num_seqs ({seqs})`).",
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
                    f"{length} with chunked prefill on: verl refuses this (`Enable chunked "
                    "prefill, max_num_batched_tokens is smaller than max_model_len, please "
                    "increase max_num_batched_tokens or disable chunked prefill`).",
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
                    f"{other.rsplit('.', 1)[-1]} stays at verl's default {fmt(v.get(other))}. The "
                    "PPO article changes the two together (8192/1024 → 16384/1896: +22% "
                    "throughput).",
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
            and size <= self.small_model_b
            and tokens == default_tokens
            and seqs == default_seqs
        ):
            hits.append(
                Hit(
                    "info",
                    f"Rollout batching at verl's defaults ({tokens}/{seqs}) for a {size:g}B model: "
                    f"the PPO article raised both to {ARTICLE_TOKENS}/{ARTICLE_SEQS} with "
                    "gpu_memory_utilization 0.65 (+22% throughput; truncation ratio "
                    "0.012 → 0.003 on GSM8K). Its stated reason (tokens per sequence near the "
                    "mean prompt+response length ≈ 239) does not match its own numbers (8 → 8.6), "
                    "so take the values as measured, not derived.",
                    evidence,
                    [
                        v.advice(
                            MAX_TOKENS,
                            ARTICLE_TOKENS,
                            "The PPO article's tuned value.",
                            f"{SEED_PPO} §2.2",
                        ),
                        v.advice(
                            MAX_SEQS,
                            ARTICLE_SEQS,
                            "The PPO article's tuned value.",
                            f"{SEED_PPO} §2.2",
                        ),
                    ],
                    [f"{SEED_PPO} §2.2"],
                )
            )
        return hits


# tuning_knowledge.md §A14
class LogProbMicroBatch(ConfigRule, code="LS514", name="log-prob-micro-batch"):
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

    title = "Log-prob micro batch off the measured best"
    default_severity = "info"

    best: int = param(16, ge=1)
    padding_above: int = param(20, ge=1)

    def check(self, v: ConfigView) -> list[Hit]:
        hits = []
        keys = [(RO_LOGPROB, f"{RO}.log_prob_micro_batch_size")]
        if v.flag(USE_KL_LOSS) or v.flag(KL_IN_REWARD):  # a reference model exists
            keys.append((REF_LOGPROB, f"{REF}.log_prob_micro_batch_size"))
        for key, legacy in keys:
            value = v.int_(key)
            section = key.rsplit(".", 1)[0]
            dyn = v.flag(DYNAMIC)  # verl gates these checks on the actor's flag
            if value is not None and v.preflight and not dyn and v.int_(legacy) is not None:
                hits.append(both_set(v, legacy, key))
                continue
            if value is None:
                unset = v.int_(legacy) is None and verl_config.get(v.config, key) is None
                if v.preflight and not dyn and unset:
                    hits.append(
                        Hit(
                            "error",
                            f"{key} is not set (nor {legacy.rsplit('.', 1)[-1]}, nor dynamic batch "
                            f"size): verl refuses to start (`[{section}] Please set at least one "
                            f"of '{legacy}' or '{key}' ...`).",
                            {"parameter": key},
                            [
                                v.advice(
                                    key,
                                    self.best,
                                    "The PPO article's best value.",
                                    f"{SEED_PPO} §2.3",
                                )
                            ],
                            [SRC_CONFIG],
                            title="Log-prob micro batch not set",
                        )
                    )
                continue
            ppo = v.int_(MICRO)
            if not dyn and ppo and ppo > 0 and not _in_band(self.best, ppo, MICRO_RATIO_LIMIT):
                continue  # raising/lowering it to `best` would break LS522's ratio: LS522 advises
            if value < self.best:
                severity: Severity = "info"
                message = (
                    f"{key}={value}: the PPO article measured 16 faster than 8 (throughput "
                    "1176 → 1320 tokens/s, fewer small forward passes)."
                )
            elif value > self.padding_above:
                severity = "info"
                message = (
                    f"{key}={value}: above {self.padding_above} the PPO article saw padding "
                    "overhead slow the log-prob pass down."
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
                            self.best,
                            "The PPO article's measured best; if the peak allocated GPU memory "
                            "rises > 10%, lower rollout.gpu_memory_utilization.",
                            f"{SEED_PPO} §2.3",
                        )
                    ],
                    [f"{SEED_PPO} §2.3"],
                )
            )
        return hits


class MaxModelLenTooShort(ConfigRule, code="LS519", name="max-model-len-too-short"):
    """vLLM's context length `rollout.max_model_len` is below prompt + response.

    What it detects:
        `actor_rollout_ref.rollout.max_model_len < data.max_prompt_length +
        data.max_response_length` (warning); at most `max_prompt_length` (error: the longest
        prompts leave no room to generate). `max_model_len=null` (verl's default: the model's
        `max_position_embeddings`) is never flagged.

    Why it matters:
        verl's rollout servers cap each request at `max_model_len − prompt length` tokens, below
        `max_response_length` for long prompts. `response_length/clip_ratio` only counts
        responses that reach `max_response_length`, so this truncation is never counted
        (verl#7823, fix in PR #7906): the cut responses look finished and get scored as such.

    Example:
        `data.max_prompt_length=1024 data.max_response_length=3072
        actor_rollout_ref.rollout.max_model_len=3072` → warning: a 1,024-token prompt gets at
        most 2,048 response tokens; suggest `actor_rollout_ref.rollout.max_model_len=4096`.

    Advice:
        `max_model_len` at least `max_prompt_length + max_response_length`, or null.

    Known false positives:
        A cap chosen on purpose (multi-turn rollouts bounding the whole conversation). verl
        0.3–0.5's SPMD vLLM rollout set the context to prompt + response whatever this key said
        (verl#673).

    References:
        verl#7823; verl#7906; verl:workers/rollout/vllm_rollout/vllm_async_server.py.
    """

    title = "rollout.max_model_len below prompt + response"

    def check(self, v: ConfigView) -> list[Hit]:
        limit = v.int_(MAX_MODEL_LEN)
        prompt, response, length = seq_len(v)
        if limit is None or limit <= 0 or length is None or limit >= length:
            return []
        assert prompt is not None and response is not None  # seq_len gives a sum only then
        evidence = {
            "max_model_len": limit,
            "max_prompt_length": prompt,
            "max_response_length": response,
            "prompt_plus_response": length,
            "shortfall": length - limit,
        }
        head = (
            f"rollout.max_model_len={fmt(limit)} is below max_prompt_length + max_response_length"
            f" = {fmt(length)}"
        )
        if limit <= prompt:
            severity: Severity = "error"
            message = (
                f"{head}: a prompt of {plural(limit, 'token')} or more leaves no room to generate "
                "(verl raises `Prompt length (…) leaves no room to generate within the model's "
                "maximum context length`; vLLM rejects longer prompts)."
            )
        else:
            severity = "warning"
            message = (
                f"{head}: vLLM stops each response at max_model_len − its prompt length, so a "
                f"{fmt(prompt)}-token prompt gets at most {fmt(limit - prompt)} response tokens "
                f"instead of {fmt(response)}. verl's truncation ratio counts only "
                "responses that reach max_response_length, so this truncation is never counted "
                "(verl#7823; the fix, PR verl#7906, is open)."
            )
        advice = v.advice(
            MAX_MODEL_LEN,
            length,
            "At least max_prompt_length + max_response_length (or null: verl then uses the "
            "model's max_position_embeddings).",
            "verl#7823",
        )
        refs = ["verl#7823", "verl#7906", "verl:workers/rollout/vllm_rollout/vllm_async_server.py"]
        return [Hit(severity, message, evidence, [advice], refs)]


def _band(ppo: int, limit: float) -> tuple[int, int]:
    """The log-prob micro batches within `limit`× of the PPO micro batch `ppo`, either way."""
    return max(1, math.ceil(ppo / limit)), max(1, math.floor(ppo * limit))


def _in_band(value: int, ppo: int, limit: float) -> bool:
    low, high = _band(ppo, limit)
    return low <= value <= high


class LogProbMicroBatchRatio(ConfigRule, code="LS522", name="log-prob-micro-batch-ratio"):
    """The log-prob micro batch is far from the PPO (training) micro batch.

    What it detects:
        `rollout.log_prob_micro_batch_size_per_gpu` (and the reference model's, when a KL
        term uses it) more than 4× larger or smaller than
        `actor.ppo_micro_batch_size_per_gpu`, without dynamic batch size. LS514 judges the
        log-prob value alone; this rule judges the pair.

    Why it matters:
        Both are per-GPU forward batches of the same model on the same sequences. verl's
        guidance is a log-prob micro batch about 2× the training one (quoted in verl#6280); the
        PPO article's setups use 2× (4/8, 8/16) and measured 4× (4/16) as fine. Far larger: the
        forward-only pass holds the full-vocabulary logits of that many sequences and can run
        out of memory where training fits. Far smaller: many more, smaller forward passes than
        memory requires (the PPO article: 8 → 16 gave 1176 → 1320 tokens/s). Either way
        old_log_prob is computed at another batch shape than the training pass, which differs in
        bf16 (verl#6280: non-zero pg_clipfrac on-policy).

    Example:
        `actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
        actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=64` → 8×; suggest
        `actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16`.

    Advice:
        A value within 4× of the PPO micro batch, nearest the PPO article's measured best (16);
        equal to it when old_log_prob must match the training pass exactly.

    Known false positives:
        Very long sequences with a small training micro batch, or short ones with a large one,
        may justify a larger ratio; the 2× guidance is a rule of thumb, not a measured bound.

    References:
        verl#6280; seed:ppo-tuning §2.3.
    """

    title = "Log-prob micro batch far from the PPO micro batch"
    default_severity = "info"

    ratio_above: float = param(MICRO_RATIO_LIMIT, gt=1)

    def check(self, v: ConfigView) -> list[Hit]:
        ppo = v.int_(MICRO)
        if v.flag(DYNAMIC) or ppo is None or ppo <= 0:
            return []
        keys = [RO_LOGPROB]
        if v.flag(USE_KL_LOSS) or v.flag(KL_IN_REWARD):  # a reference model exists
            keys.append(REF_LOGPROB)
        hits = []
        for key in keys:
            value = v.int_(key)
            section = key.rsplit(".", 2)[-2]
            if value is None or value <= 0 or v.flag(f"{AR}.{section}.log_prob_use_dynamic_bsz"):
                continue
            ratio = max(value, ppo) / min(value, ppo)
            if ratio <= self.ratio_above:
                continue
            low, high = _band(ppo, self.ratio_above)
            suggested = min(max(LOGPROB_BEST, low), high)
            head = f"{key}={value} is {ratio:g}× "
            if value > ppo:
                detail = (
                    f"larger than actor.ppo_micro_batch_size_per_gpu={ppo}: the forward-only "
                    f"log-prob pass holds the full-vocabulary logits of {value} sequences at once "
                    "and can run out of memory where training fits"
                )
            else:
                detail = (
                    f"smaller than actor.ppo_micro_batch_size_per_gpu={ppo}: the forward-only "
                    f"pass, which needs less memory than training, runs {ratio:g}× as many "
                    "forward passes"
                )
            message = (
                f"{head}{detail}. verl's guidance is about 2× the training micro batch, here they "
                f"are more than {self.ratio_above:g}× apart; and old_log_prob computed at another "
                "batch shape differs from the training pass's in bf16 (both: verl#6280)."
            )
            advice = v.advice(
                key,
                suggested,
                f"Within {self.ratio_above:g}× of the PPO micro batch ({low}–{high}), nearest the "
                f"PPO article's measured best {LOGPROB_BEST}; equal to the PPO micro batch if "
                "old_log_prob must match the training pass exactly (verl#6280).",
                "verl#6280",
            )
            evidence = {
                "parameter": key,
                "value": value,
                "ppo_micro_batch_size_per_gpu": ppo,
                "ratio": ratio,
                "band": [low, high],
            }
            hits.append(Hit("info", message, evidence, [advice], ["verl#6280", f"{SEED_PPO} §2.3"]))
        return hits
