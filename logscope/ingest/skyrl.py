"""SkyRL's console: loguru `Step N: ` followed by a multi-line `pprint` of the metrics dict.

`skyrl/train/utils/tracking.py:182-204` (`ConsoleLogger.log`): `logger.info(f"Step {step}: \\n"
f"{pprint.pformat(stringify_floats(data))}")`, where `stringify_floats` turns every float into a
4-decimal string (`'0.1234'`, `'nan'`); ints stay ints. pprint sorts the keys and writes one
`'key': value` per line when the dict is wider than 80 columns. Keys are SkyRL's own
(`policy/…`, `reward/…`, `generate/…`, `timing/…`), as they reach W&B.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from logscope.ingest import _framework as fw
from logscope.model import Run

KIND = "skyrl-console"
DESCRIPTION = "SkyRL console log (loguru `Step N:` + pprint of the metrics dict)"
FRAMEWORK = "skyrl"

# `2026-01-01 12:00:00.123 | INFO     | skyrl.train.utils.tracking:log:189 - Step 3: `
HEADER_RE = re.compile(r"\|\s*INFO\s*\|\s*[\w.<>-]+:[\w<>-]+:[0-9]+ - Step ([0-9]+):\s*$")
# a loguru line: where an unfinished block has certainly ended
LOGURU_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ \| ")
MAX_BLOCK_LINES = 10_000


def sniff(path: Path) -> bool:
    return any(
        HEADER_RE.search(line) and following.startswith("{")
        for line, following in fw.head_lines(path, " - Step ")
    )


def read(path: Path, *, progress: Any = None) -> list[Run]:
    run, text, cols = fw.open_run(KIND, path)
    stats = run.parse_stats
    step: int | None = None  # the step whose block is being read
    block: list[str] = []
    start = 0
    last: int | None = None

    def give_up(reason: str) -> None:
        stats.skip(start, "\n".join(block)[:200], reason)

    for line_no, line in fw.lines(text, progress, stats):
        if step is not None:
            if not block and not line.startswith("{"):
                stats.skip(start, f"Step {step}:", "SkyRL step header without its dict")
                step = None
            elif LOGURU_RE.match(line) or len(block) > MAX_BLOCK_LINES:
                give_up("SkyRL metrics block cut off")
                step = None
            else:
                block.append(line)
                if line.endswith("}"):
                    values = fw.parse_dict_repr("\n".join(block))
                    if values is not None:
                        stats.step_lines += 1
                        cols.add_all(step, values)
                        last, step = step, None
                continue
        m = HEADER_RE.search(line) if " - Step " in line else None
        if m is not None:
            step, block, start = int(m.group(1)), [], line_no
            continue
        cols.event(line_no, last, line)
    if step is not None and block:
        give_up("SkyRL metrics block cut off at the end of the file")
    return fw.build_run(run, cols, FRAMEWORK, expected="SkyRL `Step N:` metrics block")
