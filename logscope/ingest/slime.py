"""slime's console: Python dict reprs behind its logging prefix, on two step axes.

`[time] file.py:line - <what> N: {...}` (format of `slime/observability/logging_utils.py:20`):
- `step N: {'train/pg_loss': …}` (`backends/megatron_utils/model.py:918`; `critic-step N` for
  the critic): one line per **train step**, N = rollout_id × num_steps_per_rollout + step_id
  (model.py:879), also logged as `train/step`;
- `rollout N:`, `perf N:`, `eval N:`, `multi_turn N:`, `passrate N:` (`observability/
  train_metric_utils.py:135,401`, `rollout_metrics.py:247,268`): one line per **rollout id** N.

The Run has one `step` column, the train step. A rollout-axis line of rollout id R goes to train
step R × k, k = num_steps_per_rollout: slime's own rule when it puts rollout metrics on the train
axis (`metric_utils.compute_rollout_step` with `--wandb-always-use-train-step`:
R × rollout_batch_size × n_samples_per_prompt // global_batch_size). k is read from the log:
the first train step after the train actor's `rollout R` line is R × k. k = 1 (the synchronous
default, one train step per rollout) makes rollout ids and train steps the same numbers.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from logscope.ingest import _framework as fw
from logscope.model import Run

KIND = "slime-console"
DESCRIPTION = "slime console log (step N: {...} / rollout N: {...} dict lines)"
FRAMEWORK = "slime"

ROLLOUT_AXIS = ("rollout", "perf", "eval", "multi_turn", "passrate")
LINE_RE = re.compile(
    r"\.py:[0-9]+ - (?:[A-Za-z0-9_]+-)?(step|" + "|".join(ROLLOUT_AXIS) + r") ([0-9]+): (\{.*)$"
)


def sniff(path: Path) -> bool:
    return any(LINE_RE.search(line) for line, _ in fw.head_lines(path, ": {'"))


def steps_per_rollout(records: list[tuple[str, int]]) -> tuple[int, str]:
    """(k, how it was found) from the (kind, N) records in log order."""
    guesses: Counter[int] = Counter()
    last_rollout: int | None = None
    for kind, n in records:
        if kind == "rollout":
            last_rollout = n
        elif kind == "step" and last_rollout is not None:
            if last_rollout > 0 and n % last_rollout == 0 and n > 0:
                guesses[n // last_rollout] += 1
            last_rollout = None
    if not guesses:
        return 1, "no train step after a `rollout N` line with N > 0; k = 1 assumed"
    (k, count), *others = guesses.most_common()
    how = f"from the first train step after {count} `rollout N` line(s)"
    if others:
        how += f" (other ratios seen: {', '.join(str(o) for o, _ in others)})"
    return k, how


def read(path: Path, *, progress: Any = None) -> list[Run]:
    run, text, cols = fw.open_run(KIND, path)
    stats = run.parse_stats
    records: list[tuple[str, int, dict[str, float]]] = []
    train_step: int | None = None
    for line_no, line in fw.lines(text, progress, stats):
        m = LINE_RE.search(line) if ": {" in line else None
        if m is None:
            cols.event(line_no, train_step, line)
            continue
        values = fw.parse_dict_repr(m.group(3))
        if values is None:
            stats.skip(line_no, line, "slime metrics line that is not a whole dict")
            continue
        stats.step_lines += 1
        records.append((m.group(1), int(m.group(2)), values))
        if m.group(1) == "step":
            train_step = int(m.group(2))
    k, how = steps_per_rollout([(kind, n) for kind, n, _ in records])
    for kind, n, values in records:
        cols.add_all(n if kind == "step" else n * k, values)
    stats.notes.append(
        f"slime step axes: train lines (`step N`) at train step N; rollout-axis lines "
        f"({', '.join(ROLLOUT_AXIS)}) of rollout id R at train step R x {k} "
        f"(k = num_steps_per_rollout, {how})"
    )
    run.meta["step_axis"] = "train/step"
    run.meta["steps_per_rollout"] = k
    return fw.build_run(run, cols, FRAMEWORK, expected="slime `step N: {...}` line")
