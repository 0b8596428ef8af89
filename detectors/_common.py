"""Helpers shared by the first detectors: scanning log events line by line, and advice that
several diagnoses give (GPU memory share A9, micro batch A2, the B11 non-finite set).

Lines are matched on their text after removing ANSI colour codes, the Ray prefix
(`(WorkerDict pid=1)`, `(raylet)`, …) and Ray's `[repeated Nx across cluster]` suffix, so the
detectors do not depend on how a reader classified an event.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import re
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from logscope import verl_config, verl_version
from logscope.advice import SEED_GRPO, SEED_PPO, advise, current_value
from logscope.aliases import name_of
from logscope.detector import Detector, param
from logscope.model import Advice, Finding, Run
from logscope.sources import cite
from logscope.verl_config import ACT, RO

from ._series import Series

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RAY_PREFIX_RE = re.compile(
    r"^\s*\((?:[A-Za-z_][\w.]*(?: pid=\d+)?(?:, ip=[0-9a-fA-F.:]+)?|raylet(?:, ip=[0-9a-fA-F.:]+)?|autoscaler[^)]*)\)\s?"
)
REPEATED_RE = re.compile(r"\s*\[repeated (\d+)x across cluster\].*$")
DEDUP_NOTE_RE = re.compile(r"\s*\(Ray deduplicates logs by default\..*$")


def clean_line(raw: str) -> tuple[str, int]:
    """(text without ANSI codes, Ray prefix and dedup suffix, how many times Ray says it was seen)."""
    text = ANSI_RE.sub("", raw).replace("\r", "")
    text = RAY_PREFIX_RE.sub("", text, count=1)
    repeats = 1
    m = REPEATED_RE.search(text)
    if m:
        repeats = 1 + int(m.group(1))
        text = text[: m.start()]
    text = DEDUP_NOTE_RE.sub("", text)
    return text.strip(), repeats


@dataclass(frozen=True)
class LogLine:
    """One physical line of an event, cleaned."""

    line_no: int
    step: int | None
    text: str
    repeats: int


#: event kinds whose text is the model's, not the log's (a printed rollout response)
MODEL_TEXT_KINDS = frozenset({"sample-response"})


def log_lines(run: Run) -> list[LogLine]:
    """Every line of every event but the model's text, in line order, cleaned (cached on the
    run per events list)."""
    cached = run.__dict__.get("_logscope_log_lines")
    if cached is not None and cached[0] is run.events and cached[1] == len(run.events):
        return cached[2]
    lines: list[LogLine] = []
    for event in run.events:
        if event.kind in MODEL_TEXT_KINDS:
            continue
        for offset, raw in enumerate(str(event.text).split("\n")):
            text, repeats = clean_line(raw)
            if text:
                lines.append(LogLine(event.line_no + offset, event.step_hint, text, repeats))
    lines.sort(key=lambda x: x.line_no)
    run.__dict__["_logscope_log_lines"] = (run.events, len(run.events), lines)
    return lines


@dataclass(frozen=True)
class Hit:
    """A line that matched a signature pattern."""

    line: LogLine
    match: re.Match[str]

    @property
    def line_no(self) -> int:
        return self.line.line_no

    @property
    def step(self) -> int | None:
        return self.line.step

    @property
    def text(self) -> str:
        return self.line.text


def find_lines(run: Run, pattern: re.Pattern[str], keywords: tuple[str, ...] = ()) -> list[Hit]:
    """Lines whose cleaned text matches `pattern` (search), in line order.

    `keywords`: literal strings of which every match contains at least one; lines without any
    are skipped before the regex runs (alternations are slow on long logs). A traceback's source
    line that raises the message (`raise ValueError("No available memory …")`) is code, not the
    error: it counts only when nothing else matched.
    """
    hits = []
    for line in log_lines(run):
        text = line.text
        if keywords and not any(k in text for k in keywords):
            continue
        m = pattern.search(text)
        if m:
            hits.append(Hit(line, m))
    printed = [h for h in hits if not _RAISE_LINE.match(h.line.text)]
    return printed or hits


_RAISE_LINE = re.compile(r"^\s*(?:\(\w+ pid=\d+[^)]*\)\s*)?raise\b")


def window(run: Run, line_no: int, before: int, after: int) -> list[LogLine]:
    """Cleaned lines from `line_no - before` to `line_no + after` (for tracebacks)."""
    lines = log_lines(run)
    keys = run.__dict__.get("_logscope_log_keys")
    if keys is None or len(keys) != len(lines):
        keys = [x.line_no for x in lines]
        run.__dict__["_logscope_log_keys"] = keys
    lo = bisect.bisect_left(keys, line_no - before)
    hi = bisect.bisect_right(keys, line_no + after)
    return lines[lo:hi]


def context(run: Run, line_no: int, before: int = 120, after: int = 60) -> str:
    """Cleaned event text within `before`/`after` lines of `line_no`, joined."""
    return "\n".join(x.text for x in window(run, line_no, before, after))


def quote(text: str, limit: int = 300) -> str:
    """A log line for evidence, shortened."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def occurrences(hits: list[Hit]) -> int:
    """How many times the lines were printed, counting Ray's `[repeated Nx]`."""
    return sum(h.line.repeats for h in hits)


