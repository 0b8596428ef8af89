"""Segments of one run joined into one Run: a run resumed from a checkpoint (a new console log
or W&B run per restart) and rotated logs (`verl.log.2`, `verl.log.1`, `verl.log`).

Segments belong together when they share a stitch key (rotated files: the folder and base name;
otherwise the reader, project and experiment the run names itself) and each one resumes the
previous: it starts after the previous one's first step and no later than one step past its
last (continuing or overlapping). A run started again from step 1 under the same name is a new
run, not a resume, so a sweep that kept verl's default experiment name is never joined. For
repeated steps the later segment wins (the run resumed from its checkpoint there); every
segment's config is kept. Lines are numbered as if the files were concatenated in order, and
`meta["segments"]` says which lines and steps came from which file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from logscope.ingest import ROTATED_LOG
from logscope.model import Event, ParseStats, Run, Source

#: readers whose runs can be resumed segments (TensorBoard merges a folder's event files itself;
#: JSONL names its runs after the file)
STITCHED_KINDS = ("verl-console", "wandb-offline")


def stitch_key(run: Run) -> tuple[str, ...] | None:
    """What segments of one run share (None: this run is not stitched)."""
    path = run.source.path
    if not path or path.startswith("<") or "://" in path:
        return None
    m = ROTATED_LOG.match(Path(path).name)
    if m or Path(path).with_name(Path(path).name + ".1").exists():
        base = m.group("base") if m else Path(path).name
        return ("rotated", str(Path(path).parent / base))
    project, experiment = run.meta.get("project"), run.meta.get("experiment")
    if run.source.kind not in STITCHED_KINDS or not project or not experiment:
        return None
    return ("named", run.source.kind, str(project), str(experiment))


def _rotation(run: Run) -> int:
    """Rotated files in time order: `verl.log.3` before `.2`, `.1`, then `verl.log`."""
    m = ROTATED_LOG.match(Path(run.source.path).name)
    return -int(m.group("n")) if m else 0


def chains(runs: Sequence[Run]) -> list[list[Run]]:
    """The groups of two or more runs that are segments of one run, each in time order."""
    groups: dict[tuple[str, ...], list[Run]] = {}
    for run in runs:
        key = stitch_key(run)
        if key is not None:
            groups.setdefault(key, []).append(run)
    out = []
    for key, found in groups.items():
        # steps only where there is a group (from the summary of a run known by one)
        span = {id(r): _span(r) for r in found} if len(found) > 1 else {}
        members = [r for r in found if span and span[id(r)][0]]
        if len(members) < 2:
            continue
        if key[0] == "rotated":
            members.sort(key=_rotation)
        elif len({span[id(r)][1] for r in members}) < 2:
            continue  # all start at one step: none resumes another (a sweep under one name)
        else:
            members.sort(key=lambda r: (span[id(r)][1], _start(r), r.source.path))
        chain = [members[0]]
        for run in members[1:]:
            prev = span[id(chain[-1])]
            first = span[id(run)][1]
            if prev[1] < first <= prev[2] + 1:
                chain.append(run)
                continue
            if len(chain) > 1:
                out.append(chain)
            chain = [run]
        if len(chain) > 1:
            out.append(chain)
    return out


def _span(run: Run) -> tuple[int, int, int]:
    """(number of steps, first, last) of a run; a stored run whose metrics are not read yet (from
    the cache or a pool worker) answers from its summary."""
    from logscope.store import StoredRun

    if isinstance(run, StoredRun) and not run.metrics_read():
        steps = run.summary()["steps"]
        if steps["count"]:
            return steps["count"], int(steps["first"]), int(steps["last"])
        return 0, 0, 0
    found = run.steps
    return (len(found), int(found[0]), int(found[-1])) if len(found) else (0, 0, 0)


def _start(run: Run) -> float:
    _, walls = run.wall_times()
    return float(walls.min()) if len(walls) else float(run.meta.get("start_time") or 0.0)


def stitch(segments: Sequence[Run]) -> Run:
    """One Run of `segments` (in time order): metrics with the later segment winning from its
    first step on, every config segment, events and parse stats in concatenated line numbers."""
    frames, events, configs, parts = [], [], [], []
    stats = ParseStats()
    offset = 0
    for n, seg in enumerate(segments):
        metrics = seg.metrics
        if n + 1 < len(segments):  # the next segment resumed from its first step on
            metrics = metrics.filter(pl.col("step") < int(segments[n + 1].steps[0]))
        frames.append(metrics)
        configs += seg.config_segments
        events += [Event(e.line_no + offset, e.step_hint, e.kind, e.text) for e in seg.events]
        _add_stats(stats, seg.parse_stats, offset)
        kept = metrics.get_column("step")
        parts.append(
            {
                "path": seg.source.path,
                "run_id": seg.id,
                "first_step": int(seg.steps[0]),
                "last_step": int(seg.steps[-1]),
                "steps_kept": [int(kept.min()), int(kept.max())] if len(kept) else None,
                "first_line": offset + 1,
                "last_line": offset + seg.parse_stats.lines_read,
            }
        )
        offset += seg.parse_stats.lines_read
    last = segments[-1]
    meta: dict[str, Any] = {**segments[0].meta, **last.meta, "segments": parts}
    stats.notes.append(
        f"stitched from {len(segments)} segments: "
        + ", ".join(
            f"{Path(p['path']).name} (steps {p['first_step']}–{p['last_step']})" for p in parts
        )
    )
    digest = hashlib.blake2b("\0".join(s.id for s in segments).encode(), digest_size=16)
    return Run(
        id=f"stitched-{digest.hexdigest()}",
        source=Source(last.source.kind, last.source.path),
        meta=meta,
        config_segments=configs,
        metrics=pl.concat(frames, how="vertical_relaxed") if frames else last.metrics,
        events=events,
        parse_stats=stats,
    )


def _add_stats(total: ParseStats, part: ParseStats, offset: int) -> None:
    total.lines_read += part.lines_read
    total.step_lines += part.step_lines
    total.skipped_lines += part.skipped_lines
    for line, text in part.skipped_examples:
        if len(total.skipped_examples) < ParseStats.MAX_EXAMPLES:
            total.skipped_examples.append((line + offset, text))
    for reason, count in part.skip_reasons.items():
        total.skip_reasons[reason] = total.skip_reasons.get(reason, 0) + count
    total.notes += part.notes
