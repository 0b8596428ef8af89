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

from abc import abstractmethod
from typing import ClassVar

from logscope.advice import cited
from logscope.config_view import ConfigView, Hit, fmt
from logscope.detector import Detector
from logscope.model import Advice, Finding, Run
from logscope.sources import cite, cite_all
from logscope.verl_config import ACT, GRPO_ESTIMATORS

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
