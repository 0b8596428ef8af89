"""Config lint: the base of the config rules (LS501–LS522) and what several of them share.

A config rule is one class: its docstring (the catalogue entry), its parameters (`param` fields, as every detector) and
its `check(v)`, which returns `Hit`s on one config view. The `check` command runs the rules on
a launch command or YAML (a run that has not started: verl's own start-up checks are repeated),
the `analyze` command on the config dump(s) of a log (findings at the segment's first step;
identical findings in later segments are not repeated). The rules, by theme:
`config_batch` (batch sizes), `config_kl` (KL coefficients), `config_rollout` (vLLM memory,
context length and rollout batching), `config_reproducibility` (shuffle, seed), `config_keys`
(keys and types), `config_async` (DAPO's group filter, the fully-async LR schedule).
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from typing import ClassVar

from logscope.advice import cited
from logscope.config_view import ConfigView, Hit, fmt
from logscope.detector import Detector, param
from logscope.model import Advice, Finding, Run
from logscope.sources import cite, cite_all
from logscope.verl_config import ACT, GRPO_ESTIMATORS
from logscope.words import plural

from ._common import log_lines
from ._crash_story import crash_story, is_fatal

#: Source kinds of runs that have not started (a command line or a YAML file).
PREFLIGHT_KINDS = frozenset({"verl-command", "verl-yaml"})

# keys read by rules of several themes
PROMPT = "data.max_prompt_length"
RESPONSE = "data.max_response_length"
DYNAMIC = f"{ACT}.use_dynamic_bsz"
MINI = f"{ACT}.ppo_mini_batch_size"
USE_KL_LOSS = f"{ACT}.use_kl_loss"
KL_IN_REWARD = "algorithm.use_kl_in_reward"
ESTIMATOR = "algorithm.adv_estimator"

SRC_CONFIG = "verl:utils/config.py"  # validate_config (0.6+); trainer/ppo/ray_trainer.py before


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

    @abstractmethod
    def check(self, v: ConfigView) -> list[Hit]:
        """The rule's hits on one config."""

    def detect(self, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        previous: set[tuple[str, str]] = set()
        for index, (step, view) in enumerate(views(run)):
            current: set[tuple[str, str]] = set()
            for hit in self.check(view):
                key = (hit.severity, hit.message)
                current.add(key)
                if key in previous:
                    continue
                findings.append(self._finding(self.as_logged(hit, run, index), step))
            previous = current
        return findings

    def as_logged(self, hit: Hit, run: Run, segment: int) -> Hit:
        """`hit` as the run's log shows it, for config segment `segment` (here: unchanged)."""
        return hit

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


class RiskRule(ConfigRule):
    """Base for config rules whose warnings predict a failure (`Hit.predicts`): an OOM, a
    tensor-split error, a hang. On a log whose config got through `survived_steps` training
    steps without an error, that failure was not observed: the hit is lowered to info, saying
    so. The prediction stands on a run that has not started (`logscope check`) or that failed."""

    survived_steps: int = param(5, ge=1)

    def as_logged(self, hit: Hit, run: Run, segment: int) -> Hit:
        if hit.predicts is None or hit.severity == "info":
            return hit
        steps = steps_survived(run, segment)
        if steps < self.survived_steps:
            return hit
        return dataclasses.replace(
            hit,
            severity="info",
            message=f"{hit.message} This run logged {plural(steps, 'training step')} with this "
            f"config without {hit.predicts}: the risk was not observed here.",
            evidence={**hit.evidence, "steps_without_failure": steps},
        )


def steps_survived(run: Run, segment: int) -> int:
    """Training steps (steps with a metric other than validation's) logged under config
    segment `segment`, or 0 when the run has not started or an error line stands in that
    segment's part of the log before training finished."""
    if run.source.kind in PREFLIGHT_KINDS:
        return 0
    segments = run.config_segments
    seg = segments[segment]
    later = segments[segment + 1] if segment + 1 < len(segments) else None
    first_line = seg.line_no or 0
    end_line = later.line_no if later is not None and later.line_no is not None else None
    story = crash_story(run)
    for line in log_lines(run):
        if line.line_no < first_line or story.finished_before(line.line_no):
            continue
        if end_line is not None and line.line_no >= end_line:
            break
        if is_fatal(line.text):
            return 0
    training = run.metrics.filter(~run.metrics.get_column("metric").str.starts_with("val"))
    steps = training.get_column("step").unique()
    in_segment = steps >= seg.first_step
    if later is not None:
        in_segment &= steps < later.first_step
    return int(in_segment.sum())


# ---- shared by rules of several themes -----------------------------------------------------------


def seq_len(v: ConfigView) -> tuple[int | None, int | None, int | None]:
    """(max prompt length, max response length, their sum when positive)."""
    prompt, response = v.int_(PROMPT), v.int_(RESPONSE)
    if prompt is None or response is None or prompt + response <= 0:
        return prompt, response, None
    return prompt, response, prompt + response


def both_set(v: ConfigView, legacy: str, per_gpu: str) -> Hit:
    """verl's refusal of a legacy global micro batch set together with its per-GPU key."""
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


def is_grpo(v: ConfigView) -> bool:
    """The advantage estimator is one of GRPO's (group-relative advantage)."""
    return str(v.get(ESTIMATOR)) in GRPO_ESTIMATORS
