"""AReaL's console: `fancy_grid` box tables of every stat, four key/value pairs a row.

`areal/utils/stats_logger.py` (`StatsLogger.commit`): `Epoch e/E Step s/S Train step n/N done.`,
then per stats dict `Stats (i/m):` and `logger.info("\\n" + tabulate_stats(stats))`, where
`areal/utils/printing.py` lays the items out in **column-major** order (item `r + c × rows` in
row r, column pair c) with `tabulate(…, floatfmt=".4e", tablefmt="fancy_grid")`. ANSI colors
(`areal/utils/logging.py` LOG_FORMAT) and merged.log's `[role]` line prefix are dropped. The
keys are AReaL's own (`ppo_actor/update/entropy/avg`, …). The step is the W&B step commit()
logs at: `max(global_step, last + 1) + i - 1`, global_step = n - 1.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from logscope.ingest import _framework as fw
from logscope.model import Run

KIND = "areal-console"
DESCRIPTION = "AReaL console log (StatsLogger fancy_grid tables)"
FRAMEWORK = "areal"

DONE_RE = re.compile(r"Epoch [0-9]+/[0-9]+ Step [0-9]+/[0-9]+ Train step ([0-9]+)/[0-9]+ done\.")
STATS_RE = re.compile(r"Stats \(([0-9]+)/([0-9]+)\):\s*$")
# merged.log: `sed 's/^/[role]     /'` on every line (areal/infra/utils/proc.py:81, width 10)
ROLE_RE = re.compile(r"^\[[A-Za-z0-9_.:-]+\] *")
BOX = "╒╞├╘"


def sniff(path: Path) -> bool:
    text = fw.head(path)
    return "╒═" in text and DONE_RE.search(text) is not None


def table_row(line: str) -> dict[str, float] | None:
    """The key/value pairs of one `│ k │ v │ k │ v │` row; None when it is garbled."""
    cells = [c.strip() for c in line.strip().strip("│").split("│")]
    if len(cells) % 2:
        return None
    out: dict[str, float] = {}
    for key, text in zip(cells[::2], cells[1::2], strict=True):
        if not key and not text:
            continue  # the short last row of a column-major table
        value = fw.number(text)
        if not key or value is None:
            return None
        out[key] = value
    return out


def read(path: Path, *, progress: Any = None) -> list[Run]:
    run, text, cols = fw.open_run(KIND, path)
    stats = run.parse_stats
    base: int | None = None  # first W&B step of the commit being read
    last = -1  # last W&B step committed
    step: int | None = None  # W&B step of the table being read
    for line_no, line in fw.lines(text, progress, stats):
        if line.startswith("["):
            line = ROLE_RE.sub("", line, count=1)
        lead = line.lstrip()[:1]
        if lead == "│" and step is not None:
            row = table_row(line)
            if row is None:
                stats.skip(line_no, line, "AReaL table row that does not parse")
            else:
                cols.add_all(step, row)
            continue
        if lead and lead in BOX:
            if lead == "╒" and step is not None:
                stats.step_lines += 1
            continue
        if "Train step" in line and (m := DONE_RE.search(line)) is not None:
            base = max(int(m.group(1)) - 1, last + 1)
            step = None
            continue
        if "Stats (" in line and (m := STATS_RE.search(line)) is not None and base is not None:
            step = base + int(m.group(1)) - 1
            last = step
            continue
        cols.event(line_no, last if last >= 0 else None, line)
    return fw.build_run(run, cols, FRAMEWORK, expected="AReaL stats table")
