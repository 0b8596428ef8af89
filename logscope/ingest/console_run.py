"""Assemble a Run from what the console parser (and the bulk path) collected; guess the metadata.

`ConsoleParser.result()` hands over a `ParsedLog`, the bulk path of console.py a `FastPart`;
`build_run` takes both. This module imports nothing from the parser.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from logscope import verl_version
from logscope.ingest import verl_text as vt
from logscope.ingest._common import nest_dotted
from logscope.ingest.pasted import LooseRecord
from logscope.model import ConfigSegment, Event, ParseStats, Run, Source

ROWS_SCHEMA: dict[str, pl.DataType] = {
    "seq": pl.Int64(),
    "step": pl.Int64(),
    "metric": pl.String(),
    "value": pl.Float64(),
}
THREE_DECIMALS_RESOLUTION = 0.0005


@dataclass
class ValueCounts:
    """What the values of the step lines read look like (the verl version guess asks)."""

    step_lines: int = 0
    values: int = 0
    not_three_decimals: int = 0  # values not printed as `.3f` (verl ≤ 0.4 prints all that way)
    numpy_wrapped: int = 0  # values printed as `np.float64(…)` (verl 0.9)

    def __add__(self, other: ValueCounts) -> ValueCounts:
        return ValueCounts(
            self.step_lines + other.step_lines,
            self.values + other.values,
            self.not_three_decimals + other.not_three_decimals,
            self.numpy_wrapped + other.numpy_wrapped,
        )


@dataclass
class FastPart:
    """What the bulk path parsed itself: metric rows and step marks, plus a few flags."""

    frames: list[pl.DataFrame] = field(default_factory=list)  # seq, step, metric, value
    mark_seqs: list[np.ndarray] = field(default_factory=list)  # seq and step of each step line
    mark_steps: list[np.ndarray] = field(default_factory=list)
    ray_actors: set[str] = field(default_factory=set)  # names in the Ray prefixes of step lines
    metric_names: set[str] = field(default_factory=set)
    saw_progress: bool = False  # a `Training Progress` bar
    counts: ValueCounts = field(default_factory=ValueCounts)


class ConfigDump(NamedTuple):
    """A config dict verl pprinted (at its first line)."""

    seq: int
    line_no: int
    config: dict[str, Any]


@dataclass(frozen=True)
class ParsedLog:
    """What `ConsoleParser` read, as `build_run` takes it: a snapshot, which feeding the parser
    more lines does not change (only the last event may still grow by a line a copy cut)."""

    lines_read: int
    notes: tuple[str, ...]
    # step lines
    frames: tuple[pl.DataFrame, ...]  # their metric rows (seq, step, metric, value), none empty
    mark_seqs: np.ndarray  # seq and step of each step line, in the order read
    mark_steps: np.ndarray
    unnumbered: tuple[int, ...]  # seqs of records that lost their `step:N`, read before any step
    counts: ValueCounts
    incomplete_step_lines: int  # whose last item was cut off (ignored)
    # lines that looked like metrics but could not be read
    skipped_lines: int
    skipped_examples: tuple[tuple[int, str, str], ...]  # (line_no, text, reason)
    skip_reasons: dict[str, int]
    # everything else
    events: tuple[Event, ...]
    event_counts: dict[str, int]  # by kind, repeats included
    dropped_events: dict[str, int]  # by kind: over the caps, not kept
    config_dumps: tuple[ConfigDump, ...]
    unparsed_dumps: int
    ray_actors: frozenset[str]
    saw_progress: bool
    bar_before_steps: tuple[int, int, int, str] | None  # the last progress bar before any step
    logger_lines: bool  # verl 0.9's `LEVEL:asctime:message` lines
    log_date: str | None  # the latest day (YYYY-MM-DD) such a line shows
    total_training_steps: int | None
    train_dataloader_size: int | None  # `Size of train dataloader: N`: steps per epoch
    run_end: dict[str, dict[str, int | None]]  # where the text shows training ended
    overrides: dict[str, Any]  # from Hydra's `Error executing job with overrides`
    wandb_summary: dict[str, float]
    wandb_line_no: int | None
    wandb_history: tuple[str, ...]  # keys W&B's run history drew as sparklines (not numbers)
    wandb_last_step: int | None  # the last history step W&B uploaded
    loose_steps: tuple[LooseRecord, ...]  # metrics in a layout that is not verl's
    undecodable: int  # byte sequences replaced (not UTF-8)
    nul_bytes: int  # removed


def build_run(
    parsed: ParsedLog, source: Source, run_id: str | None, fast: FastPart | None = None
) -> Run:
    """The Run of what the parser read (`parsed`) and the bulk path parsed itself (`fast`)."""
    fast = fast or FastPart()
    frames = [f for f in fast.frames if f.height] + list(parsed.frames)
    rows = pl.concat(frames) if frames else rows_frame([], [], [], [])  # not in file order: fine
    names = set(fast.metric_names)
    for frame in parsed.frames:
        names.update(frame.get_column("metric").unique().to_list())
    mark_seq = np.concatenate([*fast.mark_seqs, parsed.mark_seqs]).astype(np.int64)
    mark_step = np.concatenate([*fast.mark_steps, parsed.mark_steps]).astype(np.int64)
    order = np.argsort(mark_seq, kind="stable")
    mark_seq, mark_step = mark_seq[order], mark_step[order]
    counts = parsed.counts + fast.counts

    step_lines = counts.step_lines
    notes: list[str] = []
    pasted = _pasted_steps(parsed, notes) if step_lines == 0 else None
    if pasted is not None:
        rows = pl.concat([rows, pasted.rows])
        names.update(pasted.rows.get_column("metric").unique().to_list())
        marks = pasted.rows.select("seq", "step").unique().sort("seq")
        mark_seq = marks.get_column("seq").to_numpy()
        mark_step = marks.get_column("step").to_numpy()
        step_lines += pasted.records
    if step_lines == 0 and parsed.bar_before_steps is not None:
        notes.append(_bar_note(*parsed.bar_before_steps))
    events: Sequence[Event] = parsed.events
    if pasted is not None:
        events = _hint_pasted_steps(events, mark_seq, mark_step)
    if parsed.unnumbered:
        rows, mark_step, events = _renumber(parsed, rows, mark_seq, mark_step, notes)

    run = Run(
        id=run_id or "",
        source=source,
        config_segments=_segments(parsed.config_dumps, mark_seq, mark_step),
        metrics=_latest_per_step(rows, mark_step).select(
            "step", "metric", "value", pl.lit(None, dtype=pl.Float64).alias("wall_time")
        ),
        events=sorted(events, key=lambda e: e.line_no),
        parse_stats=_stats(parsed, step_lines),
    )
    run.parse_stats.notes[:0] = notes
    signals = {
        "three_decimals": counts.values > 0 and counts.not_three_decimals == 0,
        "numpy_wrappers": counts.numpy_wrapped > 0,
        "ray_actors": sorted(parsed.ray_actors | fast.ray_actors),
        "training_progress": parsed.saw_progress or fast.saw_progress,
        "logger_lines": parsed.logger_lines,
        "log_date": parsed.log_date,
    }
    run.meta = _meta(run, names, parsed, signals, pasted.layout if pasted else None)
    if pasted is not None:  # where training ended, after which pasted step
        for end in run.meta.get("run_end", {}).values():
            if end.get("after_step") is None:
                end["after_step"] = _step_before(end["line"], mark_seq, mark_step)
    return run


def _latest_per_step(rows: pl.DataFrame, mark_step: np.ndarray) -> pl.DataFrame:
    """A restart logged some steps again: the latest value of each (step, metric) wins."""
    uniq, n_marks = np.unique(mark_step, return_counts=True)
    if not (n_marks > 1).any():
        return rows
    again = pl.col("step").is_in(uniq[n_marks > 1].tolist())
    latest = rows.filter(again).sort("seq").unique(["step", "metric"], keep="last")
    return pl.concat([rows.filter(~again), latest])


def _segments(
    dumps: tuple[ConfigDump, ...], mark_seq: np.ndarray, mark_step: np.ndarray
) -> list[ConfigSegment]:
    """Each config dump, in force from the first step logged after it."""
    segments = []
    for dump in dumps:
        i = int(np.searchsorted(mark_seq, dump.seq, side="right"))
        if i < len(mark_step):
            first = int(mark_step[i])
        elif i > 0:
            first = int(mark_step[i - 1]) + 1
        else:
            first = 0
        segments.append(ConfigSegment(first, dump.config, dump.line_no))
    return segments


class PastedSteps(NamedTuple):
    layout: str  # "non-native" (`key: value` lines and the like) or "wandb-summary"
    records: int  # steps read
    rows: pl.DataFrame  # seq, step, metric, value


def _pasted_steps(parsed: ParsedLog, notes: list[str]) -> PastedSteps | None:
    """With no verl step line at all: metrics pasted in another layout (`key: value` lines), or
    else W&B's run summary (the final values), as step rows."""
    records = [(r.line_no, r.step, r.pairs) for r in parsed.loose_steps]
    if records:
        layout = "non-native"
        notes.append(
            f"no verl step line: read {len(records)} step(s) from metrics in another layout "
            f"(key: value pairs from line {records[0][0]}; not verl's `step:N - key:value`)"
        )
    elif parsed.wandb_summary:
        layout = "wandb-summary"
        summary = parsed.wandb_summary
        logged = "training/global_step" in summary or "_step" in summary
        marked = None if logged else parsed.wandb_last_step
        records = [(parsed.wandb_line_no or 0, marked, summary)]
    else:
        if parsed.wandb_history:
            notes.append(_history_note(parsed.wandb_history, parsed.wandb_last_step))
        return None
    seqs, steps, keys, values = [], [], [], []
    previous = 0
    for line_no, marked, pairs in records:
        # verl's own step, else W&B's `_step` (verl logs with step=global_steps)
        logged = pairs.get("training/global_step", pairs.get("_step"))
        if marked is not None:
            step = marked
        elif logged is not None and math.isfinite(logged):
            step = int(logged)
        else:
            step = previous + 1
        previous = step
        for key, value in pairs.items():
            if key.startswith("_"):
                continue  # W&B's own `_step`, `_runtime`, `_timestamp`
            seqs.append(line_no << vt.SUB_BITS)
            steps.append(step)
            keys.append(key)
            values.append(value)
    if layout == "wandb-summary":
        told = " (W&B's last uploaded history step)" if records[0][1] is not None else ""
        notes.append(
            f"no verl step line: read W&B's run summary (final values) as step {step}{told}"
        )
    return PastedSteps(layout, len(records), rows_frame(seqs, steps, keys, values))


