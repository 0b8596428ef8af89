"""NeMo-RL's GRPO/PPO console: `📊 Training Results:` blocks of `  • Label: value` bullets.

`nemo_rl/algorithms/grpo.py` (`grpo_train`): a `===== Step n/N =====` header per step (n counts
within the epoch, reset by each `===== Epoch e/E =====`), then `📊 Training Results:` (Loss,
Generation KL Error, Avg Reward, Mean Generation Length, `.4f`: grpo.py:3703-3719),
`⏱️  Timing:` (`  • name: 1.23s (45.6%)`: grpo.py:3721-3745), `🔍 Performance Metrics:` (`algorithms/utils.py`
`print_performance_metrics`) and, on validation steps, `📊 Validation Results:`. Each bullet is
stored under the key NeMo-RL logs for it (grpo.py:3758-3770: prefixes `train/`, `timing/train/`,
`performance/`, `validation/`, `timing/validation/`) at its W&B step, total_steps + 1 (steps of
earlier epochs added). Percentages that NeMo-RL logs as ratios are divided by 100.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from logscope.ingest import _framework as fw
from logscope.model import Run

KIND = "nemo-rl-console"
DESCRIPTION = "NeMo-RL console log (📊 Training Results: blocks)"
FRAMEWORK = "nemo-rl"
MARKER = "📊 Training Results:"

#: section title (after its emoji) → the prefix its bullets are logged under
SECTIONS = {
    "Training Results": "train",
    "Timing": "timing/train",
    "Performance Metrics": "performance",
    "Validation Results": "validation",
    "Validation Timing": "timing/validation",
}
SECTION_RE = re.compile(r"^[^\w\s]+\s+(" + "|".join(SECTIONS) + r"):$")
#: section → printed label → the key it is logged under ("": printed, not logged); a timing
#: label not listed is the timer's name
LABELS: dict[str, dict[str, str]] = {
    "train": {
        "Loss": "train/loss",
        "Draft Loss": "train/draft_loss",
        "Generation KL Error": "train/gen_kl_error",
        "Avg Reward": "train/reward",
        "Avg Filtered Reward": "train/filtered_reward",
        "Avg Total Reward": "train/reward",
        "Mean Generation Length": "train/mean_gen_tokens_per_sample",
        # async GRPO (grpo.py:5323-5330) and PPO (ppo.py:1928-1942) blocks
        "Buffer Size": "train/buffer_size",
        "Avg Trajectory Age": "train/avg_trajectory_age",
        "Policy Loss": "train/loss",
        "Critic Loss": "train/critic/loss",
        "Critic Grad Norm": "train/critic/grad_norm",
        "Critic LR": "train/critic/lr",
        "Critic Clip Frac": "train/critic/vf_clipfrac",
    },
    "timing/train": {"Total step time": "timing/train/total_step_time"},
    "performance": {
        "Mean Total Tokens per Sample": "train/mean_total_tokens_per_sample",
        "Average Token Imbalance": "performance/average_token_imbalance",
        "Training Worker Idle Time Ratio": "performance/training_worker_idle_time_ratio",
        "E2E (Samples/sec/gpu)": "performance/samples_per_sec_per_gpu",
        "E2E (Tokens/sec/gpu)": "performance/tokens_per_sec_per_gpu",
        "Policy Training (Tokens/sec/gpu)": "performance/policy_training_tokens_per_sec_per_gpu",
        "Policy and Reference Logprobs (Tokens/sec/gpu)": "performance/policy_and_reference_logprobs_tokens_per_sec_per_gpu",
        "Training Worker Group (Tokens/sec/gpu)": "performance/training_worker_group_tokens_per_sec_per_gpu",
        "Generation Worker Group (Tokens/sec/gpu)": "performance/generation_tokens_per_sec_per_gpu",
        "E2E (Samples/sec)": "performance/samples_per_sec",
        "E2E (Tokens/sec)": "performance/tokens_per_sec",
        "Training Worker Group (Tokens/sec)": "performance/training_worker_group_tokens_per_sec",
        "Generation Worker Group (Tokens/sec)": "performance/generation_tokens_per_sec",
        "Training Model Floating Point Utilization": "performance/train_fp_utilization",
    },
    "validation": {
        "Accuracy": "validation/accuracy",
        "Average response length": "validation/avg_length",
        "Samples processed": "",  # printed, not logged
    },
    "timing/validation": {"Total validation time": "timing/validation/total_validation_time"},
}
#: the keys whose bullet is printed in % (logged as the fraction)
PERCENT = {
    "performance/average_token_imbalance",
    "performance/training_worker_idle_time_ratio",
    "performance/train_fp_utilization",
}
HEADER_RE = re.compile(r"^={5,} (Epoch|Step) ([0-9]+)/([0-9]+) ={5,}$")
BULLET_RE = re.compile(r"^\s*(?:•|-)\s+(.+?):\s+(\S+)")
FLOPS_RE = re.compile(r"\(([-0-9.e+naif]+) TFLOPS per rank\)")


def sniff(path: Path) -> bool:
    return MARKER in fw.head(path)


def _key(section: str, label: str) -> tuple[str, float] | None:
    """(logged key, scale) of a bullet; None when the label has no logged key."""
    if section == "performance" and label == "Training FLOPS":
        return ("performance/train_flops_per_gpu", 1.0)  # the per-rank number in parentheses
    key = LABELS[section].get(label)
    if key is None and section.startswith("timing/"):
        key = f"{section}/{label}"  # `  • policy_training: 1.23s (45.6%)`
    if not key:
        return None
    return key, 0.01 if key in PERCENT else 1.0


def _number(key: str, token: str, rest: str) -> float | None:
    if key == "performance/train_flops_per_gpu":
        m = FLOPS_RE.search(rest)
        return fw.number(m.group(1)) if m else None
    return fw.number(token.removesuffix("s") if key.startswith("timing/") else token)


def read(path: Path, *, progress: Any = None) -> list[Run]:
    run, text, cols = fw.open_run(KIND, path)
    stats = run.parse_stats
    step, in_epoch, offset, last_n = 0, 0, 0, 0
    section: str | None = None
    unknown: set[str] = set()
    for line_no, line in fw.lines(text, progress, stats):
        stripped = line.strip()
        if stripped.endswith(":") and (title := SECTION_RE.match(stripped)) is not None:
            section = SECTIONS[title.group(1)]
            if section == "train":
                stats.step_lines += 1
            continue
        if (h := HEADER_RE.match(stripped)) is not None:
            section = None
            if h.group(1) == "Step":
                in_epoch = int(h.group(2))
                if in_epoch <= last_n:  # a new epoch restarted the count
                    offset += last_n
                last_n = in_epoch
                step = offset + in_epoch
            continue
        if section is not None and (b := BULLET_RE.match(line)) is not None:
            label, token = b.group(1), b.group(2)
            key = _key(section, label)
            if key is None:
                if label not in LABELS[section] and fw.number(token.rstrip("s")) is not None:
                    unknown.add(f"{section}: {label}")
                continue
            value = _number(key[0], token, line[b.end() :])
            if value is None and token == "N/A":  # PPO's `metrics.get('loss', 'N/A')`
                continue
            if value is None:
                stats.skip(line_no, line, "NeMo-RL bullet whose value does not parse")
                continue
            cols.add(step, key[0], value * key[1])
            continue
        if section is not None and stripped and not line.startswith(" "):
            section = None
        cols.event(line_no, step, line)
    if unknown:
        stats.notes.append(
            "NeMo-RL bullets without a known logged key, not read: " + ", ".join(sorted(unknown))
        )
    stats.notes.append(
        "NeMo-RL steps: the W&B step (total_steps + 1), the console's per-epoch count plus the "
        "steps of earlier epochs; a log that starts from a resumed checkpoint starts at its count"
    )
    return fw.build_run(run, cols, FRAMEWORK, expected="NeMo-RL `📊 Training Results:` block")