def where(hit: Hit) -> str:
    """`line 812 (last step logged before it: 57)` or `line 812 (before the first step)`."""
    if hit.step is None:
        return f"line {hit.line_no} (no step in the log before it)"
    return f"line {hit.line_no} (last step logged before it: {hit.step})"


def signature_evidence(hits: list[Hit]) -> dict[str, Any]:
    """Evidence every log-signature finding carries."""
    first = hits[0]
    steps = sorted({h.step for h in hits if h.step is not None})
    evidence: dict[str, Any] = {
        "line": first.line_no,
        "quote": quote(first.text),
        "count": occurrences(hits),
    }
    if len(hits) > 1:
        evidence["lines"] = [h.line_no for h in hits[:20]]
    if steps:
        evidence["steps"] = steps[:50]
    return evidence


# ---- shared advice ----------------------------------------------------------------------------

GOLDEN_BUDGET_TOKENS = 24 * 1024


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def golden_micro_batch(run: Run) -> tuple[int | None, int | None]:
    """A2: (floor(24·1024 / (max_prompt_length + max_response_length)), tokens per sequence)."""
    if not run.config_segments:
        return None, None
    prompt = _num(current_value(run, "data.max_prompt_length"))
    response = _num(current_value(run, "data.max_response_length"))
    if not prompt or not response:
        return None, None
    tokens = int(prompt + response)
    return max(1, GOLDEN_BUDGET_TOKENS // tokens), tokens


def gpu_memory_bound(run: Run) -> tuple[float, str]:
    """A9: the upper end of the advised `rollout.gpu_memory_utilization` range for this run
    (the same table `check` uses)."""
    from logscope.verl_config import gpu_memory_range

    config = run.config()
    size = verl_config.model_size_b(config) if config else None
    gpus = verl_config.n_gpus(config) if config else None
    _, high, why = gpu_memory_range(size, gpus)
    return high, why


GPU_MEM_RULE = "0.4–0.5 (1 GPU), 0.3–0.4 (8-GPU FSDP), ≤ 0.65 (small models)"


def gpu_memory_advice(run: Run, why: str, always: bool = True) -> Advice | None:
    """Lower `rollout.gpu_memory_utilization` into the A9 range (or by 0.1 when already in it).

    With `always=False`, None when the current value is known and already within the range.
    """
    key = f"{RO}.gpu_memory_utilization"
    current = _num(current_value(run, key))
    bound, range_text = gpu_memory_bound(run)
    if current is not None and current <= bound and not always:
        return None
    suggested: float | None = None
    if current is not None:
        suggested = bound if current > bound else round(max(0.3, current - 0.1), 2)
        if suggested >= current:
            suggested = round(max(0.1, current - 0.05), 2)
    return advise(
        run,
        key,
        f"{why} verl gives vLLM this share of GPU memory for its KV cache; the rest must hold "
        f"the FSDP model, gradients, optimizer state and NCCL buffers."
        + (f" Advised range here: {range_text}." if run.config_segments else ""),
        f"{SEED_GRPO} §4.1; {SEED_PPO} §2.1",
        suggest=suggested,
        rule=GPU_MEM_RULE,
    )


def micro_batch_advice(run: Run, key: str, why: str, source: str) -> Advice:
    """A2: a micro batch no larger than the golden value (halved when it already is)."""
    golden, tokens = golden_micro_batch(run)
    current = _num(current_value(run, key))
    suggested: int | None = None
    if current is not None and current >= 1:
        cur = int(current)
        suggested = golden if golden is not None and cur > golden else max(1, cur // 2)
        if suggested == cur:
            suggested = None
    elif golden is not None:
        suggested = golden
    detail = ""
    if golden is not None:
        detail = (
            f" The golden formula gives floor(24·1024 / {tokens}) = {golden} for this run's lengths"
        )
        if current is not None and golden is not None and current <= golden:
            detail += f"; {int(current)} is already within it, and it still ran out of memory, so halve it"
        detail += "."
    return advise(
        run,
        key,
        f"{why}{detail}",
        source,
        suggest=suggested,
        rule="floor(24·1024 / (prompt + response length)), or half",
    )


def env_advice(name: str, suggested: Any, why: str, source: str) -> Advice:
    """Advice about the environment (`env:<name>`: a package or variable), not a config key."""
    return Advice(
        parameter=f"env:{name}",
        current=None,
        suggested=suggested,
        override=None,
        rationale=cite(why, short=True),
        source=cite(source),
    )


def halve_advice(run: Run, key: str, why: str, source: str) -> Advice:
    """Advice to halve a numeric parameter (learning rates)."""
    return advise(
        run,
        key,
        why,
        source,
        suggest=lambda cur: verl_config.round_sig(float(cur) * 0.5),
        rule="half the current value",
    )


def scale_advice(run: Run, key: str, why: str, source: str, factor: float, rule: str) -> Advice:
    """Advice to scale a numeric parameter by `factor` (no suggestion while it is unset or 0)."""
    return advise(
        run,
        key,
        why,
        source,
        suggest=lambda cur: verl_config.round_sig(float(cur) * factor) if cur else None,
        rule=rule,
    )


def grad_clip_key(run: Run, role: str = "actor") -> str:
    """The gradient-clip key: `actor.grad_clip` (legacy workers), `actor.optim.clip_grad` (0.8+);
    the SFT trainer's `optim.clip_grad` (role "sft")."""
    if role == "sft":
        return "optim.clip_grad"  # the SFT trainer's config
    modern = verl_version.at_least(run.meta.get("verl_version"), "0.8")
    base = ACT if role == "actor" else "critic"
    return f"{base}.optim.clip_grad" if modern else f"{base}.grad_clip"


def grad_clip_advice(run: Run, role: str, why: str) -> Advice | None:
    """B6: clip gradients at 0.5 (None when the run already clips at 0.5 or tighter)."""
    key = grad_clip_key(run, role)
    current = current_value(run, key)
    if current is None and run.config_segments:
        current = 1.0  # verl's default for both keys
    value = _num(current)
    if value is not None and 0 < value <= 0.5:
        return None
    advice = advise(
        run,
        key,
        f"{why} A tighter clip bounds each update (the PPO article: grad_clip 1.0 → 0.5 took grad_norm 7.16 → 4.2–4.8).",
        f"{SEED_PPO} §3.2",
        suggest=0.5 if run.config_segments else None,
        rule="0.5 (verl's default is 1.0)",
    )
    if value is not None and advice.current is None:
        advice = dataclasses.replace(advice, current=value)
    return advice


def non_finite_advice(run: Run, role: str = "actor", first_step: int | None = None) -> list[Advice]:
    """B11: what to change when a loss, KL, reward or grad norm turns NaN/inf: resume from the
    checkpoint before `first_step` (when given), halve the LR, clip, check the precision (role:
    "actor", "critic" or "sft", the SFT trainer's config keys); lower
    `rollout.gpu_memory_utilization` only when the config shows it above the advised range."""
    out: list[Advice] = []
    if first_step is not None and first_step > 1:  # (before step 1 there is no checkpoint)
        out.append(resume_advice(run, first_step))
    lr_key = {"actor": f"{ACT}.optim.lr", "critic": "critic.optim.lr", "sft": "optim.lr"}[role]
    out.append(
        halve_advice(
            run,
            lr_key,
            "A learning rate that is too high makes updates overshoot until values overflow.",
            f"{SEED_PPO} §3.3",
        )
    )
    clip = grad_clip_advice(
        run,
        role,
        "verl skips the optimizer step when the gradient norm is not finite, but a "
        "large finite gradient just before it is what usually pushes the weights to overflow.",
    )
    if clip is not None:
        out.append(clip)
    if role == "actor":
        out.append(
            advise(
                run,
                f"{RO}.dtype",
                "float16 (the only half precision on V100/T4) overflows above 65504, where "
                "bfloat16 keeps float32's range: on GPUs that have bfloat16 use it for the "
                "rollout and the actor's FSDP mixed precision. To see whether the rollout's "
                f"log-probs part from the actor's before the NaN, set {RO}.calculate_log_probs"
                f"=True (verl 0.6+ then logs {name_of(run, 'rollout_probs_diff_mean')}).",
                "pytorch:amp",
                suggest=lambda cur: "bfloat16" if str(cur).lower() in _FP16 else None,
                rule="bfloat16, not float16, where the GPU supports it",
            )
        )
    key = f"{RO}.gpu_memory_utilization"
    current = _num(current_value(run, key)) if role != "sft" else None  # (SFT: no rollout)
    if current is not None and current > gpu_memory_bound(run)[0]:
        mem = gpu_memory_advice(
            run,
            "NaN/inf losses can follow a too-large vLLM memory share: FSDP is starved and "
            "falls back to CPU offload or fails mid-computation.",
            always=False,
        )
        if mem is not None:
            out.append(mem)
    return out


_FP16 = ("float16", "fp16", "half", "torch.float16")


def resume_advice(run: Run, first_step: int) -> Advice:
    """Resume from the checkpoint saved before `first_step` (weights after it may be NaN)."""
    freq = _num(current_value(run, "trainer.save_freq"))
    before = int((first_step - 1) // freq * freq) if freq and freq > 0 else None
    folder = current_value(run, "trainer.default_local_dir")
    path = None
    if before and isinstance(folder, str) and folder and "${" not in folder:
        path = f"{folder.rstrip('/')}/global_step_{before}"
    where = f"global_step_{before}" if before else f"the last global_step_K with K < {first_step}"
    return advise(
        run,
        "trainer.resume_from_path",
        f"Weights updated from a non-finite value are garbage from then on: restart from the "
        f"checkpoint saved before step {first_step} ({where}) with trainer.resume_mode="
        "resume_path (resume_mode=auto takes the latest checkpoint, which may be after it), "
        "together with the changes below.",
        "verl:trainer/ppo/ray_trainer.py",
        suggest=path,
        rule=f"the checkpoint before step {first_step} ({where})",
    )


def clip_and_lr_advice(run: Run, role: str, clip_why: str, lr_why: str) -> list[Advice]:
    """A gradient clip for `role` (when one is worth advising), then half its learning rate."""
    clip = grad_clip_advice(run, role, clip_why)
    lr_key = {"actor": f"{ACT}.optim.lr", "critic": "critic.optim.lr", "sft": "optim.lr"}[role]
    lr = halve_advice(run, lr_key, lr_why, f"{SEED_PPO} §3.3")
    return [clip, lr] if clip is not None else [lr]


def by_step(findings: list[Finding]) -> list[Finding]:
    """Findings of several metrics in step order (metric name breaks ties)."""
    return sorted(findings, key=lambda f: (f.step or 0, f.metric or ""))


class EventDetector(Detector):
    """Base of the detectors that search each of their `concepts` on its own for events (jumps,
    spikes, lasting rises) and fold recurring ones: `_series` on a concept the run logs at
    `min_points` steps or more, `_short` on one it logs at fewer (or not at all); findings in
    step order. A rise completes within `max_rise_steps`; an event after at least
    `min_gap_steps` quiet steps recurs (`recurring`); at most `max_findings` per concept."""

    min_points: int = param(15, ge=1)
    max_rise_steps: int = param(15, ge=0)
    max_findings: int = param(3, ge=1)
    min_gap_steps: int = param(50, ge=1)

    def detect(self, run: Run) -> list[Finding]:
        out: list[Finding] = []
        for concept in self.concepts:
            s = Series.load(run, concept, min_points=self.min_points)
            out.extend(self._short(run, concept) if s is None else self._series(run, s, concept))
        return by_step(out)

    @abstractmethod
    def _series(self, run: Run, s: Series, concept: str) -> list[Finding]:
        """The findings on `concept`'s series `s`."""

    def _short(self, run: Run, concept: str) -> list[Finding]:
        """Findings on a concept logged at too few steps for `_series`: none by default."""
        return []