def _hint_pasted_steps(
    events: Sequence[Event], mark_seq: np.ndarray, mark_step: np.ndarray
) -> list[Event]:
    """Events the parser gave no step (it saw no verl step line) get the last pasted step
    before them, so a crash after pasted metrics reads as after that step."""
    return [
        replace(e, step_hint=_step_before(e.line_no, mark_seq, mark_step))
        if e.step_hint is None
        else e
        for e in events
    ]


def _step_before(line_no: int, mark_seq: np.ndarray, mark_step: np.ndarray) -> int | None:
    """The step of the last step mark at or before line `line_no` (None: none)."""
    at = np.searchsorted(mark_seq, line_no << vt.SUB_BITS, side="right") - 1
    return int(mark_step[at]) if at >= 0 else None


def _bar_note(line_no: int, done: int, total: int, elapsed: str) -> str:
    """verl's progress bar when no step line was read: how far training got, in how long."""
    return (
        f"no step line, but verl's progress bar (line {line_no}) shows {done} of {total} "
        f"training steps done after {elapsed}: when the text ends the run is inside step "
        f"{done + 1}; if it stays there it is stalled (`py-spy dump --pid` of the TaskRunner, or "
        "`ray stack`, shows where)"
    )


def _history_note(keys: tuple[str, ...], last_step: int | None) -> str:
    """What W&B's `Run history:` block holds: drawings of the series, not their values."""
    shown = ", ".join(keys[:3]) + (", …" if len(keys) > 3 else "")
    upto = f" (W&B uploaded them up to step {last_step})" if last_step else ""
    return (
        f"W&B's run history draws {len(keys)} metric(s) as sparklines ({shown}){upto}: a "
        "drawing of each series, not its values, so not read; the run's own log or W&B "
        "files have them"
    )


