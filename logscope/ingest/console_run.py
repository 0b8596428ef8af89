"""Assemble a Run from what the console parser (and the bulk path) collected; guess the metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from logscope.ingest import verl_text as vt
from logscope.ingest._common import nest_dotted
from logscope.model import ConfigSegment, ParseStats, Run, Source

if TYPE_CHECKING:
    from logscope.ingest.console_parser import ConsoleParser, FastPart

ROWS_SCHEMA: dict[str, pl.DataType] = {
    "seq": pl.Int64(),
    "step": pl.Int64(),
    "metric": pl.String(),
    "value": pl.Float64(),
}
THREE_DECIMALS_RESOLUTION = 0.0005


def build_run(
    parser: ConsoleParser, source: Source, run_id: str | None, fast: FastPart | None
) -> Run:
    from logscope.ingest.console_parser import FastPart

    fast = fast or FastPart()
    slow = [f for f in [*parser._frames, rows_frame(parser)] if f.height]
    frames = [f for f in fast.frames if f.height] + slow
    rows = pl.concat(frames) if frames else rows_frame(parser)  # not in file order: fine
    names = set(fast.metric_names)
    for frame in slow:
        names.update(frame.get_column("metric").unique().to_list())

    mark_seq = np.concatenate(
        [*fast.step_seqs, np.array([s for s, _ in parser._marks], dtype=np.int64)]
    ).astype(np.int64)
    mark_step = np.concatenate(
        [*fast.steps, np.array([s for _, s in parser._marks], dtype=np.int64)]
    ).astype(np.int64)
    order = np.argsort(mark_seq, kind="stable")
    mark_seq, mark_step = mark_seq[order], mark_step[order]
    notes: list[str] = []
    if parser._step_lines + fast.step_lines == 0:
        pasted = _pasted_steps(parser, notes)
        if pasted is not None:
            rows = pl.concat([rows, pasted])
            names.update(pasted.get_column("metric").unique().to_list())
            marks = pasted.select("seq", "step").unique().sort("seq")
            mark_seq = marks.get_column("seq").to_numpy()
            mark_step = marks.get_column("step").to_numpy()
    if parser.unnumbered:
        rows, mark_step = _renumber(parser, rows, mark_seq, mark_step, notes)

    uniq, counts = np.unique(mark_step, return_counts=True)
    if (counts > 1).any():
        # A restart logged some steps again: the latest value of each (step, metric) wins.
        again = pl.col("step").is_in(uniq[counts > 1].tolist())
        latest = rows.filter(again).sort("seq").unique(["step", "metric"], keep="last")
        rows = pl.concat([rows.filter(~again), latest])
    metrics = rows.select(
        "step", "metric", "value", pl.lit(None, dtype=pl.Float64).alias("wall_time")
    )

    segments = []
    for seq, line_no, config, _hint in parser._dumps:
        i = int(np.searchsorted(mark_seq, seq, side="right"))
        if i < len(mark_step):
            first = int(mark_step[i])
        elif i > 0:
            first = int(mark_step[i - 1]) + 1
        else:
            first = 0
        segments.append(ConfigSegment(first, config, line_no))

    run = Run(
        id=run_id or "",
        source=source,
        config_segments=segments,
        metrics=metrics,
        events=sorted(parser.events, key=lambda e: e.line_no),
        parse_stats=_stats(parser, fast),
    )
    run.parse_stats.notes[:0] = notes
    run.meta = _meta(run, names, parser, fast)
    return run


def _pasted_steps(parser: ConsoleParser, notes: list[str]) -> pl.DataFrame | None:
    """With no verl step line at all: metrics pasted in another layout (`key: value` lines), or
    else W&B's run summary (the final values), as step rows (seq, step, metric, value)."""
    records = [(r.line_no, r.step, r.pairs) for r in parser.loose.steps()]
    if records:
        parser.pasted_layout = "non-native"
        notes.append(
            f"no verl step line: read {len(records)} step(s) from metrics in another layout "
            f"(key: value pairs from line {records[0][0]}; not verl's `step:N - key:value`)"
        )
    elif parser.wandb.summary:
        parser.pasted_layout = "wandb-summary"
        records = [(parser.wandb.line_no or 0, None, parser.wandb.summary)]
    else:
        return None
    seqs, steps, keys, values = [], [], [], []
    previous = 0
    for line_no, marked, pairs in records:
        logged = pairs.get("training/global_step")
        if marked is not None:
            step = marked
        elif logged is not None and logged == logged:
            step = int(logged)
        else:
            step = previous + 1
        previous = step
        for key, value in pairs.items():
            seqs.append(line_no << vt.SUB_BITS)
            steps.append(step)
            keys.append(key)
            values.append(value)
    if parser.pasted_layout == "wandb-summary":
        notes.append(f"no verl step line: read W&B's run summary (final values) as step {step}")
    parser.pasted_step_records = len(records)
    return pl.DataFrame(
        {"seq": seqs, "step": steps, "metric": keys, "value": values}, schema=ROWS_SCHEMA
    )


