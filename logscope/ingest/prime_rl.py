"""prime-rl's trainer console: a pipe-separated `Step N | … | Loss x | Entropy y | …` line a step.

`src/prime_rl/trainer/rl/train.py:638-648`:
`Step {step} | {format_time(step_time):>7} | Loss {:.4f} | Entropy {:.4f} [| Mismatch KL {:.4f}]
[| Grad. Norm {:.4f}] | LR {:.2e} | Throughput {:.0f} tokens/s | MFU {:.1f}% | Peak Mem. {:.1f} GiB
[| Max Vio {:.4f}] [| Routing Conf. {:.4f}]`, logged with loguru (`HH:mm:ss SUCCESS …`,
`utils/logger.py`). Each field is stored under the key prime-rl sends to W&B for the same
quantity (train.py:651-688): `loss/mean`, `entropy/all/mean`, `mismatch_kl/all/mean`,
`optim/grad_norm`, `optim/lr`, `perf/throughput`, `perf/mfu` (in %, as logged), `perf/peak_memory`
(GiB), `time/step` (s, from the rounded console text).

`FileMonitor` (`monitors/file.py`) drops non-finite values from metrics.jsonl and logs `Dropping
N non-finite value(s) from metrics.jsonl: key, key, …` (at most five names) right after the
step's line: those keys are NaN at that step here. The orchestrator's `Step N | … | Reward …`
lines (`orchestrator/orchestrator.py:880`) have no key without the env and agent names, and are
not read.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from logscope.ingest import _framework as fw
from logscope.model import Run

KIND = "prime-rl-console"
DESCRIPTION = "prime-rl trainer console log (Step N | 1.2s | Loss x | Entropy y | … lines)"
FRAMEWORK = "prime-rl"

#: how the trainer's and the orchestrator's step lines start (`Step N |`, N in group 1)
_STEP = r"(?:^|\s)Step ([0-9]+) \|"
STEP_RE = re.compile(_STEP + r" *([^|]*?) *\| Loss (\S+) \| Entropy (\S+)(.*)$")
STEP_START_RE = re.compile(_STEP + " ")
ORCHESTRATOR_RE = re.compile(_STEP + r" *[^|]*? *\| Reward ")
DROPPED_RE = re.compile(r"Dropping ([0-9]+) non-finite value\(s\) from \S+?: (.*)$")

#: console label → (W&B key, unit suffix that follows the number)
FIELDS: dict[str, tuple[str, str]] = {
    "Mismatch KL": ("mismatch_kl/all/mean", ""),
    "Grad. Norm": ("optim/grad_norm", ""),
    "LR": ("optim/lr", ""),
    "Throughput": ("perf/throughput", "tokens/s"),
    "MFU": ("perf/mfu", "%"),
    "Peak Mem.": ("perf/peak_memory", "GiB"),
    "Max Vio": ("max_vio/mean", ""),
    "Routing Conf.": ("routing_confidence/mean", ""),
}
_DURATION_RE = re.compile(r"([0-9.]+)(ms|d|h|m|s)")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def sniff(path: Path) -> bool:
    return any(STEP_RE.search(line) for line, _ in fw.head_lines(path, "| Entropy "))


def seconds(text: str) -> float | None:
    """`format_time`'s text (`532ms`, `12.3s`, `1m 2s`, `1h 3m`, `2d 4h`) in seconds."""
    parts = _DURATION_RE.findall(text)
    if not parts or _DURATION_RE.sub("", text).strip():
        return None
    return sum(float(n) * _UNIT_S[unit] for n, unit in parts)


def step_values(m: re.Match[str]) -> dict[str, float] | None:
    """The W&B keys and values of a matched trainer line, None when it is cut or garbled."""
    values: dict[str, float] = {}
    for key, token in (("loss/mean", m.group(3)), ("entropy/all/mean", m.group(4))):
        got = fw.number(token)
        if got is None:
            return None
        values[key] = got
    if (duration := seconds(m.group(2))) is not None:
        values["time/step"] = duration
    if not re.search(r"\| Peak Mem\. \S+ GiB", m.group(5)):
        return None  # always printed (train.py:643): without it the line was cut
    for field in m.group(5).split("|")[1:]:
        label, value = _split_unit(field.strip())
        if not label:
            continue  # a field newer than this reader
        got = fw.number(value)
        if got is None:
            return None
        values[FIELDS[label][0]] = got
    return values


def _split_unit(field: str) -> tuple[str, str]:
    """`Throughput 1234 tokens/s` → ("Throughput", "1234"); `MFU 12.3%` → ("MFU", "12.3%")."""
    for label, (_, unit) in FIELDS.items():
        if field.startswith(label + " "):
            value = field[len(label) + 1 :].strip()
            if unit and value.endswith(unit):
                value = value[: -len(unit)].strip()
            return label, value
    return "", ""


def dropped_keys(line: str) -> tuple[int, list[str]] | None:
    """(how many were dropped, the names listed) of a FileMonitor warning line."""
    m = DROPPED_RE.search(line)
    if m is None:
        return None
    return int(m.group(1)), [k.strip() for k in m.group(2).split(",") if k.strip()]


def read(path: Path, *, progress: Any = None) -> list[Run]:
    run, text, cols = fw.open_run(KIND, path)
    stats = run.parse_stats
    step: int | None = None
    orchestrator_lines = unnamed = 0
    for line_no, line in fw.lines(text, progress, stats):
        m = STEP_RE.search(line) if "Step " in line and "| Loss " in line else None
        if m is not None:
            values = step_values(m)
            if values is None:
                stats.skip(line_no, line, "prime-rl step line with a garbled field")
                continue
            step = int(m.group(1))
            stats.step_lines += 1
            cols.add_all(step, values)
            continue
        if (
            "non-finite" in line
            and (dropped := dropped_keys(line)) is not None
            and step is not None
        ):
            count, names = dropped
            unnamed += max(0, count - len(names))
            cols.add_all(step, dict.fromkeys(names, math.nan))
            continue
        if "| Reward " in line and ORCHESTRATOR_RE.search(line):
            orchestrator_lines += 1
            continue
        if "Step " in line and STEP_START_RE.search(line):
            stats.skip(line_no, line, "prime-rl step line that does not parse")
            continue
        cols.event(line_no, step, line)
    if unnamed:
        stats.notes.append(
            f"{unnamed} dropped non-finite value(s) not named (the warning lists at most five)"
        )
    if orchestrator_lines:
        stats.notes.append(
            f"{orchestrator_lines} orchestrator `Step N | … | Reward` line(s) not read"
        )
    return fw.build_run(run, cols, FRAMEWORK, expected="prime-rl `Step N | … | Loss` line")