def _renumber(
    parsed: ParsedLog,
    rows: pl.DataFrame,
    mark_seq: np.ndarray,
    mark_step: np.ndarray,
    notes: list[str],
) -> tuple[pl.DataFrame, np.ndarray, list[Event]]:
    """Step records whose `step:N` was cut off before any numbered step were numbered from 1; with
    a numbered step after them, they are the steps just before it (and so are the step hints of
    the events between)."""
    unnumbered = list(parsed.unnumbered)
    events = list(parsed.events)
    provisional = np.isin(mark_seq, np.array(unnumbered, dtype=np.int64))
    later = np.flatnonzero(~provisional & (mark_seq > max(unnumbered)))
    if len(later):
        shift = int(mark_step[later[0]]) - 1 - int(mark_step[provisional].max())
        if shift > 0:
            old = rows.get_column("seq").is_in(unnumbered)
            rows = rows.with_columns(
                step=pl.when(old).then(pl.col("step") + shift).otherwise(pl.col("step"))
            )
            mark_step = np.where(provisional, mark_step + shift, mark_step)
            last_line = int(mark_seq[later[0]]) >> vt.SUB_BITS
            first_line = min(unnumbered) >> vt.SUB_BITS
            events = [
                replace(e, step_hint=e.step_hint + shift)
                if first_line < e.line_no < last_line and e.step_hint is not None
                else e
                for e in events
            ]
    numbers = sorted({int(x) for x in mark_step[provisional]})
    notes.append(
        f"{len(numbers)} step record(s) at the start had their `step:N` cut off; read as "
        + (f"step {numbers[0]}" if len(numbers) == 1 else f"steps {numbers[0]}–{numbers[-1]}")
    )
    return rows, mark_step, events


