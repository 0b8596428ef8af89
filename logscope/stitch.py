"""Segments of one run joined into one Run: a run resumed from a checkpoint (a new console log
or W&B run per restart), rotated logs (`verl.log.2`, `verl.log.1`, `verl.log`), and the
per-node folders of a multi-node run (`node0/`, `node1/`, …: the head node's log holds the
steps, the others' logs only what their workers printed: tracebacks, OOMs, NCCL errors).

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
import re
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


#: a folder of one node of a multi-node run: `node0`, `node-1`, `worker_3`, `rank2`, `host-07`
NODE_DIR = re.compile(r"^(?:node|host|worker|rank|machine)[-_.]?\d+$", re.IGNORECASE)


def node_key(run: Run) -> str | None:
    """The folder holding a run's node folders (None: its path has no node folder)."""
    path = run.source.path
    if not path or path.startswith("<") or "://" in path:
        return None
    parts = Path(path).parts
    for i in range(len(parts) - 2, 0, -1):  # the nearest node folder above the file
        if NODE_DIR.match(parts[i]):
            return str(Path(*parts[:i]))
    return None


def node_groups(runs: Sequence[Run]) -> list[list[Run]]:
    """The runs of each multi-node run, head first: runs under sibling node folders of one
    folder, exactly one of which has steps (the head, where the trainer logs); the others'
    logs hold no steps. Folders where several nodes log steps are separate runs."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        key = node_key(run)
        if key is not None:
            groups.setdefault(key, []).append(run)
    out = []
    for members in groups.values():
        heads = [r for r in members if _span(r)[0]]
        if len(members) > 1 and len(heads) == 1:
            out.append([heads[0], *(r for r in members if r is not heads[0])])
    return out


def join_nodes(runs: Sequence[Run]) -> Run:
    """The head node's run (`runs[0]`) with the other nodes' events and parse stats, their lines
    numbered after the head's; `meta["nodes"]` says which file each node's part came from."""
    head = runs[0]
    events = list(head.events)
    stats = ParseStats()
    _add_stats(stats, head.parse_stats, 0)
    nodes = [{"path": head.source.path, "role": "head", "events": len(head.events)}]
    offset = head.parse_stats.lines_read
    last = _span(head)[2]  # a worker's log has no steps: its events are placed at the head's last
    for run in runs[1:]:
        events += [
            Event(e.line_no + offset, last if e.step_hint is None else e.step_hint, e.kind, e.text)
            for e in run.events
        ]
        _add_stats(stats, run.parse_stats, offset)
        nodes.append({"path": run.source.path, "role": "worker", "events": len(run.events)})
        offset += run.parse_stats.lines_read
    stats.notes.append(
        f"joined {len(runs)} nodes: "
        + ", ".join(f"{Path(n['path']).parent.name}/{Path(n['path']).name}" for n in nodes)
        + f" (the other nodes' lines carry no steps: their events are placed at step {last}, "
        "the head's last)"
    )
    digest = hashlib.blake2b("\0".join(r.id for r in runs).encode(), digest_size=16)
    configs = head.config_segments or next(
        (r.config_segments for r in runs if r.config_segments), []
    )
    return Run(
        id=f"nodes-{digest.hexdigest()}",
        source=Source(head.source.kind, head.source.path),
        meta={**head.meta, "nodes": nodes},
        config_segments=list(configs),
        metrics=head.metrics,
        events=events,
        parse_stats=stats,
    )


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