def _renumber(
    parser: ConsoleParser,
    rows: pl.DataFrame,
    mark_seq: np.ndarray,
    mark_step: np.ndarray,
    notes: list[str],
) -> tuple[pl.DataFrame, np.ndarray]:
    """Step records whose `step:N` was cut off before any numbered step were numbered from 1; with
    a numbered step after them, they are the steps just before it."""
    provisional = np.isin(mark_seq, np.array(parser.unnumbered, dtype=np.int64))
    later = np.flatnonzero(~provisional & (mark_seq > max(parser.unnumbered)))
    if len(later):
        shift = int(mark_step[later[0]]) - 1 - int(mark_step[provisional].max())
        if shift > 0:
            old = rows.get_column("seq").is_in(parser.unnumbered)
            rows = rows.with_columns(
                step=pl.when(old).then(pl.col("step") + shift).otherwise(pl.col("step"))
            )
            mark_step = np.where(provisional, mark_step + shift, mark_step)
            last_line = int(mark_seq[later[0]]) >> vt.SUB_BITS
            first_line = min(parser.unnumbered) >> vt.SUB_BITS
            for event in parser.events:
                if first_line < event.line_no < last_line and event.step_hint is not None:
                    event.step_hint += shift
    numbers = sorted({int(x) for x in mark_step[provisional]})
    notes.append(
        f"{len(numbers)} step record(s) at the start had their `step:N` cut off; read as "
        + (f"step {numbers[0]}" if len(numbers) == 1 else f"steps {numbers[0]}–{numbers[-1]}")
    )
    return rows, mark_step


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


def rows_frame(parser: ConsoleParser) -> pl.DataFrame:
    """The metric rows the parser holds in lists, as a frame."""
    return pl.DataFrame(
        {
            "seq": parser._rows_seq,
            "step": parser._rows_step,
            "metric": parser._rows_key,
            "value": parser._rows_value,
        },
        schema=ROWS_SCHEMA,
    )


def _stats(parser: ConsoleParser, fast: FastPart) -> ParseStats:
    stats = ParseStats(
        lines_read=parser.stats.lines_read,
        step_lines=parser._step_lines + fast.step_lines + parser.pasted_step_records,
        skipped_lines=parser._bad_count,
        skipped_examples=[(n, t) for n, t, _ in sorted(parser._bad)[: ParseStats.MAX_EXAMPLES]],
        notes=list(parser.stats.notes),
        skip_reasons=dict(parser._bad_reasons),
    )
    truncated = parser._truncated
    if truncated:
        stats.notes.append(f"{truncated} step line(s) ended in an incomplete item (ignored)")
    if parser.damage:
        stats.notes.append(f"{parser.damage} undecodable byte sequence(s) replaced (not UTF-8)")
    if parser.nul_bytes:
        stats.notes.append(f"{parser.nul_bytes} NUL byte(s) removed")
    if parser._unparsed_dumps:
        stats.notes.append(f"{parser._unparsed_dumps} config dump(s) could not be parsed")
    for kind, n in sorted(parser._dropped.items()):
        stats.notes.append(f"{n} more '{kind}' event(s) not kept (repeated)")
    return stats


def _meta(run: Run, names: set[str], parser: ConsoleParser, fast: FastPart) -> dict[str, Any]:
    n_values = parser._n_values + fast.n_values
    three = n_values > 0 and parser._not_three + fast.not_three == 0
    # without a config dump, the Hydra overrides of a crashed run tell what they set
    config = run.config() or nest_dotted(parser.overrides)
    step0 = run.metrics.filter(pl.col("step") == 0).get_column("metric").to_list()
    signals = {
        "three_decimals": three,
        "numpy_wrappers": parser._n_np + fast.n_np > 0,
        "ray_actors": sorted(parser.names | fast.names),
        "training_progress": parser.saw_progress or fast.saw_progress,
        "logger_lines": parser.logger_lines,
        "trains_from_step_0": any(m.startswith("actor/") for m in step0),
    }
    meta: dict[str, Any] = {
        "verl_version": guess_version(names, signals, config),
        "ray_actors": signals["ray_actors"],
    }
    if three:
        meta["value_resolution"] = THREE_DECIMALS_RESOLUTION
    meta.update(_algorithm(names, config))
    trainer = config.get("trainer") if isinstance(config.get("trainer"), dict) else {}
    for key, field in (("project", "project_name"), ("experiment", "experiment_name")):
        if trainer.get(field) is not None:
            meta[key] = trainer[field]
    if parser.total_training_steps is not None:
        meta["total_training_steps"] = parser.total_training_steps
    if parser.overrides:
        meta["overrides"] = dict(parser.overrides)
    if parser.wandb.summary:
        meta["wandb_summary"] = dict(parser.wandb.summary)
    if parser.run_end:  # for telling a crash from a normal shutdown
        meta["run_end"] = {k: dict(v) for k, v in parser.run_end.items()}
    if parser.pasted_layout == "non-native":
        meta["layout"] = "non-native"
    if parser._kind_counts:
        meta["event_counts"] = dict(sorted(parser._kind_counts.items()))
    return meta


def guess_version(names: set[str], signals: dict[str, Any], config: dict[str, Any]) -> str | None:
    """verl version range from what the log shows (verl_formats.md §1.0)."""

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
        if (
            signals.get("numpy_wrappers")
            or "TaskRunnerV1" in actors
            or signals.get("logger_lines")
            or has("training/off_policy/")
            or has("training/num_turns/")
            or has("response_length_non_aborted/")
            or "response/aborted_ratio" in names
        ):
            return "0.9"
        if has("actor/perf/") or has("critic/perf/") or "actor/loss" in names:
            return "0.8"
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