def looks_like_verl(run: Run) -> bool:
    """Step records, a config dump or any line that matters (an event)."""
    return bool(run.parse_stats.step_lines or run.config_segments or run.events)


def note_if_nothing_found(run: Run) -> None:
    """Say plainly when a text holds no verl output (the report is then empty, not an error)."""
    if looks_like_verl(run):
        return
    n = run.parse_stats.lines_read
    text = (
        "empty file"
        if n == 0
        else (f"no verl step lines or errors found in {n} line{'s' if n != 1 else ''}")
    )
    run.parse_stats.notes.insert(0, text)


def rows_frame(
    seqs: list[int], steps: list[int], keys: list[str], values: list[float]
) -> pl.DataFrame:
    """Metric rows held in Python lists, as a frame (seq, step, metric, value)."""
    return pl.DataFrame(
        {"seq": seqs, "step": steps, "metric": keys, "value": values}, schema=ROWS_SCHEMA
    )


def _stats(parsed: ParsedLog, step_lines: int) -> ParseStats:
    stats = ParseStats(
        lines_read=parsed.lines_read,
        step_lines=step_lines,
        skipped_lines=parsed.skipped_lines,
        skipped_examples=[
            (n, t) for n, t, _ in sorted(parsed.skipped_examples)[: ParseStats.MAX_EXAMPLES]
        ],
        notes=list(parsed.notes),
        skip_reasons=dict(parsed.skip_reasons),
    )
    for n, what in (
        (parsed.incomplete_step_lines, "step line(s) ended in an incomplete item (ignored)"),
        (parsed.undecodable, "undecodable byte sequence(s) replaced (not UTF-8)"),
        (parsed.nul_bytes, "NUL byte(s) removed"),
        (parsed.unparsed_dumps, "config dump(s) could not be parsed"),
    ):
        if n:
            stats.notes.append(f"{n} {what}")
    for kind, n in sorted(parsed.dropped_events.items()):
        stats.notes.append(f"{n} more '{kind}' event(s) not kept (repeated)")
    return stats


