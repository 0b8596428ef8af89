"""Printed rollout samples: responses that are one character repeated, or a loop of the same words."""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass

from logscope.advice import advise
from logscope.detector import Detector, param
from logscope.model import Advice, Event, Finding, Run
from logscope.sources import cite_all
from logscope.verl_config import ACT, RO
from logscope.words import plural

from ._common import quote

SAMPLE_KIND = "sample-response"
TAG = "[response]"
SRC_PRINT = "verl:workers/reward_manager/naive.py"
OOV_ISSUE = "verl#1398"  # a maintainer: vLLM sampled token 0 out of vocabulary, `!` for Qwen


@dataclass(frozen=True)
class Degenerate:
    """A printed response judged degenerate: `kind` is "repeated-character" or "loop"."""

    event: Event
    kind: str
    text: str


def response_text(event: Event) -> str:
    """The model's response in a `sample-response` event, without verl's `[response]` tag."""
    text = event.text
    if text[: len(TAG)].lower() == TAG:
        text = text[len(TAG) :]
    return text.strip()


class DegenerateResponses(Detector, code="LS142", name="degenerate-responses"):
    """The responses the reward manager printed are one character repeated (`!!!!…`) or a loop
    of the same words.

    What it detects:
        verl's reward managers print a few samples per step (`[prompt]`, `[response]`,
        `[ground_truth]`, `[score]`). A response is degenerate when one character makes at
        least `char_share` of its non-blank characters over at least `min_chars` of them (the
        `!!!!!!!!` of a sampler that keeps drawing token 0), or when it is at least
        `loop_min_chars` long and compresses `loop_ratio`× or more with zlib (a loop: the same
        sentence again and again; prose and code compress 2–3×, step-by-step arithmetic
        about 5×). Severity: `error` when every printed response is degenerate and there are at
        least two of them, `warning` otherwise.

    Why it matters:
        Rewards, advantages and the policy update are computed on these responses: when the
        model emits `!!!!` or loops, training learns from garbage. `!` is token 0 of Qwen's
        tokenizers, so a response of `!` is the sampler drawing token 0 again and again: NaN
        logits (a NaN that reached the weights or the rollout's numerics), or sampling beyond
        the tokenizer's vocabulary in the engine's padded vocabulary (verl#1398). A loop is the
        policy drifting into repetition, which a KL constraint to the reference holds back.

    Example:
        (TaskRunner pid=1234) [response] !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
        (TaskRunner pid=1234) [ground_truth] 5
        (TaskRunner pid=1234) [score] 0.0

    Advice:
        For `!!!!`: find the first NaN (losses, `actor/grad_norm`, log-probs) and resume from a
        checkpoint before it; run the rollout in bfloat16
        (`actor_rollout_ref.rollout.dtype=bfloat16`: float16 overflows); upgrade verl, whose
        vLLM rollout masks logits beyond the tokenizer's vocabulary. For a loop: keep a KL loss
        to the reference (`actor.use_kl_loss=True` with `actor.kl_loss_coef` > 0).

    Known false positives:
        Tasks whose right answer is repetitive (a long run of one symbol, a table of the same
        row): the rule reads the text only. A response that starts with a long separator line
        (`========`) is judged on all of its text, so the separator alone does not count.

    References:
        verl:workers/reward_manager/naive.py (`[prompt]`/`[response]` samples, `num_examine`);
        verl#1398 (token 0 sampled out of vocabulary is `!` for Qwen); verl#685 (`!!!!`
        outputs in GRPO); seed:grpo-pitfalls §3 (kl_loss_coef 0: gibberish, repetition).
    """

    title = "Degenerate rollout responses (one character repeated, or a loop)"
    reads = "events"
    groups = ("policy", "rollout")

    min_chars: int = param(16, ge=1)
    char_share: float = param(0.9, gt=0, le=1)
    loop_min_chars: int = param(400, ge=1)
    loop_ratio: float = param(10.0, gt=1)

    def judge(self, text: str) -> str | None:
        """ "repeated-character", "loop" or None for one response's text."""
        chars = [c for c in text if not c.isspace()]
        if len(chars) >= self.min_chars:
            top = Counter(chars).most_common(1)[0][1]
            if top >= self.char_share * len(chars):
                return "repeated-character"
        raw = text.encode("utf-8", errors="replace")
        if len(text) >= self.loop_min_chars and len(raw) >= self.loop_ratio * len(
            zlib.compress(raw, 6)
        ):
            return "loop"
        return None

    def detect(self, run: Run) -> list[Finding]:
        printed = [e for e in run.events if e.kind == SAMPLE_KIND]
        bad = []
        for event in printed:
            text = response_text(event)
            kind = self.judge(text)
            if kind is not None:
                bad.append(Degenerate(event, kind, text))
        if not bad:
            return []
        kinds = Counter(d.kind for d in bad)
        first = bad[0]
        what = {"repeated-character": "of one repeated character", "loop": "a loop"}
        found = ", ".join(f"{n} {what[k]}" for k, n in kinds.most_common())
        where = (
            "before the first step"
            if first.event.step_hint is None
            else f"after step {first.event.step_hint}"
        )
        verb = "is" if len(bad) == 1 else "are"
        message = (
            f"{len(bad)} of {plural(len(printed), 'printed response')} {verb} degenerate "
            f"({found}): the first, at line {first.event.line_no} ({where}), reads "
            f"{quote(first.text, 40)!r}."
        )
        if kinds["repeated-character"]:
            message += (
                " A response of one repeated character is the sampler drawing the same token "
                "(`!` is token 0 of Qwen's tokenizers): NaN logits, or sampling beyond the "
                "tokenizer's vocabulary."
            )
        everyone = len(bad) == len(printed) and len(bad) >= 2
        return [
            self.finding(
                message=message,
                step=first.event.step_hint,
                end_step=max((d.event.step_hint or 0 for d in bad), default=None),
                severity="error" if everyone else "warning",
                evidence={
                    "printed_responses": len(printed),
                    "degenerate": dict(kinds),
                    "lines": [d.event.line_no for d in bad[:10]],
                    "first_response": quote(first.text, 200),
                },
                advice=self._advice(run, kinds),
                references=cite_all([SRC_PRINT, OOV_ISSUE, "verl#685"]),
            )
        ]

    @staticmethod
    def _advice(run: Run, kinds: Counter[str]) -> list[Advice]:
        advice = []
        if kinds["repeated-character"]:
            advice.append(
                advise(
                    run,
                    f"{RO}.dtype",
                    "float16 overflows into inf/NaN logits; bfloat16 has float32's range. Find "
                    "the first NaN in the losses and log-probs and resume from a checkpoint "
                    "before it; a verl that masks logits beyond the tokenizer's vocabulary in "
                    f"its vLLM rollout rules out the other cause ({OOV_ISSUE}).",
                    OOV_ISSUE,
                    suggest="bfloat16",
                )
            )
        if kinds["loop"]:
            advice.append(
                advise(
                    run,
                    f"{ACT}.kl_loss_coef",
                    "A KL loss to the reference holds the policy back from drifting into "
                    "repetition (with `actor.use_kl_loss=True`); 0 lets it drift.",
                    "seed:grpo-pitfalls §3",
                    suggest=lambda v: 0.001 if not v else None,
                    rule="> 0 (0.001, verl's default) with actor.use_kl_loss=True",
                )
            )
        return advice
