"""`logscope analyze`: read logs, run every detector, print the report."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from logscope.cli.common import (
    STDIN,
    ConfigOption,
    FailOn,
    FailOnOption,
    FormatOption,
    FrameworkOption,
    NoCacheOption,
    OnlyOption,
    OutputFormat,
    OutputOption,
    SkipOption,
    SourceOption,
    StoreOption,
    emit_fleet,
    emit_reports,
    progress_bar,
    same_file,
    split_codes,
    stdin_as_file,
    user_errors,
)
from logscope.exceptions import LogscopeError
from logscope.model import Source


class Executor(StrEnum):
    process = "process"
    ray = "ray"


def analyze(
    paths: Annotated[
        # str, not Path: Path("wandb://e/p/id") would collapse the URI's "//"
        list[str],
        typer.Argument(
            metavar="PATH...",
            help="Logs, JSONL, TensorBoard or W&B runs, CSV exports, or folders of them; - reads "
            "standard input (a pasted excerpt).",
        ),
    ],
    format: FormatOption = OutputFormat.rich,
    output: OutputOption = None,
    details: Annotated[
        bool, typer.Option("--details", help="With many runs: each run's report after the table.")
    ] = False,
    fail_on: FailOnOption = FailOn.error,
    only: OnlyOption = None,
    skip: SkipOption = None,
    source: SourceOption = None,
    framework: FrameworkOption = None,
    store: StoreOption = None,
    no_cache: NoCacheOption = False,
    config: ConfigOption = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", min=1, help="Runs analysed at once (default: the machine's cores)."
        ),
    ] = None,
    executor: Annotated[
        Executor,
        typer.Option(
            "--executor",
            help="process: a pool on this machine; ray: one Ray task per run (logscope[ray]; "
            "inputs and --store on storage every node sees).",
        ),
    ] = Executor.process,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            metavar="ADDR",
            help="With --executor ray: the cluster (default: the one Ray finds, else local).",
        ),
    ] = None,
    no_stitch: Annotated[
        bool,
        typer.Option(
            "--no-stitch",
            help="Keep each resumed segment and rotated file a run of its own (default: joined).",
        ),
    ] = False,
) -> None:
    """Diagnose verl runs: what went wrong, where, and which parameter to change.

    PATH may be a file, a folder (searched for runs) or a glob. Many runs give a triage table,
    worst first; --details adds each run's report, --format json one object with both. The
    segments of a resumed run (console logs, W&B runs) and rotated logs are joined into one run.

    --format verdict: a compact JSON for agents (at most 4 KB: status, first incident, top
    findings with their overrides, what was not understood; see docs/agents.md).

    Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 nothing could be
    read (an input that cannot be read among others is reported as such, and the rest analysed).

    Example: logscope analyze verl_tuned.log --format json -o report.json

    Example: logscope analyze 'runs/**/*.log' --jobs 8

    A pasted excerpt: pbpaste | logscope analyze -
    """
    from logscope import fleet, gc_hold, settings

    # no garbage collection until the pipeline's code is loaded (logscope.gc_hold)
    with gc_hold.held(), user_errors(), settings.using(config):
        if output is not None and any(same_file(output, Path(p)) for p in paths):
            raise LogscopeError(f"--output {output} is one of the inputs; refusing to overwrite it")
        entries, passed = fleet.inputs([p for p in paths if p != STDIN])
        options = {
            "source": source,
            "framework": framework,
            "only": split_codes(only),
            "skip": split_codes(skip),
            "store_dir": store,
            "use_cache": not no_cache,
        }
        shown = format == OutputFormat.rich or output is not None
        reports = _from_stdin(options) if STDIN in paths else []
        one = len(entries) == 1 and executor == Executor.process
        with (
            progress_bar(enabled=shown and one) as progress,
            progress_bar(enabled=shown and not one, counting="runs") as done,
        ):
            reports += fleet.analyze_all(
                entries,
                stitch=not no_stitch,
                jobs=jobs,
                done=done,
                executor=executor.value,
                ray_address=ray_address,
                progress=progress,
                **options,
            )
        fleet.require_readable(reports)
        if len(reports) == 1 and not passed:
            emit_reports(reports, format, output)
        else:
            emit_fleet(reports, format, output, passed, details)
    if any(r.fails(fail_on.value) for r in reports):
        raise typer.Exit(1)


def _from_stdin(options: dict) -> list:
    """The report of a pasted excerpt: never cached; the working directory's settings unless
    --config names a file; its source shown as `<stdin>`."""
    from logscope import settings
    from logscope.analyze import analyze_paths

    with (
        stdin_as_file() as (real, shown),
        settings.using(settings.explicit_file() or settings.find(Path.cwd())),
    ):
        found = analyze_paths([real], **{**options, "use_cache": False})
    for report in found:
        report.run.source = Source(report.run.source.kind, shown)
    return found