def _meta(
    run: Run, names: set[str], parsed: ParsedLog, signals: dict[str, Any], layout: str | None
) -> dict[str, Any]:
    """Metadata: the verl version guess (from `signals`, what the text showed), the algorithm,
    the project's names and the notable lines."""
    # without a config dump, the Hydra overrides of a crashed run tell what they set
    config = run.config() or nest_dotted(parsed.overrides)
    step0 = run.metrics.filter(pl.col("step") == 0).get_column("metric").to_list()
    signals = {**signals, "trains_from_step_0": any(m.startswith("actor/") for m in step0)}
    meta: dict[str, Any] = {
        "verl_version": guess_version(names, signals, config),
        "ray_actors": signals["ray_actors"],
    }
    if signals["three_decimals"]:
        meta["value_resolution"] = THREE_DECIMALS_RESOLUTION
    meta.update(_algorithm(names, config))
    trainer = config.get("trainer") if isinstance(config.get("trainer"), dict) else {}
    for key, name in (("project", "project_name"), ("experiment", "experiment_name")):
        if trainer.get(name) is not None:
            meta[key] = trainer[name]
    if parsed.total_training_steps is not None:
        meta["total_training_steps"] = parsed.total_training_steps
    if parsed.train_dataloader_size is not None:
        meta["train_dataloader_size"] = parsed.train_dataloader_size
    if parsed.overrides:
        meta["overrides"] = dict(parsed.overrides)
    if parsed.wandb_summary:
        meta["wandb_summary"] = dict(parsed.wandb_summary)
    if parsed.run_end:  # for telling a crash from a normal shutdown
        meta["run_end"] = {k: dict(v) for k, v in parsed.run_end.items()}
    if layout == "non-native":
        meta["layout"] = "non-native"
    if parsed.event_counts:
        meta["event_counts"] = dict(sorted(parsed.event_counts.items()))
    return meta


def guess_version(names: set[str], signals: dict[str, Any], config: dict[str, Any]) -> str | None:
    """verl version range from what the log shows (verl_formats.md §1.0), no newer than the
    verl that existed on the day its logger lines show (`verl_version.newest_on`)."""
    newest = verl_version.newest_on(signals.get("log_date"))
    if newest is not None and not verl_version.at_least(newest, "0.9"):
        signals = {**signals, "logger_lines": False}  # 0.9's logger format: not yet then
    return verl_version.cap(_guess_version(names, signals, config), newest)


def _guess_version(names: set[str], signals: dict[str, Any], config: dict[str, Any]) -> str | None:

    def has(prefix: str) -> bool:
        return any(n.startswith(prefix) for n in names)

    actors = set(signals.get("ray_actors", ()))
    if names and signals.get("three_decimals"):
        if (
            "actor/lr(1e-4)" in names
            or "critic/lr(1e-4)" in names
            or has("timing/")
            or signals.get("trains_from_step_0")
        ):
            return "0.1"
        if (
            has("val-core/")
            or has("val-aux/")
            or "training/global_step" in names
            or "actor/entropy" in names
        ):
            return "0.4"
        return "0.2-0.3"
    if names:
        # `np.float64(…)` values say numpy ≥ 2, which 0.9 requires but earlier verl runs with
        # too (real 0.5-era logs print them), so they date nothing.
        if (
            "TaskRunnerV1" in actors
            or signals.get("logger_lines")
            or has("training/off_policy/")
            or has("training/num_turns/")
        ):
            return "0.9"
        if has("actor/perf/") or has("critic/perf/") or "actor/loss" in names:
            return "0.8"
        if has("response_length_non_aborted/") or "response/aborted_ratio" in names:
            return "0.6-0.7"  # the aborted-response keys came in 0.6.0 (verl_metrics.md)
        if (  # values printed in full (a W&B summary) with the ≤ 0.3 key set
            "actor/entropy_loss" in names
            and "actor/entropy" not in names
            and not has("val-core/")
            and "training/global_step" not in names
        ):
            return "0.1-0.3"
        return "0.5-0.7"
    # No step values: only the start-up lines and the config can tell.
    if "TaskRunnerV1" in actors or signals.get("logger_lines") or "distillation" in config:
        return "0.9"
    if "main_task" in actors:
        return "0.1-0.2"
    if "TaskRunner" in actors:
        return "0.3-0.8"
    return None


def _algorithm(names: set[str], config: dict[str, Any]) -> dict[str, Any]:
    algorithm = config.get("algorithm") if isinstance(config.get("algorithm"), dict) else {}
    adv = algorithm.get("adv_estimator")
    if isinstance(adv, str) and adv:
        return {
            "algorithm": "ppo" if adv == "gae" else adv,
            "adv_estimator": adv,
            "algorithm_source": "config",
        }
    if "critic/vf_loss" in names or any(n.startswith("critic/values/") for n in names):
        return {"algorithm": "ppo", "algorithm_source": "metrics"}
    if any(n.startswith("actor/") for n in names):
        return {"algorithm": "grpo", "algorithm_source": "metrics"}
    return {"algorithm": None}
